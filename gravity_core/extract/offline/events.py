"""Offline event extraction: 4W1O records from first-person actions and dated sentences.

An event is read from each sentence that carries a time expression or states a first-person
past or planned action ("I went to...", "we adopted...", "I'm going to..."). ``who`` is the speaker
plus the people named in the clause, ``what`` the action's verb phrase without the time phrase,
``when`` the resolved time expression (``None`` when the sentence has none: the builder then uses
the utterance date), ``where`` a named or known place after *at/in/to*, ``outcome`` a short result
clause ("... and it was so powerful"). Questions and hypotheticals are skipped.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gravity_core.extract.offline.text import (
    FIRST_NAMES,
    PLACE_NAMES,
    PLACE_WORDS,
    NameMention,
    content_words,
    find_names,
    lowercase_vocabulary,
    normalize_quotes,
    split_sentences,
    word_set,
)
from gravity_core.schema import EntityType, EventObservation, KnowledgeBase, TimeRef, Utterance
from gravity_core.temporal import TimeMention, find_time_expressions

__all__ = ["extract_events"]

_log = logging.getLogger(__name__)

_MAX_WHAT_WORDS = 18
_MAX_OUTCOME_WORDS = 10

_IRREGULAR_PAST = word_set(
    """
went got ran took made saw had did won lost found bought met began wrote gave came left told said spent
sent built drew drove flew fell caught chose ate drank forgot kept led brought heard held paid put quit
rode rang sang sat slept spoke stood swam taught threw woke wore broke became grew hung shot sold shut
stuck dug fed fought hid lit overcame set shook stole beat blew froze hit laid rebuilt rewrote
reread read tore won upheld withdrew sought bent lent
"""
)
# Past forms that report a state or an opinion, not something that happened.
_STATIVE = word_set(
    """
loved liked wanted needed hoped wished seemed used meant felt thought knew believed guessed supposed
figured realized realised noticed understood remembered forgot appreciated enjoyed preferred hated
imagined assumed expected mentioned agreed wondered missed reminded deserved owed looked sounded tasted
smelled was were did
"""
)
_ADVERBS = (
    r"(?:(?:just|finally|recently|actually|also|already|even|really|officially|then|first|both|all|"
    r"eventually|once|totally|kinda|kind\s+of|somehow|never|so|now|currently|still|definitely|"
    r"seriously|literally)\s+)*"
)
_PLAN = re.compile(
    r"(?:'m|am|are|'re)\s+"
    + _ADVERBS
    + r"(?P<verb>going\s+to|gonna|planning\s+(?:to|on)|about\s+to|set\s+to|"
    r"scheduled\s+to|signed\s+up\s+(?:to|for)|(?:really\s+)?excited\s+to)\s+[A-Za-z]",
    re.IGNORECASE,
)
_CONSIDER = re.compile(
    r"(?:'m|am|are|'re)\s+" + _ADVERBS + r"(?:thinking\s+(?:about|of)|considering)\s+(?P<verb>[a-z]+ing)\b",
    re.IGNORECASE,
)
_WILL = re.compile(r"(?:'ll|will)\s+" + _ADVERBS + r"(?P<verb>[A-Za-z]+)", re.IGNORECASE)
_PROGRESSIVE = re.compile(r"(?:'m|am|are|'re)\s+" + _ADVERBS + r"(?P<verb>[a-z]+ing)\b", re.IGNORECASE)
_PAST = re.compile(
    r"(?:(?P<aux>'ve|have|'d|had|has)\s+)?" + _ADVERBS + r"(?P<verb>[A-Za-z]+)\b", re.IGNORECASE
)
_BE_EVENT = re.compile(
    r"\s+(?:\w+\s+)?(?:in|at|on|part|invited|selected|chosen|asked|named|awarded|given|offered|hired|able|"
    r"accepted|promoted|there|out|back|away|off)\b",
    re.IGNORECASE,
)
_HYPOTHETICAL = re.compile(
    r"^(?:'d|would|could|should|might|may|must|wish|hope|want|wanted|need|needed|can|can't|cannot|"
    r"don't|didn't|won't|wouldn't|couldn't|never|(?:'m|am|are|'re)\s+(?:not|hoping|thinking|trying|"
    r"considering|wondering|looking\s+forward)|'ll\s+(?:try|think|see|let)|will\s+(?:try|think|see|let))\b",
    re.IGNORECASE,
)
_SUBJECT = re.compile(
    r"(?:(?P<partner>\b(?:[Mm]y|[Oo]ur)\s+(?:\w+\s+){0,2}?\w+|\b[A-Z][a-z]+)\s+and\s+I\b"
    r"|\b[Mm]e\s+and\s+(?P<partner2>(?:my\s+|our\s+)?(?:\w+\s+)?\w+)"
    r"|\bI\b(?!')|\bI(?='(?:ve|d|m|ll)\b)|\b[Ww]e\b(?!')|\b[Ww]e(?='(?:ve|d|re|ll)\b))"
)
_IF_CLAUSE = re.compile(
    r"\b(?:if|unless|whether|wish|hope|hopefully|maybe|imagine)\b[^,.;!?]*$", re.IGNORECASE
)
_CLAUSE_END = re.compile(
    r"\s+(?:-|--|\u2013|\u2014)\s+|[;:!?()]|\.(?:\s|$)|\s*\n|,\s+(?:but|which|who|so|because|though|although"
    r"|and\s+(?:it|that|they|he|she|we|I|this|those|there))\b|\s+(?:but|because|cause|since|although|though"
    r"|whereas|while|so\s+(?:I|we|it|that)|and\s+(?:it|that|they|this|there|we|I)(?:\s+|(?='))(?:was|were|is|'s|"
    r"'re|'ve|has|had|made|felt|turned|went|looked|are|really|totally|just))\b\s*"
    r"|,\s+(?:it|they|that|this|which|there)(?:\s+|(?='))(?:was|were|is|'s|'re|are|had|has|made|felt|looked|went"
    r"|turned|really|totally)\b"
    r"|,?\s+and\s+(?:(?:I|we)\s+)?(?:won|lost|placed|came\s+in|ended\s+up|got\s+(?:first|second|third|"
    r"the\s+(?:job|part|role|gold|silver|bronze)))\b",
)
_OUTCOME = re.compile(
    r"^(?:,?\s*(?:and|but|-|\u2014|\u2013)\s+|,\s+)(?P<o>(?:(?:it|that|this|they|the\s+\w+)(?:\s+|(?='))(?:was|were|is|'s|"
    r"'re|are|went|turned\s+out|made|felt|looked|ended|really|totally|had|has)|(?:I|we)\s+(?:won|lost|finished|placed|got|came|made|did|ended|"
    r"passed|failed|managed|loved|had)|won|lost|finished|placed|ended\s+up|got)\b[^.!?;]*)",
    re.IGNORECASE,
)
_NEXT_OUTCOME = re.compile(
    r"^(?:It|That|This|They)\s+(?:was|were|went|turned\s+out|ended\s+up|felt)\b[^.!?;]*", re.IGNORECASE
)
_PLACE_NOUNS = (
    word_set(
        """
park beach gym library museum church school shelter studio restaurant cafe mall store office hospital
camp zoo stadium arena theater theatre cinema concert festival fair market farm lake mountains river
center centre club bar pub hotel airport station trail garden gallery island coast city town village
campus clinic bakery shop venue conference convention court field track pool rink temple castle
"""
    )
    | PLACE_WORDS
)
_PLACE_PREP = re.compile(
    r"\b(?:at|in|to|from|near|around|through|into|visited|visit|visiting)\s+$", re.IGNORECASE
)
_LOWER_PLACE = re.compile(
    r"\b(?:at|in|to)\s+(?P<place>(?:the|a|an|my|our|this|that)\s+(?:[a-z\-]+\s+){0,2}?(?P<noun>[a-z]+))\b"
)
_TRAILING_PREP = re.compile(
    r"(?:\s+(?:and|or|but|the|a|an|this|that|these|with|to|of|like|just|my|your|our|their|is|was|are|were|"
    r"during|since|until|till|every|not\s+too|not\s+so))+\s*$",
    re.IGNORECASE,
)
_NOT_REPORT = re.compile(
    r"\b(?:would|could|should|might|wish|hope|if)\b|^\s*(?:let's|let\s+us)\b", re.IGNORECASE
)
_LEADING_JUNK = re.compile(
    r"^(?:(?:and|but|so|then|also|just)\b|,)(?:\s*(?:(?:and|but|so|then|also|just)\b|,))*\s*", re.IGNORECASE
)


@dataclass(frozen=True)
class _Action:
    """A subject + verb found in a sentence."""

    subject_start: int
    verb_start: int
    partner: str | None
    prefix: str


def _verb_start(sentence: str, pos: int, dated: bool) -> tuple[int, str] | None:
    """Where the verb phrase after a subject ending at ``pos`` starts, and a prefix for ``what``.

    The prefix is ``"will "`` for a plan said with *will*. None when what follows is not a
    reportable action: a state, an opinion, a hypothetical, or a vague promise without a date.
    """
    raw = sentence[pos:]
    rest = raw.lstrip()
    base = pos + len(raw) - len(rest)
    considered = _CONSIDER.match(rest)
    if considered is not None:
        # "We're thinking about going camping": a plan; ``what`` is "going camping".
        if not dated and considered.group("verb").lower() in _VAGUE_PROGRESSIVE - {"going"}:
            return None
        return base + considered.start("verb"), ""
    if _HYPOTHETICAL.match(rest):
        return None
    plan = _PLAN.match(rest)
    if plan is not None:
        first = re.match(r"\s*([A-Za-z]+)", rest[plan.end() - 1 :])
        if first is None:
            return None
        if not dated and (
            plan.group("verb").lower().startswith("excited") or first.group(1).lower() in _VAGUE_PLANS
        ):
            return None  # "I'm gonna keep at it!": a resolution, not an event
        return base + plan.start("verb"), ""
    will = _WILL.match(rest)
    if will is not None:
        head = will.group("verb").lower()
        if not dated or head in _VAGUE_VERBS or head in {"ever", "never", "not", "be"}:
            return None  # "I'll keep at it!": a promise, not an event
        return base + will.start("verb"), "will "
    progressive = _PROGRESSIVE.match(rest)
    if progressive is not None:
        verb = progressive.group("verb").lower()
        if verb in _PRESENT_STATES or (not dated and verb in _VAGUE_PROGRESSIVE):
            return None
        if not dated and verb == "working" and not re.match(r"\s+on\b", rest[progressive.end() :]):
            return None
        return base + progressive.start("verb"), ""
    past = _PAST.match(rest)
    if past is None:
        return None
    aux = (past.group("aux") or "").lower()
    verb = past.group("verb").lower()
    participle = verb.endswith(("ed", "en")) or verb in _IRREGULAR_PAST or verb in _PARTICIPLES
    if aux:
        if aux in ("had", "'d") and not participle:
            if aux == "'d":
                return None
            # "I had a huge issue": 'had' is the verb itself.
            return base + past.start("aux"), ""
        if not participle:
            return None  # "I have two kids": a state
        if verb == "got" and aux in ("'ve", "have", "has") and not dated:
            return None  # "I've got lots of books": possession
    if verb in {"was", "were"}:
        if dated and re.match(_BE_EVENT, rest[past.end() :]):
            return base + past.start("verb"), ""
        return None
    if not ((verb.endswith("ed") and len(verb) > 3) or verb in _IRREGULAR_PAST) or verb in _STATIVE:
        return None
    return base + past.start("verb"), ""


def _main_clause_subject(before: str, time_ends: Sequence[int]) -> bool:
    """Whether a subject preceded by ``before`` starts a main clause (not "the bowl I made")."""
    trimmed = before.rstrip()
    if not trimmed or not (trimmed[-1].isalnum() or trimmed[-1] == "'"):
        return True  # the start, or after punctuation or an emoji
    if any(abs(end - len(trimmed)) <= 1 for end in time_ends):
        return True
    last = re.search(r"([A-Za-z']+)$", trimmed)
    return last is not None and last.group(1).lower() in _MAIN_CLAUSE_BEFORE


_MAIN_CLAUSE_BEFORE = word_set(
    """
and but so then also yesterday today tonight recently finally actually well oh yeah yes anyway plus now
just once eventually later earlier still even too lately ago week weekend month year night morning
afternoon evening summer winter spring fall autumn day guess monday tuesday wednesday thursday friday
saturday sunday mon tue tues wed thu thur thurs fri sat sun
"""
)
_FALLBACK_CUT = re.compile(
    r"\s+(?:-|--|\u2013|\u2014)\s+|[;:]|,\s+(?:but|and|so)\s+|,\s+|\s+(?:and|but|so)\s+(?=(?:my|our|the|his|her|their|it)\b)"
)
_GREETING = re.compile(
    r"(?:(?:hey|hi|hello|wow|yeah|yes|oh|thanks|thank\s+you|so|well|anyway|guess\s+what|btw|by\s+the\s+way)"
    r"\b[^,.!?]{0,20}[,!.]\s*)+",
    re.IGNORECASE,
)
_IMPLICIT_RE = re.compile(
    r"(?P<adv>(?:[Jj]ust|[Ss]till|[Ff]inally|[Rr]ecently|[Aa]lso|[Cc]urrently|[Tt]hen|[Aa]ctually)\s+)?"
    r"(?P<verb>[A-Za-z]+)\b"
)
_FEELINGS = word_set(
    """
excited stoked pumped thrilled blessed tired bummed stressed interested amazed surprised pleased
delighted relieved obsessed inspired motivated overwhelmed scared worried exhausted determined committed
dedicated impressed touched moved honored honoured thankful glad proud bored annoyed confused
"""
)
_DASH_CONTINUE = frozenset(["got", "went", "made", "took", "had", "finished", "started"])
_PARTICIPLES = word_set(
    """
been done gone seen made had got taken given written read run won lost found bought met begun built
brought heard kept left paid sent spent taught told thought sold held
"""
)
_PRESENT_STATES = word_set(
    """
loving feeling doing enjoying thinking hoping trying looking wondering being getting having rooting glad
sure so
not really always still
"""
)
_VAGUE_PROGRESSIVE = word_set(
    """
staying keeping going making taking pushing continuing trying focusing holding hanging counting learning
growing loving living
"""
)
_ING_NOUNS = frozenset(
    {"morning", "evening", "wedding", "building", "meeting", "ceiling", "spring", "king", "ring"}
)
_VAGUE_PLANS = frozenset({"keep", "stay", "try", "continue", "give"})
# A verb followed by these has a subject other than the speaker ("Made me think", "Got your back").
_OBJECT_FIRST = re.compile(r"\s+(?:me|us|you|your|him|her|them|it|(?:this|that)(?=\s*[.!?,]|\s*$))\b")
_VAGUE_VERBS = word_set(
    """
keep stay try do get be make continue need have go hang take let see think check talk catch remember
look give put definitely always never still surely totally
"""
)


def _actions(sentence: str, dated: bool, time_ends: Sequence[int] = ()) -> list[_Action]:
    out: list[_Action] = []
    for match in _SUBJECT.finditer(sentence):
        before = sentence[: match.start()]
        if _IF_CLAUSE.search(before) or not _main_clause_subject(before, time_ends):
            continue
        found = _verb_start(sentence, match.end(), dated)
        if found is None:
            continue
        partner = match.group("partner") or match.group("partner2")
        out.append(_Action(match.start(), found[0], partner.strip() if partner else None, found[1]))
    if not out:
        implicit = _implicit_subject(sentence)
        if implicit is not None:
            out.append(_Action(implicit, implicit, None, ""))
    return out


def _implicit_subject(sentence: str) -> int | None:
    """Where a chat-style sentence without a subject starts its action ("Took a trip to Rome.")."""
    greeting = _GREETING.match(sentence)
    pos = greeting.end() if greeting is not None else 0
    match = _IMPLICIT_RE.match(sentence, pos)
    if match is None:
        return None
    verb = match.group("verb").lower()
    if match.group("adv") is None and verb.endswith("ing"):
        return None  # "Seeing them grow is...": a gerund subject, not an action
    if verb in _STATIVE or verb in _VAGUE_PROGRESSIVE or verb in _PRESENT_STATES or verb in _FEELINGS:
        return None
    if verb.endswith(("thing", "things")) or verb in _ING_NOUNS:
        return None  # "Just something nice...": a noun, not a verb
    if verb.endswith("ed") and re.match(r"\s+(?:to|about|that|for|with|by)\b", sentence[match.end() :]):
        return None  # "Excited to see...": an adjective
    if not (verb.endswith(("ed", "ing")) or verb in _IRREGULAR_PAST):
        return None
    if _OBJECT_FIRST.match(sentence, match.end()) and not verb.endswith("ing"):
        return None  # "Made me think", "Got your back": the subject is something else
    if len(sentence[match.start("verb") : _clause_end(sentence, match.start("verb"))].split()) < 3:
        return None  # "Mixed emotions - ...": too short to be a reported action
    return match.start("verb")


def _clause_end(sentence: str, start: int) -> int:
    pos = start
    while True:
        match = _CLAUSE_END.search(sentence, pos)
        if match is None:
            return len(sentence)
        if match.group().strip() in ("-", "--", "\u2013", "\u2014"):
            # "I had a writing issue - got stuck on a plot twist": the same action goes on.
            nxt = re.match(r"\s*([a-z]+)", sentence[match.end() :])
            if nxt is not None and nxt.group(1) in _IRREGULAR_PAST | _DASH_CONTINUE:
                pos = match.end()
                continue
        return match.start()


def _remove_times(text: str, offset: int, mentions: Sequence[TimeMention]) -> str:
    """``text`` (starting at ``offset`` of the sentence) with time phrases and their prepositions cut."""
    pieces: list[str] = []
    cursor = 0
    for m in mentions:
        s, e = m.start - offset, m.end - offset
        if e <= 0 or s >= len(text):
            continue
        s, e = max(0, s), min(len(text), e)
        head = re.sub(
            r"(?:\b(?:on|in|at|during|over|since|by|from|around|about|until|till|for|of|this|that|the)\s+)+$",
            "",
            text[cursor:s],
            flags=re.IGNORECASE,
        )
        pieces.append(head)
        cursor = e
    pieces.append(text[cursor:])
    out = " ".join(p.strip() for p in pieces if p.strip())
    return re.sub(r"\s+([,.!?])", r"\1", re.sub(r"\s{2,}", " ", out))


def _tidy(text: str, max_words: int) -> str:
    text = text.strip(" ,;:-\u2013\u2014")
    text = _LEADING_JUNK.sub("", text)
    words = text.split()
    if len(words) > max_words:
        text = " ".join(words[:max_words])
    text = _TRAILING_PREP.sub("", text)
    text = text.strip(" ,;:-\u2013\u2014.!?'")
    if text.count('"') % 2:
        text = text + '"' if text.rfind('"') > 0 else text.replace('"', "", 1)
    return text.strip()


# Lead-ins of saying, wanting or showing before the content: "I wanted to tell you about ...".
_LEAD_IN = re.compile(
    r"^(?:(?:I|we)\s+(?:just\s+|really\s+|also\s+)?(?:wanted|want|wanna|had|have|'ve\s+got|needed|need)\s+to\s+"
    r"(?:tell|share|show|update)\b(?:\s+(?:with\s+)?(?:you|y'all|u))?(?:\s+(?:about|that|on))?"
    r"|(?:here's|here\s+is|here\s+are|this\s+is|these\s+are|check\s+out)\s+(?:(?:a|an|the|my|our|some|this|one"
    r"|another)\s+)?(?:\w+\s+)?(?:pic|photo|picture|shot|snap|snapshot|video|selfie)s?\b(?:\s+(?:of|from|with))?"
    r"(?:\s+when\b)?)\s*",
    re.IGNORECASE,
)
# A progressive said with its subject: "I've been looking into ..." -> "looking into ...".
_SUBJECT_ING = re.compile(
    r"^(?:I|we)(?:'ve\s+been|'m|'re|\s+(?:have\s+been|am|are|was|were))\s+" + _ADVERBS + r"(?=[a-z]+ing\b)",
    re.IGNORECASE,
)
_OBJECT_FIRST_CLAUSE = re.compile(
    r"^(?P<obj>(?:a|an|the|this|these|that|those|my|our|some)\s+(?:[\w'\-]+\s+){1,4}?)(?:I|we)\s+"
    r"(?P<verb>made|did|painted|drew|took|wrote|bought|built|baked|cooked|got|read|found|knitted|sewed|"
    r"designed|created|finished)\b\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
_PREPOSITION_START = re.compile(
    r"(?:in|at|for|with|from|on|during|last|this|yesterday|recently)\b", re.IGNORECASE
)
# Clauses whose subject is not a participant: "It made me reflect ...", "That was ...".
_NOT_PARTICIPANT = re.compile(
    r"(?:it|this|that|there|which)(?:'s|\s+(?:was|is|were|are|made|makes|has|had|feels|felt|seems|seemed|"
    r"reminds|reminded|means|meant|gets|got|really|just|will|would|took|takes|helped|helps))\b",
    re.IGNORECASE,
)


def _action_clause(what: str) -> str:
    """``what`` without lead-ins: "I wanted to tell you about my trip" -> "my trip",
    "Here's a pic from when we met up" -> "met up", "a bowl I made" -> "made a bowl"."""
    lead = _LEAD_IN.match(what)
    if lead is not None and lead.end() < len(what):
        what = what[lead.end() :]
    subject = _SUBJECT_ING.match(what)
    if subject is not None:
        what = what[subject.end() :]
        what = re.sub(r"^(?:remembering|recalling)\s*,?\s+(?=\S+\s+\S)", "", what, flags=re.IGNORECASE)
    shown = re.match(r"(?:here's|here\s+is|here\s+are|check\s+out)\s+", what, re.IGNORECASE)
    made = _OBJECT_FIRST_CLAUSE.match(what[shown.end() :] if shown is not None else what)
    if made is not None:
        obj = made.group("obj").strip()
        obj = obj[0].lower() + obj[1:]
        rest = made.group("rest")
        keep = f" {rest}" if rest and _PREPOSITION_START.match(rest) else ""
        what = f"{made.group('verb').lower()} {obj}{keep}"
    return what


@dataclass
class _Draft:
    who: list[str]
    what: str
    when: TimeRef | None
    where: str | None
    outcome: str | None
    sources: list[str]
    action: bool = True


def _known_places(kb: KnowledgeBase) -> set[str]:
    return {
        alias.casefold()
        for e in kb.entities.values()
        if e.type is EntityType.PLACE
        for alias in (e.name, *e.aliases)
    }


def _known_people(kb: KnowledgeBase) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in kb.entities.values():
        if e.type is EntityType.PERSON or e.is_speaker:
            for alias in (e.name, *e.aliases):
                out.setdefault(alias.casefold(), e.name)
    return out


def _where(
    sentence: str, start: int, end: int, names: list[NameMention], places: set[str], people: dict[str, str]
) -> str | None:
    for name in names:
        if not start <= name.start < end + 20:
            continue
        key = name.text.casefold()
        if key in people or key.split()[0] in FIRST_NAMES and key not in places:
            continue
        before = sentence[max(0, name.start - 25) : name.start]
        words = key.split()
        placey = len(words) > 1 and (words[0] in PLACE_WORDS or words[-1] in PLACE_WORDS)
        if key in places or key in PLACE_NAMES or placey or _PLACE_PREP.search(before):
            if re.match(r"\s+[a-z]", sentence[name.end : name.end + 2]) and key not in places | PLACE_NAMES:
                # "at the Harry Potter conference": a modifier, not a place
                continue
            return name.text
    segment = sentence[start:end]
    for match in _LOWER_PLACE.finditer(segment):
        if match.group("noun") in _PLACE_NOUNS:
            return match.group("place")
    return None


def _who(
    speaker: str,
    segment: str,
    seg_offset: int,
    names: list[NameMention],
    people: dict[str, str],
    partner: str | None,
) -> list[str]:
    who = [speaker]
    candidates = [n for n in names if seg_offset <= n.start < seg_offset + len(segment)]
    if partner and partner[:1].isupper() and not partner.lower().startswith(("my ", "our ")):
        candidates.append(NameMention(partner, seg_offset, seg_offset))
    for name in candidates:
        key = name.text.casefold()
        person = people.get(key)
        if person is None and key.split()[0] in FIRST_NAMES and len(key.split()) <= 3:
            person = name.text
        if person is None:
            continue
        if person.casefold() != speaker.casefold() and person not in who:
            who.append(person)
    return who


def _sentence_events(
    utt: Utterance,
    sentence: str,
    sent_offset: int,
    mentions: list[TimeMention],
    next_sentence: str | None,
    known: set[str],
    common: frozenset[str],
    places: set[str],
    people: dict[str, str],
) -> _Draft | None:
    stripped = sentence.rstrip()
    if stripped.endswith("?"):
        return None
    local = [
        TimeMention(m.start - sent_offset, m.end - sent_offset, m.text, m.time)
        for m in mentions
        if sent_offset <= m.start < sent_offset + len(sentence)
    ]
    actions = _actions(sentence, bool(local), [m.end for m in local])
    if not actions and not local:
        return None
    if actions:
        # The action whose clause holds the time phrase, else one just after it, else the first.
        chosen = actions[0]
        spans = [(a, a.subject_start, _clause_end(sentence, a.verb_start)) for a in actions]
        inside = [a for a, s, e in spans if any(s <= m.start <= e for m in local)]
        near = [a for a, s, e in spans if any(s - 40 <= m.start <= e for m in local)]
        if inside:
            chosen = inside[0]
        elif near:
            chosen = near[0]
        start = chosen.verb_start
        partner = chosen.partner
        prefix = chosen.prefix
    else:
        if _IF_CLAUSE.search(sentence) or _NOT_REPORT.search(sentence):
            return None
        # A dated sentence without a first-person action: the clause around the time phrase.
        first = local[0]
        start = 0
        for cut in _FALLBACK_CUT.finditer(sentence[: first.start]):
            if len(sentence[cut.end() : first.start].split()) >= 2 or first.start - cut.end() < 2:
                start = cut.end()
        greeting = _GREETING.match(sentence[start:])
        if greeting is not None:
            start += greeting.end()
        partner = None
        prefix = ""
    end = _clause_end(sentence, start)
    # A time phrase just before the clause end still belongs to it ("... powerful. " vs "yesterday and").
    times_in = [m for m in local if start <= m.start < end]
    times_before = [m for m in local if m.end <= start and start - m.end <= 40]
    chosen_time = (
        times_in[0] if times_in else (times_before[-1] if times_before else (local[0] if local else None))
    )
    when = chosen_time.time if chosen_time is not None else None
    raw_what = _remove_times(sentence[start:end], start, [m for m in local if start <= m.start < end])
    what = _tidy(re.sub(r"^\s*'s\s+", "", raw_what), _MAX_WHAT_WORDS)
    what = re.sub(r",\s*[A-Z][a-z]+$", "", what)  # a trailing vocative: "..., Gina"
    clause = _action_clause(what)
    led_in = _LEAD_IN.match(what) is not None and clause != what
    what = clause
    if len(what.split()) < 2:
        return None
    if not actions and ((len(content_words(what)) < 2 and not led_in) or _NOT_PARTICIPANT.match(what)):
        return None  # "See you tomorrow!", "It made me think"
    what = prefix + what
    if partner and partner.lower().startswith(("my ", "our ")):
        what = f"{what} with {partner[0].lower()}{partner[1:]}"
    outcome_match = _OUTCOME.match(sentence[end:])
    outcome = None
    if outcome_match is not None:
        outcome = _tidy(_remove_times(outcome_match.group("o"), 0, []), _MAX_OUTCOME_WORDS) or None
    elif next_sentence is not None:
        nxt = _NEXT_OUTCOME.match(normalize_quotes(next_sentence))
        if nxt is not None:
            outcome = _tidy(nxt.group(0), _MAX_OUTCOME_WORDS) or None
    names = find_names(sentence, known, common)
    who = _who(utt.speaker, sentence[start:end], start, names, people, partner)
    if actions:
        # Names in the subject ("Anthony and I went...").
        subj = sentence[chosen.subject_start : chosen.verb_start]
        who = _who(utt.speaker, subj, chosen.subject_start, names, people, partner) + [
            w for w in who[1:] if w not in subj
        ]
        who = list(dict.fromkeys(who))
    where = _where(sentence, start, end, names, places, people)
    return _Draft(who, what, when, where, outcome, [utt.id], bool(actions))


_ABOUT_THEM = re.compile(
    r"^(?:(?:so|and|oh|hey|wow)[,!]?\s+)?(?:how\s+(?:was|did|were)\s+your\s+(?P<how>[^?]{3,80}?)(?:\s+go)?\s*\?"
    r"|congrat(?:s|ulations)\s+on\s+(?P<congrats>(?:your\s+|the\s+)?[^.!?,]{3,80}))",
    re.IGNORECASE,
)


def _their_event(
    utt: Utterance, other: str, sentence: str, sent_offset: int, mentions: list[TimeMention]
) -> _Draft | None:
    """An event of the other speaker stated by a question or a congratulation.

    "How was your trip to Lisbon last week?" and "Congrats on winning the final!" say that
    something happened to the person addressed.
    """
    match = _ABOUT_THEM.match(normalize_quotes(sentence))
    if match is None:
        return None
    group = "how" if match.group("how") is not None else "congrats"
    local = [
        TimeMention(m.start - sent_offset, m.end - sent_offset, m.text, m.time)
        for m in mentions
        if sent_offset + match.start(group) <= m.start < sent_offset + match.end(group)
    ]
    raw = match.group(group)
    raw = raw[: _clause_end(raw, 0)]
    what = _tidy(_remove_times(raw, match.start(group), local), _MAX_WHAT_WORDS)
    what = re.sub(r"^your\s+", "", what, flags=re.IGNORECASE)
    if group == "how" and not local:
        return None  # "How was your day?": small talk unless the question dates it
    if not what or what.split()[0].lower() in {"how", "what", "that", "this", "it", "all", "everything"}:
        return None
    if group == "congrats":
        what = f"congratulated on {what}"
    return _Draft([other], what, local[0].time if local else None, None, None, [utt.id])


def _precise(when: TimeRef | None) -> bool:
    """Precise enough to date the next sentence's action: a day, a week or a weekend."""
    if when is None or when.start is None or when.end is None:
        return False
    return (when.end - when.start).days <= 7


def _key(draft: _Draft) -> tuple[str, str, str]:
    when_key = draft.when.raw.casefold() if draft.when is not None else ""
    if draft.when is not None and draft.when.start is not None:
        when_key = draft.when.start.isoformat()
    return (draft.who[0].casefold(), re.sub(r"\W+", " ", draft.what.casefold()).strip(), when_key)


def _discard(drafts: dict[tuple[str, str, str], _Draft], draft: _Draft) -> None:
    key = _key(draft)
    if drafts.get(key) is draft:
        del drafts[key]


def extract_events(batch: Sequence[Utterance], kb: KnowledgeBase) -> list[EventObservation]:
    """Event observations found in ``batch``.

    Args:
        batch: The utterances to read.
        kb: Read-only context: known people and places help fill ``who`` and ``where``.

    Returns:
        Events in utterance order; an event reported twice in the batch is kept once with
        both sources.
    """
    places = _known_places(kb)
    people = _known_people(kb)
    for u in batch:
        people.setdefault(u.speaker.casefold(), u.speaker)
    texts = [normalize_quotes(u.text) for u in batch]
    common = lowercase_vocabulary(texts)
    known = set(people) | places
    drafts: dict[tuple[str, str, str], _Draft] = {}
    kb_speakers = [e.name for e in kb.entities.values() if e.is_speaker]
    speakers = list(dict.fromkeys([*(u.speaker for u in batch), *kb_speakers]))
    for utt, text in zip(batch, texts, strict=True):
        if not text.strip():
            continue
        mentions = find_time_expressions(text, utt.timestamp)
        sentences = split_sentences(text)
        others = [s for s in speakers if s != utt.speaker]
        pending: _Draft | None = None  # a dated sentence without an action: "Last week was wild."
        for k, sent in enumerate(sentences):
            nxt = sentences[k + 1].text if k + 1 < len(sentences) else None
            draft = _sentence_events(utt, sent.text, sent.start, mentions, nxt, known, common, places, people)
            if draft is None and len(others) == 1:
                draft = _their_event(utt, others[0], sent.text, sent.start, mentions)
            if draft is None:
                continue
            if pending is not None and draft.action and draft.when is None and _precise(pending.when):
                # "Something great happened last Friday. I went to ..." -> the action gets the date.
                draft.when = pending.when
                if len(pending.what.split()) <= 4:
                    _discard(drafts, pending)
            pending = draft if not draft.action and draft.when is not None else None
            key = _key(draft)
            old = drafts.get(key)
            if old is None:
                drafts[key] = draft
            elif utt.id not in old.sources:
                old.sources.append(utt.id)
    out = [
        EventObservation(
            who=d.who, what=d.what, when=d.when, where=d.where, outcome=d.outcome, sources=d.sources
        )
        for d in drafts.values()
    ]
    _log.debug("%d event observations from %d utterances", len(out), len(batch))
    return out
