"""Offline entity extraction: speakers, proper names, and first-person facts.

Pure pattern work over the text, no model: every speaker becomes a PERSON observation; proper
names in the text become entities with a type guessed from their context ("my dog Max" -> PET,
"moved to Denver" -> PLACE); first-person statements become attributes and relations of the
speaker ("my sister Anna" -> relation ``sister``, "I live in Denver" -> ``location``). Facts said
about the other speaker ("your sister Anna") are kept with lower confidence.
"""

from __future__ import annotations

import functools
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from gravity_core.extract.offline.text import (
    COMMON_WORDS,
    FIRST_NAMES,
    NON_NAME_WORDS,
    ORGANIZATION_WORDS,
    PLACE_NAMES,
    PLACE_WORDS,
    STOP_WORDS,
    NameMention,
    clip_value,
    find_names,
    find_titles,
    is_capitalized,
    lowercase_vocabulary,
    normalize_quotes,
    split_sentences,
    word_set,
)
from gravity_core.schema import (
    AttributeObservation,
    EntityObservation,
    EntityType,
    KnowledgeBase,
    RelationObservation,
    Utterance,
)

__all__ = ["extract_entities"]

_log = logging.getLogger(__name__)

EXPLICIT = 0.8
WEAK = 0.5
SECOND_PERSON = 0.5
SECOND_PERSON_WEAK = 0.3

# Relation words after "my": canonical relation name.
_RELATIONS: dict[str, str] = {
    "sister": "sister",
    "sis": "sister",
    "brother": "brother",
    "bro": "brother",
    "sibling": "sibling",
    "mom": "mother",
    "mum": "mother",
    "mother": "mother",
    "mommy": "mother",
    "mama": "mother",
    "dad": "father",
    "father": "father",
    "daddy": "father",
    "papa": "father",
    "husband": "husband",
    "hubby": "husband",
    "wife": "wife",
    "partner": "partner",
    "spouse": "spouse",
    "boyfriend": "boyfriend",
    "girlfriend": "girlfriend",
    "fiance": "fiance",
    "fiancee": "fiance",
    "son": "son",
    "daughter": "daughter",
    "kid": "child",
    "kids": "child",
    "child": "child",
    "children": "child",
    "baby": "child",
    "stepson": "stepson",
    "stepdaughter": "stepdaughter",
    "friend": "friend",
    "friends": "friend",
    "bestie": "best_friend",
    "best friend": "best_friend",
    "buddy": "friend",
    "pal": "friend",
    "boss": "boss",
    "manager": "boss",
    "colleague": "colleague",
    "coworker": "colleague",
    "co-worker": "colleague",
    "cousin": "cousin",
    "aunt": "aunt",
    "auntie": "aunt",
    "uncle": "uncle",
    "niece": "niece",
    "nephew": "nephew",
    "grandma": "grandmother",
    "grandmother": "grandmother",
    "granny": "grandmother",
    "nana": "grandmother",
    "grandpa": "grandfather",
    "grandfather": "grandfather",
    "grandson": "grandson",
    "granddaughter": "granddaughter",
    "mentor": "mentor",
    "teacher": "teacher",
    "coach": "coach",
    "neighbor": "neighbor",
    "neighbour": "neighbor",
    "roommate": "roommate",
    "teammate": "teammate",
    "classmate": "classmate",
    "stepmom": "stepmother",
    "stepdad": "stepfather",
    "therapist": "therapist",
    "doctor": "doctor",
    "landlord": "landlord",
    "ex": "ex",
}
_SPOUSES = frozenset({"husband", "wife", "spouse"})
_PETS = (
    "dog|dogs|cat|cats|pet|pets|puppy|pup|kitten|kitty|bunny|rabbit|hamster|parrot|bird|fish|turtle|"
    "horse|pony|guinea pig|snake|lizard|ferret|goldfish|doggo|pooch"
)
_NAME = (
    r"(?P<name>[A-Z][a-zA-Z'\-]+(?:\s+[A-Z][a-zA-Z'\-]+)?(?:(?:,\s*|\s+and\s+|\s*&\s*)[A-Z][a-zA-Z'\-]+)*)"
)
_OCCUPATIONS = word_set(
    """
nurse teacher doctor physician surgeon engineer developer programmer designer artist painter sculptor
writer author novelist poet journalist reporter editor photographer musician singer songwriter dancer
choreographer chef cook baker student lawyer attorney accountant counselor counsellor therapist
psychologist psychiatrist firefighter officer cop soldier veteran pilot driver mechanic electrician
plumber carpenter farmer scientist researcher professor lecturer tutor coach trainer athlete player
gamer streamer youtuber blogger vlogger influencer entrepreneur founder ceo manager consultant analyst
architect pharmacist dentist vet veterinarian paramedic librarian cashier barista waiter waitress
bartender volunteer activist politician filmmaker director actor actress producer screenwriter comedian
model stylist hairdresser barber realtor intern retiree freelancer instructor mentor worker assistant
clerk technician secretary caregiver nanny babysitter homemaker administrator official councilman
councilwoman representative senator mayor pastor minister priest rabbi banker broker investor trader
salesman saleswoman marketer recruiter illustrator animator composer drummer guitarist pianist violinist
rapper dj host podcaster coder tester scrum captain sergeant lieutenant guard forward center centre
midfielder defender goalkeeper goalie striker pitcher catcher quarterback receiver linebacker shortstop
point mom dad parent grandparent
"""
)
_NOT_OCCUPATIONS = word_set(
    """
believer fan lover supporter fighter sucker member part bit lot mess person natural beginner winner
loser survivor dreamer thinker doer go-getter worrier planner procrastinator introvert extrovert morning
night owl homebody fighter warrior keeper reader learner listener talker
"""
)
_IDENTITIES = (
    "transgender|trans|gay|lesbian|bisexual|bi|queer|nonbinary|non-binary|asexual|pansexual|"
    "genderqueer|genderfluid|intersex|cisgender|straight"
)
_NUMBER = r"\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
_ADV = (
    r"(?:(?:really|absolutely|totally|just|also|still|so|truly|definitely|actually|now|currently|"
    r"honestly|always|genuinely|simply|kinda|kind of|pretty much|especially|particularly|do|"
    r"personally|recently|finally|officially|both|all)\s+)*"
)
_BAD_VALUE_START = word_set(
    """
it it's its that that's this these those them him her you your yourself how what when where why who
which there here everything anything something nothing everyone anyone someone all both being seeing
hearing watching knowing about so such the idea the way one ones his their is was are were has had will
would can could and or but because to be i i'm i've i'd we we're you're
"""
)
_NOT_EMPLOYERS = frozenset({"myself", "yourself", "hours", "a living", "free", "home", "fun", "a while"})


@dataclass(frozen=True)
class _Fact:
    """One attribute or relation found by a pattern."""

    kind: str  # "attr" | "rel"
    name: str
    value: str
    confidence: float
    exclusive: bool = False
    object_type: EntityType | None = None


@dataclass
class _Pattern:
    regex: re.Pattern[str]
    handler: Callable[[re.Match[str], float], list[_Fact]]
    second_person: bool  # also applies to "you/your" about the other speaker


@dataclass
class _Acc:
    """What the batch says about one entity, accumulated in order of appearance."""

    name: str
    is_speaker: bool = False
    type_votes: Counter[EntityType] = field(default_factory=Counter)
    aliases: list[str] = field(default_factory=list)
    attributes: dict[tuple[str, str], AttributeObservation] = field(default_factory=dict)
    relations: dict[tuple[str, str], RelationObservation] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def add_source(self, uid: str) -> None:
        if uid not in self.sources:
            self.sources.append(uid)

    def add_attribute(self, name: str, value: str, confidence: float, exclusive: bool, uid: str) -> None:
        key = (name, value.casefold())
        old = self.attributes.get(key)
        if old is None:
            self.attributes[key] = AttributeObservation(
                name=name, value=value, confidence=confidence, exclusive=exclusive, sources=[uid]
            )
            return
        sources = old.sources if uid in old.sources else [*old.sources, uid]
        self.attributes[key] = old.model_copy(
            update={"confidence": max(old.confidence, confidence), "sources": sources}
        )

    def add_relation(
        self, relation: str, obj: str, object_type: EntityType | None, confidence: float, uid: str
    ) -> None:
        key = (relation, obj.casefold())
        old = self.relations.get(key)
        if old is None:
            self.relations[key] = RelationObservation(
                relation=relation, object=obj, object_type=object_type, confidence=confidence, sources=[uid]
            )
            return
        sources = old.sources if uid in old.sources else [*old.sources, uid]
        self.relations[key] = old.model_copy(
            update={"confidence": max(old.confidence, confidence), "sources": sources}
        )

    def build(self) -> EntityObservation:
        return EntityObservation(
            name=self.name,
            type=_pick_type(self.type_votes),
            aliases=self.aliases,
            is_speaker=self.is_speaker,
            attributes=list(self.attributes.values()),
            relations=list(self.relations.values()),
            sources=self.sources,
        )


_TYPE_PRIORITY = [
    EntityType.PERSON,
    EntityType.PET,
    EntityType.PLACE,
    EntityType.ORGANIZATION,
    EntityType.WORK,
    EntityType.ACTIVITY,
    EntityType.OBJECT,
]


def _pick_type(votes: Counter[EntityType]) -> EntityType:
    best = EntityType.OTHER
    best_count = 0
    for etype in _TYPE_PRIORITY:
        if votes[etype] > best_count:
            best, best_count = etype, votes[etype]
    return best


# --------------------------------------------------------------------------- value cleaning


_TIME_PHRASE_RE = re.compile(
    r"\s*\b(?:(?:about|over|almost|nearly|around|like|just)\s+)?(?:a|an|one|two|three|four|five|six|seven|"
    r"eight|nine|ten|a\s+few|a\s+couple(?:\s+of)?|several|\d+)\s+(?:years?|months?|weeks?|days?|hours?)\s+ago\b"
    r"|\s*\b(?:last|this|next|every)\s+(?:week|weekend|month|year|summer|winter|spring|fall|autumn|night|"
    r"morning|evening|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b"
    r"|\s*\b(?:yesterday|today|tonight|tomorrow|recently|lately|these\s+days|right\s+now|now)\b",
    re.IGNORECASE,
)


def _clean(raw: str, max_words: int = 8) -> str | None:
    """A clean attribute value, or None when what follows the pattern is not a usable value."""
    raw = normalize_quotes(raw).lstrip()
    if not raw or not (raw[0].isalnum() or raw[0] == '"'):
        return None
    quoted = re.match(r'"([^"]{1,60})"', raw)
    if quoted:
        value = quoted.group(1).strip(" ,.!?")
    else:
        value = clip_value(_TIME_PHRASE_RE.sub("", clip_value(raw, max_words=40)), max_words=max_words)
    value = re.sub(r"^(?:to\s+)", "", value, flags=re.IGNORECASE)
    value = re.sub(r"\s+(?:too|as well|a lot|so much|very much|lately|now|though|anyway|either)$", "", value)
    if not value:
        return None
    words = value.lower().split()
    if words[0] in _BAD_VALUE_START or " ".join(words[:2]) in _BAD_VALUE_START:
        return None
    return value


def _strip_article(value: str) -> str:
    return re.sub(r"^(?:a|an|the)\s+", "", value, flags=re.IGNORECASE)


def _name_or_phrase(raw: str, max_words: int = 5) -> str | None:
    """A name if ``raw`` starts with one ("Google as an engineer" -> "Google"), else a short phrase."""
    raw = raw.strip()
    if raw and is_capitalized(raw):
        names = find_names(raw, known=_ALWAYS_KNOWN)
        if names and names[0].start == 0:
            return names[0].text
        first = raw.split()[0].strip(".,!?;:")
        return first if first and first.lower() not in _BAD_VALUE_START else None
    return _clean(raw, max_words=max_words)


# Any capitalized first word is accepted in _name_or_phrase: the pattern already says it is a name.
class _AlwaysKnown:
    def __contains__(self, item: object) -> bool:
        return True


_ALWAYS_KNOWN = _AlwaysKnown()


def _person_names(raw: str) -> list[str]:
    """Names right at the start of ``raw``: "Anna and Tom, who..." -> ["Anna", "Tom"]."""
    out: list[str] = []
    for part in re.split(r",\s*(?:and\s+)?|\s+and\s+|\s*&\s*", raw.strip(), maxsplit=3):
        match = re.match(r"([A-Z][a-zA-Z'\-]+(?:\s+[A-Z][a-zA-Z'\-]+)?)", part)
        if match is None:
            break
        name = re.sub(r"'s?$", "", match.group(1))
        first = name.split()[0].lower()
        if (
            first in _BAD_VALUE_START
            or first in {"i", "my", "we", "our"}
            or _common_word(first)
            or not _looks_like_name(name)
        ):
            break
        out.append(name)
        if match.end() < len(part.rstrip(" .!?")):
            break
    return out


# First names that end like adverbs; any other capitalized "-ly" word ("Thankfully") is no name.
_LY_NAMES = word_set("ally beverly carly everly kimberly lily molly polly sally shelly emily kelly holly")


def _common_word(word: str) -> bool:
    """A word that is never a person's name: a common word, an interjection or an "-ly" adverb."""
    if len(word) < 2:
        return True
    if word in FIRST_NAMES or word in _LY_NAMES:
        return False
    return word in COMMON_WORDS or word in NON_NAME_WORDS or (word.endswith("ly") and len(word) > 4)


def _looks_like_name(name: str) -> bool:
    names = find_names(f"x {name}")
    return bool(names) and names[0].text.split()[0] == name.split()[0]


# --------------------------------------------------------------------------- pattern handlers


def _vocative(match: re.Match[str]) -> bool:
    """'your kids, John!': a comma then a name closing the sentence addresses someone."""
    between = match.string[match.start("rel") : match.start("name")]
    return "," in between and re.match(r"\s*(?:[.!?]|$)", match.string[match.end("name") :]) is not None


def _h_relation(match: re.Match[str], conf: float) -> list[_Fact]:
    if _vocative(match):
        return []
    relation = _RELATIONS[match.group("rel").lower()]
    facts = [
        _Fact("rel", relation, name, conf, object_type=EntityType.PERSON)
        for name in _person_names(match.group("name"))
    ]
    if facts and relation in _SPOUSES:
        facts.append(_Fact("attr", "relationship_status", "married", min(conf, WEAK), exclusive=True))
    return facts


def _h_relation_named_first(match: re.Match[str], conf: float) -> list[_Fact]:
    names = _person_names(match.group("name"))
    rel = _RELATIONS.get(match.group("rel").lower())
    if rel is None or not names:
        return []
    return [_Fact("rel", rel, names[0], conf, object_type=EntityType.PERSON)]


def _h_spouse(match: re.Match[str], conf: float) -> list[_Fact]:
    return [_Fact("attr", "relationship_status", "married", min(conf, WEAK), exclusive=True)]


def _species(word: str) -> str:
    word = word.lower()
    return {"dogs": "dog", "cats": "cat", "pets": "pet", "pup": "puppy", "doggo": "dog", "pooch": "dog"}.get(
        word, word
    )


_OWN_PET_RE = re.compile(
    rf"\b(?:my|our|got|adopted|have|rescued)\s+(?:\w+\s+){{0,2}}(?P<pet>{_PETS})\b", re.IGNORECASE
)
_PET_NAME_RE = re.compile(rf"\b(?:[Hh]is|[Hh]er|[Ii]ts|[Tt]heir)\s+names?(?:'s|\s+is|\s+are)\s+{_NAME}")


def _h_pet(match: re.Match[str], conf: float) -> list[_Fact]:
    if "rel" in match.groupdict() and _vocative(match):
        return []
    species = _species(match.group("pet"))
    facts = []
    for name in _person_names(match.group("name")):
        facts.append(_Fact("rel", "pet", name, conf, object_type=EntityType.PET))
        if species not in ("pet",):
            facts.append(_Fact("species", name, species, conf))
    return facts


def _h_have_pets(match: re.Match[str], conf: float) -> list[_Fact]:
    return [_Fact("attr", "pets", f"{match.group('num')} {match.group('pet')}".lower(), conf)]


def _h_employer(match: re.Match[str], conf: float) -> list[_Fact]:
    raw = match.group("org").strip()
    if not is_capitalized(raw) and not re.match(r"(?:a|an|the|my|our|this|that)\s", raw, re.IGNORECASE):
        return []  # "I work for hours": not a workplace
    value = _name_or_phrase(raw)
    if value is None or value.lower() in _NOT_EMPLOYERS:
        return []
    value = _strip_article(value) if not is_capitalized(value) else value
    facts = [_Fact("attr", "employer", value, conf, exclusive=True)]
    if is_capitalized(value):
        facts.append(_Fact("rel", "works_at", value, conf, object_type=EntityType.ORGANIZATION))
    return facts


def _occupation_value(raw: str) -> tuple[str, str | None] | None:
    """(occupation, rest after 'at'/'for') when ``raw`` names a job, else None."""
    parts = re.split(r"\s+(?:at|for|with)\s+", raw, maxsplit=1)
    head_part = _TIME_PHRASE_RE.sub("", clip_value(parts[0], max_words=12))
    org = parts[1] if len(parts) > 1 else ""
    value = clip_value(head_part, max_words=4)
    if not value:
        return None
    value = re.sub(r"^(?:only|sole|one|other|new|current)\s+", "", value, flags=re.IGNORECASE)
    words = value.lower().split()
    # "backend developer they've got": the job ends at its last occupation noun.
    last = max((k for k, w in enumerate(words) if _is_job_noun(w)), default=None)
    if last is not None and last < len(words) - 1:
        words = words[: last + 1]
        value = " ".join(value.split()[: last + 1])
    if not words:
        return None
    head = words[-1]
    if head in _NOT_OCCUPATIONS or any(w in _NOT_OCCUPATIONS for w in words):
        return None
    if not _is_job_noun(head):
        return None
    return value, (org or None)


def _is_job_noun(word: str) -> bool:
    return word in _OCCUPATIONS or (len(word) > 5 and word.endswith(("ist", "ian", "ologist", "grapher")))


def _h_occupation(match: re.Match[str], conf: float) -> list[_Fact]:
    found = _occupation_value(match.group("job"))
    if found is None:
        return []
    job, org = found
    facts = [_Fact("attr", "occupation", job, conf, exclusive=True)]
    if org:
        where = _name_or_phrase(org)
        if where is not None and is_capitalized(where):
            name = "school" if job.split()[-1] == "student" else "employer"
            facts.append(_Fact("attr", name, where, conf, exclusive=True))
            if name == "employer":
                facts.append(_Fact("rel", "works_at", where, conf, object_type=EntityType.ORGANIZATION))
    return facts


def _h_employer_named(match: re.Match[str], conf: float) -> list[_Fact]:
    """Employer from a pattern that only holds with a name ("I start at Harbourside" but not "at 9")."""
    raw = match.group("org").strip()
    if not is_capitalized(raw) or re.match(r"\d", raw):
        return []
    return _h_employer(match, conf)


def _h_employer_as(match: re.Match[str], conf: float) -> list[_Fact]:
    """'I've worked at X as a nurse': the employer, and the occupation after 'as a'."""
    facts = _h_employer(match, conf)
    role = re.search(r"\bas\s+an?\s+(?P<job>.+)", match.group("org"))
    if facts and role is not None:
        found = _occupation_value(role.group("job"))
        if found is not None:
            facts.append(_Fact("attr", "occupation", found[0], conf, exclusive=True))
    return facts


def _h_place(name: str, confidence: float = 1.0) -> Callable[[re.Match[str], float], list[_Fact]]:
    """A place attribute that holds only when the pattern is followed by a name ("my landlord in Leeds")."""

    def handler(match: re.Match[str], conf: float) -> list[_Fact]:
        raw = match.group("v").strip()
        if not is_capitalized(raw):
            return []
        value = _name_or_phrase(raw, 4)
        if value is None or value.split()[0].lower() in _TIME_WORDS or value.lower() in _NOT_PLACES:
            return []
        return [_Fact("attr", name, value, min(conf, confidence), exclusive=True)]

    return handler


# Capitalized words that follow "in"/"to" without naming a place.
_NOT_PLACES = word_set(
    """
january february march april may june july august september october november december monday tuesday
wednesday thursday friday saturday sunday spring summer autumn fall winter christmas easter
"""
)


def _h_attr(
    name: str, exclusive: bool = False, max_words: int = 6, place: bool = False
) -> Callable[[re.Match[str], float], list[_Fact]]:
    def handler(match: re.Match[str], conf: float) -> list[_Fact]:
        raw = match.group("v")
        value = _name_or_phrase(raw, max_words) if place else _clean(raw, max_words)
        if value is None:
            return []
        if place and not is_capitalized(value):
            value = _strip_article(value)
        return [_Fact("attr", name, value, conf, exclusive=exclusive)]

    return handler


def _h_likes(match: re.Match[str], conf: float) -> list[_Fact]:
    value = _clean(match.group("v"), max_words=9)
    if value is None:
        return []
    return [_Fact("attr", "likes", value, conf)]


def _h_dislikes(match: re.Match[str], conf: float) -> list[_Fact]:
    value = _clean(match.group("v"), max_words=6)
    return [] if value is None else [_Fact("attr", "dislikes", value, conf)]


def _h_favorite(match: re.Match[str], conf: float) -> list[_Fact]:
    what = re.sub(r"[^a-z0-9]+", "_", match.group("what").lower()).strip("_")
    what = re.sub(r"s$", "", what) if not what.endswith("ss") else what
    raw = re.sub(r"^\s*(?:this|that|these|those|definitely|probably|always|still)\s+", "", match.group("v"))
    value = _name_or_phrase(raw, 6) if is_capitalized(raw.strip(' "')) else _clean(raw, 6)
    if raw.strip().startswith('"'):
        quoted = re.match(r'\s*"([^"]{1,60})"', raw)
        value = quoted.group(1) if quoted else value
    if value is None or not what:
        return []
    exclusive = match.group("verb").lower() in ("is", "was", "has to be", "would be")
    return [_Fact("attr", f"favorite_{what}", value, conf, exclusive=exclusive)]


def _h_favorite_subject(match: re.Match[str], conf: float) -> list[_Fact]:
    value = match.group("v").strip(' "')
    if not value or value.split()[0].lower() in _BAD_VALUE_START:
        return []
    what = match.group("what")
    if what:
        slug = re.sub(r"s$", "", what.lower())
        return [_Fact("attr", f"favorite_{slug}", value, conf)]
    return [_Fact("attr", "likes", value, conf)]


def _h_fan(match: re.Match[str], conf: float) -> list[_Fact]:
    value = _clean(match.group("v"), max_words=9)
    return [] if value is None else [_Fact("attr", "likes", value, conf)]


def _h_age(match: re.Match[str], conf: float) -> list[_Fact]:
    return [_Fact("attr", "age", match.group("v"), conf, exclusive=True)]


def _h_status(match: re.Match[str], conf: float) -> list[_Fact]:
    return [_Fact("attr", "relationship_status", match.group("v").lower(), conf, exclusive=True)]


def _h_kids(match: re.Match[str], conf: float) -> list[_Fact]:
    return [_Fact("attr", "kids", match.group("v").lower(), conf, exclusive=True)]


def _h_duration(match: re.Match[str], conf: float) -> list[_Fact]:
    activity = _clean(match.group("v"), max_words=5)
    if activity is None:
        return []
    return [_Fact("attr", "activity", f"{activity} {match.group('dur').strip()}", conf)]


def _h_identity(match: re.Match[str], conf: float) -> list[_Fact]:
    if re.search(r"\byour?\b", match.string[max(0, match.start() - 40) : match.start()], re.IGNORECASE):
        return []  # "your courage as a trans person" is about the other speaker
    ident = match.group("v").lower()
    noun = match.group("noun")
    value = f"{ident} {noun.lower()}" if noun else ident
    return [_Fact("attr", "identity", value, conf)]


def _h_activity(match: re.Match[str], conf: float) -> list[_Fact]:
    value = _clean(match.group("v"), max_words=7)
    return [] if value is None else [_Fact("attr", "activity", _strip_article(value), conf)]


def _h_started(match: re.Match[str], conf: float) -> list[_Fact]:
    raw = match.group("v").strip()
    if not re.match(r"[a-z]+ing\b|to\s+[a-z]+", raw):
        return []
    value = _clean(raw, max_words=7)
    return [] if value is None else [_Fact("attr", "activity", value, conf)]


# --------------------------------------------------------------------------- the pattern table

_FIRST = {
    "I": r"\bI",
    "IM": r"\bI(?:'m|\s+am)",
    "IVE": r"\bI(?:'ve|\s+have)",
    "MY": r"\b(?:[Mm]y|[Oo]ur)",
    "ME": r"(?:me|us)\b",
}
_SECOND = {
    "I": r"\b(?<!if )(?<!do )(?<!did )[Yy]ou",
    "IM": r"\b[Yy]ou(?:'re|\s+are)",
    "IVE": r"\b[Yy]ou(?:'ve|\s+have)",
    "MY": r"\b[Yy]our",
    "ME": r"you\b",
}
_REL_WORDS = "|".join(sorted((re.escape(w) for w in _RELATIONS), key=len, reverse=True))
_REL_ADJ = (
    r"(?:(?:little|older|younger|big|baby|twin|eldest|oldest|youngest|new|dear|late|good|close|old|"
    r"lovely|amazing|awesome|sweet|wonderful|beautiful|two|three|2|3)\s+){0,2}"
)


def _table() -> list[tuple[str, Callable[[re.Match[str], float], list[_Fact]], bool]]:
    """(template, handler, applies to second person) rows; templates use {I} {IM} {IVE} {MY} {ME}."""
    return [
        # Relations and pets with a name.
        (
            rf"{{MY}}\s+{_REL_ADJ}(?P<rel>{_REL_WORDS})\s*,?\s+(?:named\s+|called\s+)?{_NAME}",
            _h_relation,
            True,
        ),
        (rf"{_NAME}\s*,\s*{{MY}}\s+{_REL_ADJ}(?P<rel>{_REL_WORDS})\b", _h_relation_named_first, True),
        (
            rf"{_NAME}\s+(?:is|was)\s+{{MY}}\s+{_REL_ADJ}(?P<rel>{_REL_WORDS})\b",
            _h_relation_named_first,
            True,
        ),
        (rf"{{MY}}\s+{_REL_ADJ}(?P<rel>{_REL_WORDS})'s\s+name\s+is\s+{_NAME}", _h_relation, True),
        (r"{MY}\s+(?:husband|wife|hubby|spouse)\b", _h_spouse, False),
        (
            rf"{{MY}}\s+{_REL_ADJ}(?:(?:new|little|sweet|old|late|first|second|other|fur|furry|rescue)\s+)*"
            rf"(?P<pet>{_PETS})\s*,?\s+(?:named\s+|called\s+)?{_NAME}",
            _h_pet,
            True,
        ),
        (rf"\b(?:a|an|our|my)\s+(?:\w+\s+)?(?P<pet>{_PETS})\s+(?:named|called)\s+{_NAME}", _h_pet, False),
        (rf"{{MY}}\s+(?P<pet>{_PETS})'s\s+name\s+is\s+{_NAME}", _h_pet, True),
        (rf"{_NAME}\s*,\s*{{MY}}\s+(?:\w+\s+)?(?P<pet>{_PETS})\b", _h_pet, True),
        (
            rf"{{I}}\s+(?:have|'ve got|have got|own)\s+(?P<num>a|an|{_NUMBER})\s+"
            rf"(?:\w+\s+)?(?P<pet>{_PETS})\b",
            _h_have_pets,
            True,
        ),
        # Work and occupation.
        (r"{I}\s+" + _ADV + r"work(?:s)?\s+(?:at|for)\s+(?P<org>.+)", _h_employer, True),
        (r"{IM}\s+" + _ADV + r"(?:working|employed|interning)\s+(?:at|for)\s+(?P<org>.+)", _h_employer, True),
        (
            r"{I}\s+(?:just\s+|recently\s+|finally\s+)?(?:got|landed|accepted|started|took|have)\s+(?:a|the|my)\s+"
            r"(?:new\s+|full-time\s+|part-time\s+)?(?:job|position|role|internship|gig)\s+(?:at|with)\s+(?P<org>.+)",
            _h_employer,
            True,
        ),
        (
            r"(?:{IVE}|{I}'d|{I}\s+had)\s+"
            + _ADV
            + r"(?:worked|been\s+working|been\s+employed)\s+(?:at|for)\s+"
            r"(?P<org>.+)",
            _h_employer_as,
            True,
        ),
        (
            r"{I}\s+" + _ADV + r"(?:start|started|begin|began|'ll\s+start|will\s+start)\s+"
            r"(?:(?:work|working|my\s+new\s+job)\s+)?at\s+(?P<org>.+)",
            _h_employer_named,
            True,
        ),
        (
            r"{IM}\s+" + _ADV + r"(?:starting|beginning)\s+(?:(?:work|my\s+new\s+job)\s+)?at\s+(?P<org>.+)",
            _h_employer_named,
            True,
        ),
        (
            r"{MY}\s+first\s+(?:\w+\s+)?(?:day|week|month|shift)\s+(?:at|with)\s+(?P<org>.+)",
            _h_employer_named,
            True,
        ),
        (
            r"^(?i:first)\s+(?:\w+\s+)?(?:day|week|month|shift)\s+(?:at|with)\s+(?P<org>.+)",
            _h_employer_named,
            False,
        ),
        (
            r"\boffered\s+{ME}\s+(?:a|the)\s+(?:\w+\s+)?(?:job|position|role|post)\s+(?:at|with)\s+(?P<org>.+)",
            _h_employer_named,
            True,
        ),
        (
            r"(?:{I}|{IVE}|{IM})\s+"
            + _ADV
            + r"(?:work(?:s|ed)?|working|been\s+working|started|volunteer(?:ed)?)\s+"
            r"as\s+(?:a|an)\s+(?P<job>.+)",
            _h_occupation,
            True,
        ),
        (
            r"{IM}\s+" + _ADV + r"the\s+(?P<job>(?:only|sole|new|head|lead|senior|junior|main)\s+.+)",
            _h_occupation,
            True,
        ),
        (r"{MY}\s+(?:job|work|role)\s+as\s+(?:a|an)\s+(?P<job>.+)", _h_occupation, True),
        (r"{IM}\s+" + _ADV + r"(?:a|an)\s+(?P<job>.+)", _h_occupation, True),
        # Places.
        (r"{I}\s+" + _ADV + r"(?:live|reside)\s+in\s+(?P<v>.+)", _h_attr("location", True, 5, True), True),
        (r"{IM}\s+" + _ADV + r"(?:living|based)\s+in\s+(?P<v>.+)", _h_attr("location", True, 5, True), True),
        (
            r"(?:{I}|\b[Ww]e)\s+" + _ADV + r"(?:moved|relocated)\s+(?:back\s+)?to\s+(?P<v>.+)",
            _h_attr("location", True, 5, True),
            True,
        ),
        (
            r"(?:{IVE}|{I}'d|{I}\s+had)\s+" + _ADV + r"(?:lived|been\s+living)\s+in\s+(?P<v>.+)",
            _h_place("location"),
            True,
        ),
        (
            r"(?:{IM}|\b[Ww]e(?:'re|\s+are))\s+"
            + _ADV
            + r"moving\s+(?:back\s+|down\s+|up\s+|over\s+)?to\s+(?P<v>.+)",
            _h_place("location", WEAK),
            True,
        ),
        (
            r"(?:{I}|\b[Ww]e)\s+"
            + _ADV
            + r"(?:moved|relocated)\s+(?:back\s+|down\s+|up\s+|over\s+|here\s+)?to\s+"
            r"(?P<v>.+)",
            _h_place("location"),
            True,
        ),
        (
            r"{MY}\s+(?:landlord|landlady|flat|apartment|flatmates?|neighbou?rs?|commute|local\s+\w+)\s+(?:in|here\s+in)\s+"
            r"(?P<v>.+)",
            _h_place("location"),
            True,
        ),
        (r"\b(?:[Hh]ere|[Bb]ack\s+home)\s+in\s+(?P<v>.+)", _h_place("location", WEAK), False),
        (
            r"{IM}\s+" + _ADV + r"(?:a|an)\s+(?:\w+\s+)?(?:resident|local)\s+(?:of|in)\s+(?P<v>.+)",
            _h_place("location"),
            True,
        ),
        (r"{IM}\s+" + _ADV + r"(?:originally\s+)?from\s+(?P<v>.+)", _h_attr("origin", True, 5, True), True),
        (r"{I}\s+" + _ADV + r"grew\s+up\s+in\s+(?P<v>.+)", _h_attr("origin", True, 5, True), True),
        (r"{MY}\s+hometown\s+(?:of|is|,)\s+(?P<v>.+)", _h_attr("hometown", True, 4, True), True),
        # Likes, dislikes, favorites.
        (r"{I}\s+" + _ADV + r"(?:love|like|enjoy|adore|loved|enjoyed)\s+(?P<v>.+)", _h_likes, False),
        (
            r"{IM}\s+" + _ADV + r"(?:into|passionate\s+about|obsessed\s+with|crazy\s+about|a\s+sucker\s+for|"
            r"interested\s+in|fascinated\s+by|keen\s+on)\s+(?P<v>.+)",
            _h_likes,
            False,
        ),
        (
            r"{IM}\s+"
            + _ADV
            + r"(?:a\s+)?(?:big\s+|huge\s+|massive\s+|major\s+|total\s+)?fan\s+of\s+(?P<v>.+)",
            _h_fan,
            False,
        ),
        (
            r"{I}\s+(?:don't|do\s+not|didn't|never)\s+(?:really\s+)?(?:like|enjoy|love)\s+(?P<v>.+)",
            _h_dislikes,
            False,
        ),
        (r"{I}\s+" + _ADV + r"(?:hate|dislike|can't\s+stand)\s+(?P<v>.+)", _h_dislikes, False),
        (
            r"{MY}\s+(?:all-time\s+|absolute\s+|personal\s+|current\s+|new\s+)?(?:favorite|favourite|fave|fav)\s+"
            r"(?P<what>[a-z][a-z\- ]{1,25}?)\s+(?P<verb>is|was|has\s+to\s+be|would\s+be|are|were|include)\s+"
            r"(?P<v>.+)",
            _h_favorite,
            True,
        ),
        (
            r'(?P<v>"[^"]{2,60}"|[A-Z][\w\'\-]*(?:\s+(?:of|the|[A-Z][\w\'\-]*))*)\s+'
            r"(?:is|was|has\s+always\s+been|has\s+been|will\s+always\s+be|are)\s+(?:one\s+of\s+)?"
            r"(?:my|a)\s+(?:all-time\s+|absolute\s+)?(?:favorite|favourite|fave|fav)s?"
            r"(?:\s+(?P<what>(?!of\b)[a-z]+))?",
            _h_favorite_subject,
            False,
        ),
        # Personal data.
        (r"{IM}\s+(?P<v>\d{1,3})\s*(?:years?\s+old|yrs?\s+old|y/o)", _h_age, True),
        (r"{I}\s+(?:just\s+|recently\s+)?turned\s+(?P<v>\d{1,3})\b", _h_age, True),
        (
            r"{IM}\s+" + _ADV + r"(?:happily\s+)?(?P<v>married|single|engaged|divorced|widowed|separated)\b",
            _h_status,
            True,
        ),
        (
            r"{I}\s+(?:just\s+|recently\s+|finally\s+)?got\s+(?P<v>married|engaged|divorced)\b",
            _h_status,
            True,
        ),
        (r"{IM}\s+in\s+a\s+(?P<v>relationship)\b", _h_status, True),
        (
            rf"(?:{{I}}|\b[Ww]e)\s+(?:have|'ve\s+got|have\s+got)\s+(?P<v>{_NUMBER})\s+(?:\w+\s+)?"
            r"(?:kids|children|sons|daughters|boys|girls)\b",
            _h_kids,
            True,
        ),
        (
            rf"{{IVE}}\s+been\s+(?P<v>[a-z]+ing\b[^.!?]*?)\s+(?P<dur>for\s+(?:about\s+|over\s+|almost\s+|nearly\s+"
            rf"|around\s+)?(?:{_NUMBER}|a\s+few|a\s+couple(?:\s+of)?|several|many)\s+(?:years?|months?|weeks?|decades?)"
            r"|since\s+(?:I\s+was\s+(?:a\s+)?\w+|(?:19|20)\d\d|childhood|high\s+school|college|"
            r"(?:January|February|March|April|May|June|July|August|September|October|November|December)))",
            _h_duration,
            True,
        ),
        (
            rf"{{IM}}\s+(?:a\s+)?(?:proud\s+)?(?P<v>{_IDENTITIES})(?:\s+(?P<noun>woman|man|person|girl|guy|boy))?\b",
            _h_identity,
            False,
        ),
        (
            rf"\b[Aa]s\s+an?\s+(?P<v>{_IDENTITIES})\s+(?P<noun>woman|man|person|girl|guy|boy)\b",
            _h_identity,
            False,
        ),
        # Activities and hobbies.
        (
            r"{I}\s+"
            + _ADV
            + r"(?:took\s+up|picked\s+up|got\s+into|have\s+taken\s+up|'ve\s+taken\s+up)\s+(?P<v>.+)",
            _h_activity,
            False,
        ),
        (r"{I}\s+" + _ADV + r"(?:started|began)\s+(?P<v>.+)", _h_started, False),
        (
            r"{IM}\s+" + _ADV + r"(?:learning|taking\s+up|getting\s+into|practicing|practising)\s+(?P<v>.+)",
            _h_activity,
            False,
        ),
        (r"{IM}\s+" + _ADV + r"(?:studying|majoring\s+in)\s+(?P<v>.+)", _h_attr("studies", False, 5), True),
        (
            r"{I}\s+" + _ADV + r"used\s+to\s+(?P<v>(?!be\b|think\b|feel\b|have\b)[a-z].+)",
            _h_attr("used_to", False, 8),
            False,
        ),
        (
            r"{I}\s+(?:want|hope|plan|aim|dream|'d\s+love|would\s+love)\s+to\s+(?:be|become)\s+an?\s+(?P<v>.+)",
            _h_attr("goal", False, 5),
            False,
        ),
    ]


def _fill(template: str, subjects: dict[str, str]) -> str:
    return re.sub(r"\{(I|IM|IVE|MY|ME)\}", lambda m: subjects[m.group(1)], template)


@functools.cache
def _patterns() -> tuple[list[_Pattern], list[_Pattern]]:
    """Compiled first-person and second-person patterns (built on first use)."""
    first: list[_Pattern] = []
    second: list[_Pattern] = []
    for template, handler, applies_second in _table():
        first.append(_Pattern(re.compile(_fill(template, _FIRST)), handler, applies_second))
        if applies_second:
            second.append(_Pattern(re.compile(_fill(template, _SECOND)), handler, True))
    return first, second


# A sentence opening "First week at ..." has an implied "my".
_FIRST_PERSON_RE = re.compile(
    r"\b(?:I|I'm|I've|I'd|my|My|our|Our|we|We|As|as|me|us)\b|\b[Hh]ere\s+in\b"
    r"|^(?i:first)\s+(?:\w+\s+)?(?:day|week|month|shift)\b"
)
_SECOND_PERSON_RE = re.compile(r"\b(?:[Yy]ou|[Yy]ou're|[Yy]ou've|[Yy]our)\b")
_HYPOTHETICAL_RE = re.compile(r"\b(?:if|wish|would|could|should|might|maybe|hope)\b", re.IGNORECASE)


# "Greetings from Bristol! I'm officially a resident.": the place is named in another sentence.
_RESIDENT_RE = re.compile(
    r"\bI(?:'m|\s+am)\s+" + _ADV + r"(?:a\s+)?(?:local|resident|(?:living|based)\s+here)\b(?!\s+(?:of|in)\b)"
)
_RESIDENT_PLACE_RE = re.compile(r"\b(?:from|in|to)\s+(?P<v>[A-Z][a-zA-Z'\-]+(?:\s+[A-Z][a-zA-Z'\-]+)?)")


def _resident_place(text: str) -> str | None:
    """The one place named in a turn that says "I'm a resident/local" without naming it there."""
    if _RESIDENT_RE.search(text) is None or "?" in text:
        return None
    places = {m.group("v") for m in _RESIDENT_PLACE_RE.finditer(text)}
    places = {p for p in places if p.split()[0].lower() not in _NOT_PLACES and p.lower() not in COMMON_WORDS}
    return places.pop() if len(places) == 1 else None


# --------------------------------------------------------------------------- type guessing

_MOVE_BEFORE = re.compile(
    r"\b(?:went|go|going|goes|gone|been|trip|trips|travel(?:l?ed|l?ing)?|flew|fly|flying|drove|drive|driving|"
    r"moved|move|moving|visit(?:ed|ing|s)?|vacation(?:ed|ing)?|back|live[sd]?|living|stay(?:ed|ing)?|"
    r"hike[sd]?|hiking|headed|heading|arrived|tour(?:ed|ing)?|explor(?:e|ed|ing)|camping|"
    r"born|raised|up|from|based|relocated|holiday|getaway|cruise)"
    r"\s+(?:\w+\s+)?(?:to|in|at|from|around|through|near|into|across|outside|of)\s+(?:the\s+)?$"
    r"|\b(?:visit(?:ed|ing)?|explor(?:e|ed|ing)|left|leaving|toured|in|from)\s+(?:the\s+)?$",
    re.IGNORECASE,
)
_PREP_BEFORE = re.compile(r"\b(?:in|from|near|to)\s+(?:the\s+)?$", re.IGNORECASE)
_WORK_BEFORE = re.compile(
    r"\b(?:work(?:s|ed|ing)?|job|position|internship|intern(?:ed|ing)?|employed|hired|joined|"
    r"volunteer(?:s|ed|ing)?|deal|sponsor(?:ed|ship)?|partner(?:ed|ship)?|contract|signed(?:\s+up)?|talks)"
    r"\s+(?:\w+\s+)?(?:at|for|by|with)\s+(?:the\s+)?$",
    re.IGNORECASE,
)
_PERSON_AFTER = re.compile(
    r"^(?:\s+and\s+I\b|\s+(?:said|says|told|texted|called\s+me|asked|is\s+my|was\s+my)\b|,\s*(?:who|my)\b"
    r"|'s\s+(?:husband|wife|mom|dad|son|daughter|kids|sister|brother|family|birthday|boyfriend|girlfriend)\b)",
    re.IGNORECASE,
)
_PERSON_BEFORE = re.compile(
    r"\b(?:me\s+and|met|meet|meeting|told|asked|named|texted|called|by)\s+$", re.IGNORECASE
)
_VOCATIVE_BEFORE = re.compile(
    r"(?:\b(?:thanks|thank\s+you|hey|hi|hello|dear|bye|congrats)\s*,?\s*)$", re.IGNORECASE
)
_PET_BEFORE = re.compile(rf"\b(?:{_PETS})\s*,?\s+(?:named\s+|called\s+)?$", re.IGNORECASE)
_PET_AFTER = re.compile(rf"^\s*,\s*(?:my|our)\s+(?:\w+\s+)?(?:{_PETS})\b", re.IGNORECASE)
_WORK_TITLE_BEFORE = re.compile(
    r"\b(?:book|novel|movie|film|song|album|show|series|game|play|read|reading|reread|rereading|watched|"
    r"watching|called|titled)\s+$",
    re.IGNORECASE,
)
_WORK_AFTER = re.compile(
    r"^(?:'s)?\s+(?:movie|movies|film|films|book|books|series|novel|novels|show|saga|trilogy|soundtrack|"
    r"song|album)\b",
    re.IGNORECASE,
)
# Weaker: "a Harry Potter conference" hints at a work, "an LGBTQ conference" does not.
_WORK_AFTER_WEAK = re.compile(
    r"^(?:'s)?\s+(?:theme|fan|fans|trivia|conference|world|universe|franchise|marathon|spots|merch|"
    r"collection|characters?|game|games)\b",
    re.IGNORECASE,
)
_ORG_NAME_BEFORE = re.compile(
    r"\b(?:group|club|team|organi[sz]ation|org|charity|nonprofit|non-profit|company|business|band|choir|shop|"
    r"store|startup|foundation|league|society|association)\b[^.!?]{0,20}$",
    re.IGNORECASE,
)
_TIME_WORDS = word_set(
    """
last next this yesterday today tonight tomorrow ago recently lately earlier soon
"""
)


def _is_modifier(sentence: str, end: int) -> bool:
    """Whether the name is followed by a lower-case noun it modifies ("LGBTQ support group")."""
    match = re.match(r" ([a-z][a-z\-]+)", sentence[end : end + 25])
    if match is None:
        return False
    word = match.group(1)
    return word not in STOP_WORDS and word not in _TIME_WORDS and not word.endswith("ed")


def _guess_type(
    mention: NameMention, sentence: str, known_types: dict[str, EntityType]
) -> tuple[EntityType, int]:
    """Type of a name from its context in the sentence, with the weight of the cue."""
    key = mention.text.casefold()
    known = known_types.get(key)
    if known is not None and known is not EntityType.OTHER:
        return known, 3
    before = sentence[max(0, mention.start - 60) : mention.start]
    if mention.quoted:
        if _ORG_NAME_BEFORE.search(before):
            return EntityType.ORGANIZATION, 3  # "our group, 'Green Hands'"
        return EntityType.WORK, 3
    after = sentence[mention.end : mention.end + 40]
    words = mention.text.lower().split()
    if _PET_BEFORE.search(before) or _PET_AFTER.match(after):
        return EntityType.PET, 3
    if words[0].rstrip(".") in {"dr", "mr", "mrs", "ms", "aunt", "uncle", "coach", "prof"}:
        return EntityType.PERSON, 3
    if len(words) > 1 and (
        words[-1] in ORGANIZATION_WORDS or any(w in ORGANIZATION_WORDS for w in words[1:])
    ):
        return EntityType.ORGANIZATION, 2
    modifier = _is_modifier(sentence, mention.end)
    if key in PLACE_NAMES or (
        len(words) > 1 and not modifier and (words[0] in PLACE_WORDS or words[-1] in PLACE_WORDS)
    ):
        return EntityType.PLACE, 2
    if _WORK_AFTER.match(after) or _WORK_TITLE_BEFORE.search(before):
        return EntityType.WORK, 2
    if _WORK_AFTER_WEAK.match(after) and not mention.text.isupper():
        return EntityType.WORK, 1
    if _WORK_BEFORE.search(before):
        return EntityType.ORGANIZATION, 2
    if _PERSON_AFTER.match(after) or _PERSON_BEFORE.search(before):
        return EntityType.PERSON, 2
    if _MOVE_BEFORE.search(before) and not modifier and words[0] not in FIRST_NAMES:
        return EntityType.PLACE, 2
    if words[0] in FIRST_NAMES and len(words) <= 3 and not modifier:
        return EntityType.PERSON, 1
    if _VOCATIVE_BEFORE.search(before) and len(words) <= 2:
        return EntityType.PERSON, 1
    if _PREP_BEFORE.search(before) and not mention.possessive and not modifier:
        return EntityType.PLACE, 1
    return EntityType.OTHER, 0


# --------------------------------------------------------------------------- main


def _attachment_caption(attachment: str) -> str | None:
    text = normalize_quotes(attachment).strip()
    text = re.sub(r"^[a-z ]{1,20}:\s*", "", text, flags=re.IGNORECASE)
    text = re.sub(
        r"^(?:(?:a|an|the)\s+)?(?:photo|photograph|photography|picture|pic|image|screenshot|drawing)\s+of\s+",
        "",
        text,
        flags=re.IGNORECASE,
    )
    text = re.sub(r"^there\s+(?:is|are)\s+", "", text, flags=re.IGNORECASE)
    text = " ".join(text.split()[:14]).strip(" .,;")
    return text or None


def _speaker_alias(name: str, speakers: Iterable[str]) -> str | None:
    """The speaker ``name`` is a short form of ("Mel" -> "Melanie"), if exactly one.

    A one-letter typo of a short form counts too ("Mell" -> "Melanie").
    """
    if " " in name or len(name) < 2:
        return None
    low = name.casefold()
    hits = [
        s
        for s in speakers
        if s.casefold() != low
        and (
            s.split()[0].casefold().startswith(low)
            or (low.startswith(s.split()[0].casefold()) and len(low) - len(s.split()[0]) <= 2)
            or _typo_of_prefix(low, s.split()[0].casefold())
        )
    ]
    return hits[0] if len(hits) == 1 else None


def _typo_of_prefix(low: str, first: str) -> bool:
    """Whether ``low`` (4+ letters) is a prefix of ``first`` with one letter doubled ("mell", "melanie").

    Only a doubled letter counts: "carl" is not a typo of "caroline".
    """
    if len(low) < 4:
        return False
    return any(
        low[k] == low[k - 1] and first.startswith(low[:k] + low[k + 1 :]) and low[: k + 1] != first[: k + 1]
        for k in range(1, len(low))
    )


def extract_entities(batch: Sequence[Utterance], kb: KnowledgeBase) -> list[EntityObservation]:
    """Entity observations found in ``batch``.

    Every speaker is a PERSON with ``is_speaker=True`` whose sources are their utterances and
    who carries the attributes and relations of their first-person statements. Proper names in
    the text become entities typed from context. Facts said about the other speaker ("your
    sister Anna") go to that speaker with lower confidence.

    Args:
        batch: The utterances to read.
        kb: Read-only context: known entity names and aliases help recognise a name at the
            start of a sentence, and known types are reused.

    Returns:
        One observation per entity, speakers first, then in order of first mention.
    """
    speakers = list(dict.fromkeys(u.speaker for u in batch))
    kb_speakers = [e.name for e in kb.entities.values() if e.is_speaker]
    all_speakers = list(dict.fromkeys([*speakers, *kb_speakers]))
    speaker_keys = {s.casefold(): s for s in all_speakers}
    canonical: dict[str, str] = {}
    known_types: dict[str, EntityType] = {}
    for entity in kb.entities.values():
        for alias in (entity.name, *entity.aliases):
            canonical.setdefault(alias.casefold(), entity.name)
            known_types.setdefault(alias.casefold(), entity.type)
    for speaker in all_speakers:
        canonical[speaker.casefold()] = speaker
        known_types[speaker.casefold()] = EntityType.PERSON
        for part in speaker.split():
            canonical.setdefault(part.casefold(), speaker)
    texts = [normalize_quotes(u.text) for u in batch]
    common = lowercase_vocabulary(texts)
    split = [split_sentences(t) for t in texts]

    # Names seen mid-sentence anywhere in the batch are known at a sentence start too.
    known: set[str] = set(canonical)
    added: list[str] = []  # names learnt from the batch, in the order they were learnt
    first_pass: dict[tuple[int, int], tuple[list[NameMention], int]] = {}
    for i, sentences in enumerate(split):
        for j, sent in enumerate(sentences):
            found = find_names(sent.text, known, common)
            first_pass[(i, j)] = (found, len(added))
            for m in found:
                key = m.text.casefold()
                if key not in known:
                    known.add(key)
                    added.append(key)

    def names_in(i: int, j: int, sentence: str) -> list[NameMention]:
        # Rerun only when a name learnt later in the batch occurs in the sentence.
        found, seen = first_pass[(i, j)]
        low = sentence.casefold()
        if any(name in low for name in added[seen:]):
            return find_names(sentence, known, common)
        return found

    accs: dict[str, _Acc] = {}

    def acc_for(name: str) -> _Acc:
        key = name.casefold()
        if key not in accs:
            accs[key] = _Acc(name=name)
        return accs[key]

    for speaker in speakers:
        acc = acc_for(speaker)
        acc.is_speaker = True
        acc.type_votes[EntityType.PERSON] += 100

    first_pats, second_pats = _patterns()
    for i, (utt, text, sentences) in enumerate(zip(batch, texts, split, strict=True)):
        speaker_acc = acc_for(utt.speaker)
        speaker_acc.add_source(utt.id)
        others = [s for s in all_speakers if s != utt.speaker]
        other = others[0] if len(others) == 1 else None
        for j, sent in enumerate(sentences):
            s = sent.text
            titles = find_titles(s)
            mentions = [
                m for m in names_in(i, j, s) if not any(t.start - 1 <= m.start < t.end + 1 for t in titles)
            ]
            for mention in [*mentions, *titles]:
                _record_mention(
                    mention, s, utt.id, acc_for, canonical, known_types, speaker_keys, all_speakers
                )
            question = s.rstrip().endswith("?")
            if _FIRST_PERSON_RE.search(s) and not (question and _HYPOTHETICAL_RE.search(s)):
                for pat in first_pats:
                    for match in pat.regex.finditer(s):
                        conf = WEAK if _HYPOTHETICAL_RE.search(s[: match.start()]) else EXPLICIT
                        for fact in pat.handler(match, conf):
                            _apply(fact, speaker_acc, utt.id, acc_for, canonical)
            if other is not None and not question and _SECOND_PERSON_RE.search(s):
                other_acc = acc_for(other)
                for pat in second_pats:
                    for match in pat.regex.finditer(s):
                        for fact in pat.handler(match, SECOND_PERSON):
                            _apply(fact, other_acc, utt.id, acc_for, canonical)
        pet = _OWN_PET_RE.search(text)
        if pet is not None:
            for named in _PET_NAME_RE.finditer(text):
                for name in _person_names(named.group("name")):
                    fact = _Fact("rel", "pet", name, EXPLICIT, object_type=EntityType.PET)
                    _apply(fact, speaker_acc, utt.id, acc_for, canonical)
                    _apply(
                        _Fact("species", name, _species(pet.group("pet")), EXPLICIT),
                        speaker_acc,
                        utt.id,
                        acc_for,
                        canonical,
                    )
        resident = _resident_place(text)
        if resident is not None:
            _apply(
                _Fact("attr", "location", resident, EXPLICIT, exclusive=True),
                speaker_acc,
                utt.id,
                acc_for,
                canonical,
            )
        for attachment in utt.attachments:
            caption = _attachment_caption(attachment)
            if caption:
                speaker_acc.add_attribute("shared_photo", caption, WEAK, False, utt.id)

    out = [acc.build() for acc in accs.values() if acc.sources]
    _log.debug("%d entity observations from %d utterances", len(out), len(batch))
    return out


def _record_mention(
    mention: NameMention,
    sentence: str,
    uid: str,
    acc_for: Callable[[str], _Acc],
    canonical: dict[str, str],
    known_types: dict[str, EntityType],
    speaker_keys: dict[str, str],
    speakers: list[str],
) -> None:
    key = mention.text.casefold()
    if key in speaker_keys or canonical.get(key) in speakers:
        return  # speakers' sources are their own utterances
    alias_of = _speaker_alias(mention.text, speakers) if not mention.quoted else None
    if alias_of is not None:
        acc = acc_for(alias_of)
        if mention.text not in acc.aliases:
            acc.aliases.append(mention.text)
        return
    name = canonical.get(key, mention.text)
    acc = acc_for(name)
    acc.add_source(uid)
    etype, weight = _guess_type(mention, sentence, known_types)
    if etype is not EntityType.OTHER:
        acc.type_votes[etype] += weight


def _apply(
    fact: _Fact,
    subject: _Acc,
    uid: str,
    acc_for: Callable[[str], _Acc],
    canonical: dict[str, str],
) -> None:
    if fact.kind == "attr":
        subject.add_attribute(fact.name, fact.value, fact.confidence, fact.exclusive, uid)
        return
    if fact.kind == "rel":
        obj = canonical.get(fact.value.casefold(), fact.value)
        if obj.casefold() == subject.name.casefold():
            return
        subject.add_relation(fact.name, obj, fact.object_type, fact.confidence, uid)
        if fact.object_type is not None:
            target = acc_for(obj)
            target.add_source(uid)
            target.type_votes[fact.object_type] += 3
        return
    # Any other kind is an attribute of the related entity: ("species", "Max", "dog").
    target = acc_for(canonical.get(fact.name.casefold(), fact.name))
    target.add_source(uid)
    target.add_attribute(fact.kind, fact.value, fact.confidence, False, uid)
