"""Offline entity extraction from a dependency parse: speakers, named entities, relations, attributes.

Every speaker is a PERSON observation, except an AI assistant with no name of its own
(:data:`GENERIC_ASSISTANT_NAMES`). Named entities come from the pipeline's recognizer, plus
proper nouns it misses where the parse says what they are ("my physio Ana", "a beagle called
Biscuit"); their type is read from that context first, then from the name's head word ("... Hospital"
-> organization, "... Park" -> place), then from the recognizer's label. Relations come from
possessed relation nouns with a name ("my sister Lena", "her little boy Theo", "Lena, my sister") and
from verbs with a named object ("work at", "live in", "moved to", "joined"); attributes are noun
phrases read off the parse ("I'm a nurse" -> occupation: nurse, "I love pottery" -> likes: pottery),
never clause fragments. The word lists these readings use are data (``data/entity_words.toml``, read at
the first extraction by :func:`~gravity_core.extract.offline.entity_words.entity_words`).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gravity_core.extract.offline.clauses import phrase
from gravity_core.extract.offline.entity_words import entity_words
from gravity_core.extract.offline.parsing import ParsedTurn
from gravity_core.extract.offline.text import (
    NON_NAME_WORDS,
    ORGANIZATION_WORDS,
    PLACE_NAMES,
    PLACE_WORDS,
    lowercase_vocabulary,
    normalize_quotes,
)
from gravity_core.schema import (
    AttributeObservation,
    EntityObservation,
    EntityType,
    KnowledgeBase,
    RelationObservation,
)

__all__ = ["GENERIC_ASSISTANT_NAMES", "entity_names", "extract_entities"]

_log = logging.getLogger(__name__)

EXPLICIT = 0.8
WEAK = 0.5

GENERIC_ASSISTANT_NAMES = frozenset({"assistant"})
"""Casefolded speaker names of an AI assistant that has no name of its own: "Assistant" of the chat
adapters (``gravity_core.serving.messages.DEFAULT_SPEAKERS``), "assistant" in LongMemEval. It is not a person,
so it gets no entity profile, and what it says of itself ("I'd recommend ...") is nobody's attribute;
the entities its turns mention are kept. A named assistant ("Nova") is a speaker like any other."""

_NER_TYPES: dict[str, EntityType] = {
    "PERSON": EntityType.PERSON,
    "ORG": EntityType.ORGANIZATION,
    "GPE": EntityType.PLACE,
    "LOC": EntityType.PLACE,
    "FAC": EntityType.PLACE,
    "WORK_OF_ART": EntityType.WORK,
    "PRODUCT": EntityType.OBJECT,
    "EVENT": EntityType.OTHER,
}
_VALUE_MODIFIERS = frozenset({"amod", "compound", "nmod", "nummod", "poss"})
_MAX_NAME_WORDS = 5
_MAX_VALUE_WORDS = 6
# A speaker's short form is this long ("Jo", "Mel", "Caro"): a longer prefix is likelier another name.
_MIN_SHORT, _MAX_SHORT = 2, 4
# Type votes: what the words around a name declare ("my dog Max") outweigh what the name's own words say
# ("... Hospital"), which outweighs a place preposition ("moved to Lyon"), which outweighs the recognizer.
_DECLARED = 1000
_WORDED = 100
_PLACED = 3
_RECOGNIZED = 1
_NOT_NAMES = frozenset({"DATE", "TIME", "CARDINAL", "ORDINAL", "QUANTITY", "MONEY", "PERCENT"})
_SPLIT = re.compile(r"\s*(?:,|&|\band\b)\s*")
_LEADING = re.compile(r"^(?:the|a|an|my|our|your|his|her|their)\s+", re.IGNORECASE)
_TRAILING_POSSESSIVE = re.compile(r"(?:'s|')$")


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


def _clean_name(text: str) -> str:
    words = _LEADING.sub("", " ".join(text.split())).split()
    while len(words) > 1 and not words[-1][:1].isupper() and not words[-1][:1].isdigit():
        words.pop()  # "Tidewater on" of "started at Tidewater on the 7th"
    return _TRAILING_POSSESSIVE.sub("", " ".join(words)).strip(" ,.!?;:'\"-")


def _head_word_type(name: str) -> EntityType | None:
    """The type a name's own words say: "... Hospital" an organization, "... Park" a place."""
    lists = entity_words()
    words = name.casefold().split()
    if not words:
        return None
    if words[-1] in lists.event_words or any(w in lists.event_words for w in words[-2:]):
        return EntityType.OTHER
    if words[-1] in lists.venue_words:
        return EntityType.PLACE
    if words[-1] in ORGANIZATION_WORDS or words[0] in ORGANIZATION_WORDS:
        return EntityType.ORGANIZATION
    if words[-1] in PLACE_WORDS or name.casefold() in PLACE_NAMES:
        return EntityType.PLACE
    return None


def _relation_noun(token: Any) -> str | None:
    lists = entity_words()
    lemma = token.lemma_.casefold()
    return lists.relations.get(lemma) or lists.relations.get(token.lower_)


def _span_name(token: Any, turn: ParsedTurn) -> tuple[str, str | None]:
    """A proper noun's full name (its entity span, or the run of proper nouns it heads) and NER label."""
    ent = turn.entity_at(token.i)
    if ent is not None:
        return _clean_name(ent.text), ent.label_
    parts = [t for t in token.subtree if t.dep_ == "compound" and t.pos_ == "PROPN" and t.i < token.i]
    words = [t.text for t in parts] + [token.text]
    return _clean_name(" ".join(words)), None


def _named(token: Any) -> Any | None:
    """The proper noun that names a relation or species noun.

    "sister Lena", "Lena, my sister", "a beagle called Biscuit".
    """
    for child in token.children:
        if child.dep_ in ("appos", "compound", "npadvmod") and child.pos_ == "PROPN" and child.i > token.i:
            return child
        if child.dep_ in ("acl", "relcl") and child.lemma_.casefold() in entity_words().named_verbs:
            for grand in child.children:
                if grand.dep_ in ("oprd", "dobj", "attr", "xcomp", "npadvmod") and grand.pos_ == "PROPN":
                    return grand
    head = token.head
    if token.dep_ in ("appos", "compound") and head.pos_ == "PROPN":
        return head
    nxt = token.nbor(1) if token.i + 1 < len(token.doc) else None
    if nxt is not None and nxt.pos_ == "PROPN" and nxt.text[:1].isupper():
        return nxt
    return None


def _names_a_possessed_name(token: Any) -> bool:
    """``token`` is what "her name" / "his name" is: "Her name is Shadow", "Her name's Coco"."""

    def possessed_name(t: Any) -> bool:
        return t.lemma_.casefold() == "name" and any(
            c.dep_ == "poss" and c.lower_ in ("her", "his", "its", "their") for c in t.children
        )

    if token.dep_ == "attr" and any(c.dep_ == "nsubj" and possessed_name(c) for c in token.head.children):
        return True
    return any(c.dep_ == "poss" and possessed_name(c) for c in token.children)


def _object_of_naming(token: Any) -> bool:
    """``token`` is the name in "We named her Luna", "I called him Rex"."""
    verb = token.head
    return (
        token.dep_ in ("dobj", "oprd", "xcomp")
        and verb.lemma_.casefold() in ("name", "call")
        and any(c.dep_ == "nsubj" and c.lower_ in entity_words().first_person for c in verb.children)
    )


class _Batch:
    """Entity accumulation over one batch."""

    def __init__(self, turns: Sequence[ParsedTurn], kb: KnowledgeBase) -> None:
        self.turns = turns
        self.accs: dict[str, _Acc] = {}
        self.canonical: dict[str, str] = {}
        self.known_types: dict[str, EntityType] = {}
        for entity in kb.entities.values():
            for alias in (entity.name, *entity.aliases):
                self.canonical.setdefault(alias.casefold(), entity.name)
                self.known_types.setdefault(alias.casefold(), entity.type)
        kb_speakers = [e.name for e in kb.entities.values() if e.is_speaker]
        self.speakers = list(dict.fromkeys([*(t.utterance.speaker for t in turns), *kb_speakers]))
        for speaker in self.speakers:
            self.canonical[speaker.casefold()] = speaker
            self.known_types[speaker.casefold()] = EntityType.PERSON
        self.common = lowercase_vocabulary(t.doc.text for t in turns)
        # A pet each speaker spoke of without naming it, and their turn count then: "I got a puppy
        # last week!" ... "Her name's Coco."
        self.unnamed_pet: dict[str, tuple[str, int]] = {}
        self.turns_read: dict[str, int] = {}
        self._names_turn: ParsedTurn | None = None  # the turn _names are of (see _proper_names)
        self._names: list[tuple[str, int, int]] = []

    def acc(self, name: str) -> _Acc:
        name = self.name_of(name)
        key = name.casefold()
        if key not in self.accs:
            self.accs[key] = _Acc(name=name)
        return self.accs[key]

    def name_of(self, name: str) -> str:
        """The entity a name refers to.

        A known name or alias, a speaker's short form ("Mel" for Melanie, "Jo" for Joanna), else
        the name itself.
        """
        known = self.canonical.get(name.casefold())
        if known is not None:
            return known
        speaker = self._shortened(name)
        if speaker is None:
            return name
        self.canonical[name.casefold()] = speaker
        speaker_acc = self.acc(speaker)
        if name not in speaker_acc.aliases:
            speaker_acc.aliases.append(name)
        return speaker

    def _shortened(self, name: str) -> str | None:
        """The one speaker whose one-word name ``name`` shortens by two letters or more, if any."""
        if " " in name or not _MIN_SHORT <= len(name) <= _MAX_SHORT:
            return None
        low = name.casefold()
        matches = [
            s
            for s in self.speakers
            if " " not in s and len(s) >= len(name) + 2 and s.casefold().startswith(low)
        ]
        return matches[0] if len(matches) == 1 else None

    def plausible(self, name: str) -> bool:
        words = name.split()
        if not words or len(words) > _MAX_NAME_WORDS or not name[:1].isupper():
            return False
        low = name.casefold()
        if low in NON_NAME_WORDS or (len(words) == 1 and low in self.common):
            return False
        return any(c.isalpha() for c in name)

    def mention(
        self, name: str, etype: EntityType | None, uid: str, *, weight: int = _RECOGNIZED
    ) -> _Acc | None:
        """Record a mention of ``name`` with a vote of ``weight`` for ``etype``."""
        if not self.plausible(name):
            return None
        acc = self.acc(name)
        if acc.name.casefold() in (s.casefold() for s in self.speakers):
            return acc  # speakers' sources are their own utterances
        acc.add_source(uid)
        if etype is not None:
            acc.type_votes[etype] += weight
        return acc

    def owner(self, noun: Any, turn: ParsedTurn) -> str | None:
        """Whose relation a possessed noun names: the speaker for "my", a name for "Lena's"."""
        for child in noun.children:
            if child.dep_ != "poss":
                continue
            if child.lower_ in ("my", "our"):
                return turn.utterance.speaker
            if child.pos_ == "PROPN":
                name, _ = _span_name(child, turn)
                return self.name_of(name)
            if child.lower_ in ("his", "her"):
                return self.earlier_person(turn, noun.i)
        return None

    def merge_short_forms(self) -> None:
        """Map one-word names that start exactly one longer name to that entity, under an alias.

        "Carol" and "Carol Hughes", "Harbourside" and "Harbourside Children's Hospital", in the
        batch or the KB.
        """
        longer: dict[str, set[str]] = {}
        full_names = [a.name for a in self.accs.values()] + list(self.canonical.values())
        for name in full_names:
            words = name.split()
            if len(words) > 1:
                longer.setdefault(words[0].casefold(), set()).add(name)
        speakers = {s.casefold() for s in self.speakers}
        for key, acc in list(self.accs.items()):
            if " " in acc.name or key in speakers:
                continue
            candidates = longer.get(key, set())
            if len(candidates) != 1:
                continue
            target = self.acc(next(iter(candidates)))
            if target is acc:
                continue
            del self.accs[key]
            if acc.name not in target.aliases:
                target.aliases.append(acc.name)
            for uid in acc.sources:
                target.add_source(uid)
            target.type_votes.update(acc.type_votes)
            target.attributes.update(acc.attributes)
            target.relations.update(acc.relations)
            for other in self.accs.values():
                for rkey, relation in list(other.relations.items()):
                    if relation.object.casefold() == key:
                        del other.relations[rkey]
                        moved = relation.model_copy(update={"object": target.name})
                        other.relations[(rkey[0], target.name.casefold())] = moved

    def is_person(self, token: Any, turn: ParsedTurn) -> bool:
        """A proper noun the recognizer takes for a person, or that names a known person."""
        if token.pos_ != "PROPN":
            return False
        if token.ent_type_ == "PERSON":
            return True
        name, _ = _span_name(token, turn)
        return self._names_person(name)

    def _names_person(self, name: str) -> bool:
        """Whether ``name`` is a known person's, or declared one in the batch so far ("my sister X")."""
        key = name.casefold()
        return self.known_types.get(key) is EntityType.PERSON or (
            key in self.accs and self.accs[key].type_votes[EntityType.PERSON] >= _DECLARED
        )

    def earlier_person(self, turn: ParsedTurn, before: int) -> str | None:
        """The one person named before token ``before`` in the turn (for "his"/"her"), if just one.

        A proper noun (not a compound part) is a person if the recognizer says so, or if its name is
        a person's by now (:meth:`is_person`). Each name is looked at once, at its first such
        place before ``before``, in that order (``name_of`` notes a speaker's short form on first
        sight), not every proper noun of the turn at every call.
        """
        hits: list[tuple[int, str]] = []
        for name, first, first_recognized in self._proper_names(turn):
            if first >= before:
                break  # in order of first appearance
            at = first if self._names_person(name) else first_recognized
            if at < before:
                hits.append((at, name))
        found: list[str] = []
        for _, name in sorted(hits):
            name = self.name_of(name)
            if name != turn.utterance.speaker and name not in found:
                found.append(name)
        return found[-1] if len(found) == 1 else None

    def _proper_names(self, turn: ParsedTurn) -> list[tuple[str, int, int]]:
        """The names of the turn's proper nouns (compound parts aside), in order of first appearance.

        Each comes with the token of its first appearance and of its first as a recognized PERSON
        (``len(doc)`` if none); read once per turn.
        """
        if self._names_turn is not turn:
            never = len(turn.doc)
            names: dict[str, list[int]] = {}
            for token in turn.doc:
                if token.pos_ != "PROPN" or token.dep_ == "compound":
                    continue
                name, _ = _span_name(token, turn)
                seen = names.setdefault(name, [token.i, never])
                if token.ent_type_ == "PERSON" and seen[1] == never:
                    seen[1] = token.i
            self._names_turn = turn
            self._names = [(name, first, recognized) for name, (first, recognized) in names.items()]
        return self._names

    def read(self, turn: ParsedTurn) -> None:
        lists = entity_words()
        uid = turn.utterance.id
        speaker = self.acc(turn.utterance.speaker)
        speaker.add_source(uid)
        number = self.turns_read[speaker.name] = self.turns_read.get(speaker.name, 0) + 1
        for attachment in turn.utterance.attachments:
            caption = attachment_caption(attachment)
            if caption:
                speaker.add_attribute("shared_photo", caption, WEAK, False, uid)
        done: set[int] = set()
        for token in turn.doc:
            if token.pos_ == "PROPN" or token.ent_type_ in (
                "ORG",
                "FAC",
                "GPE",
                "LOC",
                "EVENT",
                "WORK_OF_ART",
            ):
                continue  # "Leith Dog School" names a school, not a dog
            relation = _relation_noun(token)
            if relation is not None or token.lemma_.casefold() in lists.pets:
                linked = self._relation(token, relation, turn)
                if not linked and relation is None:
                    self.unnamed_pet[speaker.name] = (token.lemma_.casefold(), number)
                done |= linked
        done |= self._pet_named_later(turn, speaker.name, number)
        for token in turn.doc:
            if token.lemma_.casefold() in lists.occupations and token.i not in done:
                named = _named(token)  # "a nurse called Femi"
                if named is not None and named.i > token.i:
                    name, _ = _span_name(named, turn)
                    if self.mention(name, EntityType.PERSON, uid, weight=_DECLARED) is not None:
                        done |= {t.i for t in named.subtree}
        for ent in turn.ents:
            if ent.label_ not in _NER_TYPES or any(t.i in done for t in ent):
                continue
            if (
                len(ent) == 1
                and ent.start == turn.sentence_of(ent.start).start
                and ent.root.tag_ not in ("NNP", "NNPS")
            ):
                continue  # "Fingers crossed", "Classic!": a capitalised common word
            placed = _after_place_preposition(ent.root)
            for part in _SPLIT.split(_hyphenated(ent)):
                name = _clean_name(part)
                known = self.known_types.get(name.casefold())
                worded = _head_word_type(name)
                if known is not None and known is not EntityType.OTHER:
                    self.mention(name, known, uid, weight=_DECLARED)
                elif worded is not None:
                    self.mention(name, worded, uid, weight=_WORDED)
                elif placed and ent.label_ in ("PERSON", "GPE", "LOC", "FAC", "NORP"):
                    self.mention(name, EntityType.PLACE, uid, weight=_PLACED)
                else:
                    self.mention(name, _NER_TYPES[ent.label_], uid)
        for token in turn.doc:
            if (
                token.lower_ in ("favorite", "favourite")
                and token.dep_ == "amod"
                and not turn.in_question(token.i)
            ):
                self._favorite(token.head, speaker, turn)
        for token in turn.doc:
            if token.dep_ not in ("nsubj", "nsubjpass") or turn.in_question(token.i):
                continue
            if token.lower_ in lists.first_person:
                self._first_person(token.head, speaker, turn)
            elif self.is_person(token, turn):
                name, _ = _span_name(token, turn)
                if self.plausible(name):
                    self._place_facts(token.head, self.acc(name), turn)

    def _pet_named_later(self, turn: ParsedTurn, speaker: str, number: int) -> set[int]:
        """The name given to the pet the speaker spoke of in this turn or their previous one.

        "Her name's Coco", "We named her Luna"; the turn is the speaker's ``number``-th.
        """
        pet = self.unnamed_pet.get(speaker)
        if pet is None or number - pet[1] > 1:
            return set()
        for token in turn.doc:
            if token.pos_ != "PROPN" or turn.in_question(token.i):
                continue
            if not (_names_a_possessed_name(token) or _object_of_naming(token)):
                continue
            name, label = _span_name(token, turn)
            if not self.plausible(name) or label in _NOT_NAMES:
                continue
            acc = self.mention(name, EntityType.PET, turn.utterance.id, weight=_DECLARED)
            if acc is None:
                continue
            acc.add_attribute("species", pet[0], EXPLICIT, False, turn.utterance.id)
            self.acc(speaker).add_relation("pet", acc.name, EntityType.PET, EXPLICIT, turn.utterance.id)
            del self.unnamed_pet[speaker]
            return {t.i for t in token.subtree}
        return set()

    def _relation(self, noun: Any, relation: str | None, turn: ParsedTurn) -> set[int]:
        lists = entity_words()
        first = _named(noun)
        if first is None:
            return set()
        is_pet = noun.lemma_.casefold() in lists.pets
        etype = EntityType.PET if is_pet else EntityType.PERSON
        owner = self.owner(noun, turn)
        if owner is None and noun.dep_ in ("dobj", "attr", "pobj"):
            # "I've been seeing a physio, Ana", "we adopted a beagle called Biscuit"
            verb = noun.head if noun.dep_ != "pobj" else noun.head.head
            subject = next((c for c in verb.children if c.dep_ == "nsubj"), None)
            owner = (
                turn.utterance.speaker
                if subject is not None and subject.lower_ in lists.first_person
                else None
            )
        done: set[int] = set()
        for target in (first, *(c for c in first.conjuncts if c.pos_ == "PROPN")):  # "twins Layla and Zain"
            name, label = _span_name(target, turn)
            if not self.plausible(name) or label in _NOT_NAMES:
                continue
            acc = self.mention(name, etype, turn.utterance.id, weight=_DECLARED)
            if acc is None:
                continue
            if is_pet:
                acc.add_attribute("species", noun.lemma_.casefold(), EXPLICIT, False, turn.utterance.id)
            if owner is not None and owner.casefold() != acc.name.casefold():
                rel = "pet" if is_pet else relation
                if rel is not None:
                    self.acc(owner).add_relation(rel, acc.name, etype, EXPLICIT, turn.utterance.id)
            done |= {t.i for t in target.subtree} | {target.i}
        return done

    def _first_person(self, verb: Any, speaker: _Acc, turn: ParsedTurn) -> None:
        """Facts a speaker states about themselves, read off the verb of an "I"/"we" subject."""
        lists = entity_words()
        uid = turn.utterance.id
        if any(c.dep_ == "neg" for c in verb.children):
            return
        confidence = (
            WEAK if any(c.dep_ == "aux" and c.lower_ in lists.hedges for c in verb.children) else EXPLICIT
        )

        def add(name: str, value: str | None, exclusive: bool = False, weak: bool = False) -> None:
            if value:
                speaker.add_attribute(name, value, WEAK if weak else confidence, exclusive, uid)

        lemma = verb.lemma_.casefold()
        children = list(verb.children)
        if lemma in ("be", "get", "become", "turn"):
            for child in children:
                if child.dep_ == "attr" and child.pos_ == "NOUN":
                    self._being(child, speaker, turn, add)
                if (
                    child.dep_ in ("attr", "acomp", "dobj")
                    and child.like_num
                    and child.lower_ not in ("one", "1")
                ):
                    add("age", child.text, exclusive=True)  # "I'm 34", "I just turned 30"
                if child.dep_ == "acomp" and child.lower_ == "old":
                    numbers = [t for t in child.subtree if t.like_num]
                    add("age", numbers[0].text if numbers else None, exclusive=True)
                if child.dep_ in ("acomp", "attr") and child.lower_ in lists.statuses:
                    add("relationship_status", child.lower_, exclusive=True)
                if child.dep_ == "prep" and child.lower_ == "from" and lemma == "be":
                    add("origin", _object_value(child, turn), exclusive=True)  # "I'm from Ireland"
                if child.dep_ == "prep" and child.lower_ == "into" and lemma == "be":
                    add("likes", _object_value(child, turn))  # "I'm really into jazz"
        if lemma == "grow" and any(c.lower_ == "up" for c in children):
            for prep in (c for c in children if c.dep_ == "prep" and c.lower_ in ("in", "on")):
                add("origin", _object_value(prep, turn), exclusive=True)
        if lemma in lists.like_verbs or lemma in lists.dislike_verbs:
            name = "likes" if lemma in lists.like_verbs else "dislikes"
            for child in children:
                add(name, _liked(child, turn))
            return
        if lemma == "use" and verb.tag_ == "VBD":
            for child in children:
                if child.dep_ == "xcomp":  # "I used to go horseback riding with my dad"
                    add("used_to", _verb_phrase(child))
        if lemma == "have":
            for child in children:
                if child.dep_ == "dobj" and child.lemma_.casefold() in lists.child_words:
                    numbers = [t.text for t in child.children if t.dep_ == "nummod"]
                    add("kids", numbers[0] if numbers else None, exclusive=True)
        # "took up pottery", "started yoga"; not "took my dogs", "took care", "picked a puppy".
        took_up = lemma in lists.start_verbs or any(c.dep_ == "prt" and c.lower_ == "up" for c in children)
        if lemma in lists.take_up_verbs and took_up:
            for child in children:
                if (
                    child.dep_ == "dobj"
                    and child.pos_ == "NOUN"
                    and child.lemma_.casefold() not in lists.vague_objects
                    and not any(c.dep_ == "det" for c in child.children)
                ):
                    add("activity", _chunk_value(child, turn))  # "I took up pottery", not "started the class"
                if child.dep_ == "xcomp" and child.tag_ == "VBG":
                    add("activity", _verb_phrase(child))  # "I started surfing"
        if (
            verb.tag_ == "VBG"
            and lemma not in lists.not_activities
            and verb.dep_ != "relcl"  # "the song I've been working on": its object is outside it
            and "have" in {c.lemma_.casefold() for c in children if c.dep_ == "aux"}
            and not any(c.dep_ == "dobj" for c in children)
        ):
            done = _verb_phrase(verb)  # "I've been painting for 7 years"
            # Not a bare light verb: "I've been working".
            if done is not None and (" " in done or lemma not in lists.light_verbs):
                add("activity", done)
        if verb.tag_ == "VBG" and lemma not in lists.not_activities:
            objects = [c for c in children if c.dep_ == "dobj" and c.pos_ in ("NOUN", "PROPN")]
            if (
                objects
                and objects[0].lower_ not in lists.not_liked
                and objects[0].lemma_.casefold() not in lists.vague_objects
            ):
                name = "studies" if lemma == "study" else "activity"  # "I'm learning the cello"
                add(
                    name,
                    _chunk_value(objects[0], turn)
                    if name == "studies"
                    else f"{verb.lower_} {_chunk_value(objects[0], turn)}",
                )
        for prep in children:
            if prep.dep_ == "prep" and prep.lower_ == "as":
                for obj in prep.children:
                    if obj.dep_ == "pobj" and obj.pos_ == "NOUN":
                        self._being(obj, speaker, turn, add)  # "I work as a nurse", "As a trans woman, I"
        self._place_facts(verb, speaker, turn)

    def _favorite(self, noun: Any, speaker: _Acc, turn: ParsedTurn) -> None:
        """A favourite: "My favorite book is 'Salt Roads'" -> favorite_book: Salt Roads."""
        if not any(c.dep_ == "poss" and c.lower_ in ("my", "our") for c in noun.children):
            return
        verb = noun.head
        if noun.dep_ != "nsubj" or verb.lemma_.casefold() != "be":
            return
        for child in verb.children:
            if child.dep_ in ("attr", "acomp") and child.i > verb.i:
                value = _chunk_value(child, turn).strip("'\" ")
                if value:
                    name = f"favorite_{noun.lemma_.casefold()}"
                    speaker.add_attribute(name, value, EXPLICIT, True, turn.utterance.id)

    def _being(self, noun: Any, speaker: _Acc, turn: ParsedTurn, add: Any) -> None:
        """What "I'm a <noun>" says: an occupation, an identity, a liking ("a big fan of X")."""
        value = _occupation(noun)
        if value is not None:
            add("occupation", value, exclusive=True)
            for prep in noun.children:  # "a chemistry teacher at Harlow Park School"
                if prep.dep_ == "prep" and prep.lower_ in ("at", "for"):
                    for obj in prep.children:
                        if obj.dep_ == "pobj" and obj.pos_ == "PROPN":
                            self._fact(speaker, ("works_at", EntityType.ORGANIZATION), obj, turn)
        modifiers = [
            c
            for c in noun.children
            if c.dep_ in ("amod", "compound") and c.lower_ in entity_words().identity_words
        ]
        if modifiers:
            add("identity", f"{modifiers[0].lower_} {noun.lower_}")
        if noun.lemma_.casefold() in ("fan", "lover"):
            for prep in noun.children:
                if prep.dep_ == "prep" and prep.lower_ == "of":
                    add("likes", _object_value(prep, turn))

    def _place_facts(self, verb: Any, subject: _Acc, turn: ParsedTurn) -> None:
        """Where the subject works, lives or belongs: "work at X", "live in X", "moved to X", "joined X"."""
        lists = entity_words()
        if any(c.dep_ == "neg" for c in verb.children):
            return
        lemma = verb.lemma_.casefold()
        for prep in verb.children:
            if prep.dep_ != "prep":
                continue
            fact = lists.place_verbs.get((lemma, prep.lower_))
            if fact is None or (lemma == "start" and any(c.dep_ == "dobj" for c in verb.children)):
                continue  # "started the class at Kiln House" is no job
            for obj in prep.children:
                if obj.dep_ == "pobj" and obj.pos_ == "PROPN":
                    self._fact(subject, fact, obj, turn)
        if lemma in lists.join_verbs:
            for obj in verb.children:
                if obj.dep_ == "dobj" and obj.pos_ == "PROPN":
                    self._fact(subject, ("member_of", EntityType.ORGANIZATION), obj, turn)

    def _fact(self, speaker: _Acc, fact: tuple[str, EntityType], obj: Any, turn: ParsedTurn) -> None:
        relation, default = fact
        name, label = _span_name(obj, turn)
        if label == "PERSON":
            return
        known = self.known_types.get(name.casefold())
        etype = known or _head_word_type(name) or (_NER_TYPES.get(label or "") if label else None) or default
        if relation == "lives_in":
            etype = EntityType.PLACE
        acc = self.mention(
            name, etype, turn.utterance.id, weight=_PLACED if relation == "lives_in" else _RECOGNIZED
        )
        if acc is None:
            return
        speaker.add_relation(relation, acc.name, etype, EXPLICIT, turn.utterance.id)
        if relation == "lives_in":
            speaker.add_attribute("location", acc.name, EXPLICIT, True, turn.utterance.id)
        elif relation == "works_at":
            speaker.add_attribute("employer", acc.name, EXPLICIT, True, turn.utterance.id)


_CAPTION_LABEL = re.compile(r"^[a-z ]{1,20}:\s*", re.IGNORECASE)
_CAPTION_LEAD = re.compile(
    r"^(?:(?:a|an|the)\s+)?(?:photo|photograph|photography|picture|pic|image|screenshot|drawing)\s+of\s+"
    r"|^there\s+(?:is|are)\s+",
    re.IGNORECASE,
)
_MAX_CAPTION_WORDS = 14


def attachment_caption(attachment: str) -> str | None:
    """What a shared photo shows, from its caption.

    "image: a photo of a dog on a beach" -> "a dog on a beach".
    """
    text = _CAPTION_LEAD.sub("", _CAPTION_LABEL.sub("", normalize_quotes(attachment).strip()))
    return " ".join(text.split()[:_MAX_CAPTION_WORDS]).strip(" .,;") or None


def _hyphenated(ent: Any) -> str:
    """The entity's text with the hyphenated parts the recognizer cut off ("Weston-super-Mare")."""
    doc = ent.doc
    end = ent.end
    while (
        end + 1 < len(doc)
        and doc[end].text == "-"
        and not doc[end - 1].whitespace_
        and not doc[end].whitespace_
    ):
        end += 2
    return doc[ent.start : end].text


def _after_place_preposition(token: Any) -> bool:
    """Whether a name is where something happens.

    After "in"/"at"/"from"/"near", or "to" after a verb of motion ("moved to Lyon", not "talked to
    Lena").
    """
    if token.dep_ != "pobj":
        return False
    prep = token.head.lower_
    if prep in ("in", "at", "from", "near", "around", "outside"):
        return True
    return prep in ("to", "into") and token.head.head.lemma_.casefold() in entity_words().motion_verbs


def _noun_value(noun: Any) -> str:
    """A noun with its compound and adjective modifiers, as written: "charge nurse", "wonky bowls"."""
    words = [
        t
        for t in noun.subtree
        if t.i == noun.i
        or (
            t.head.i == noun.i
            and t.dep_ in _VALUE_MODIFIERS
            and t.dep_ != "poss"
            and t.lower_ not in entity_words().skip_modifiers
        )
        or (t.dep_ == "compound" and t.head.dep_ == "compound")
    ]
    words.sort(key=lambda t: t.i)
    return phrase(t for t in words if t.i <= noun.i)


def _occupation(noun: Any) -> str | None:
    lists = entity_words()
    if noun.lemma_.casefold() not in lists.occupations or noun.lemma_.casefold() in lists.not_occupations:
        return None
    return _noun_value(noun).casefold()


def _chunk_value(noun: Any, turn: ParsedTurn) -> str:
    """The noun phrase a noun heads, as written, without determiners and possessives.

    "live music", "Becoming Nicole", "reading Charlotte's Web".
    """
    if noun.pos_ == "PROPN":
        name, _ = _span_name(noun, turn)
        return name
    chunk = turn.chunk_headed_by(noun.i)
    if chunk is None:
        return noun.text
    # "my", "your" go; a named owner stays ("Charlotte's Web"), with its "'s".
    words = [
        t
        for t in chunk
        if t.dep_ not in ("det", "predet")
        and not (t.dep_ == "poss" and t.pos_ == "PRON")
        and not (t.dep_ == "case" and t.head.pos_ == "PRON")
        and t.lower_ not in entity_words().skip_modifiers
    ]
    return phrase(words) or noun.text


def _object_value(prep: Any, turn: ParsedTurn) -> str | None:
    """The noun phrase a preposition governs: "from Ireland" -> "Ireland"."""
    objects = [c for c in prep.children if c.dep_ == "pobj" and c.pos_ in ("NOUN", "PROPN")]
    return _chunk_value(objects[0], turn) if objects else None


def _verb_phrase(verb: Any) -> str | None:
    """A verb with its objects and prepositional phrases, as said, without clauses of its own.

    "go horseback riding with my dad", "painting for 7 years".
    """
    skip = {
        t.i
        for c in verb.children
        if c.dep_
        in ("advcl", "ccomp", "conj", "cc", "punct", "mark", "nsubj", "aux", "neg", "relcl", "advmod")
        or (c.dep_ == "prep" and not any(g.dep_ in ("pobj", "pcomp") for g in c.children))  # "working on"
        for t in c.subtree
    }
    words = _whole_phrases(verb, _MAX_VALUE_WORDS, skip, right_only=True) or [verb]
    return phrase(t for t in words if t.i >= verb.i) or None  # a misparse can hang a word before it


def _whole_phrases(token: Any, room: int, skip: set[int], *, right_only: bool = False) -> list[Any] | None:
    """``token`` with as many of its right dependents as fit in ``room`` words.

    Each dependent is whole or cut only after a phrase of its own, never leaving a preposition
    without its object ("searching for my keys", not "searching for my keys for the"); ``None`` when
    not even that fits.
    """
    out = [] if right_only else [t for c in token.lefts if c.i not in skip for t in c.subtree]
    out.append(token)
    if len(out) > room:
        return None
    taken = 0
    for child in token.rights:
        if child.i in skip:
            continue
        part = _whole_phrases(child, room - len(out), skip)
        if part is None:
            break
        out += part
        taken += 1
    if taken == 0 and token.dep_ in ("prep", "agent") and not right_only:
        return None
    return sorted(out, key=lambda t: t.i)


def _liked(child: Any, turn: ParsedTurn) -> str | None:
    """The thing or activity liked: a noun phrase object or a gerund phrase ("love running")."""
    if child.dep_ == "dobj" and child.pos_ in ("NOUN", "PROPN"):
        if child.lower_ in entity_words().not_liked:
            return None
        return _chunk_value(child, turn)
    if child.dep_ == "xcomp" and child.tag_ == "VBG" and child.lemma_.casefold() not in ("be", "have"):
        objects = [c for c in child.children if c.dep_ in ("dobj", "prep")]
        tail = ""
        if objects and objects[0].dep_ == "dobj":
            tail = " " + _chunk_value(objects[0], turn)
        return f"{child.text}{tail}"
    return None


def extract_entities(turns: Sequence[ParsedTurn], kb: KnowledgeBase) -> list[EntityObservation]:
    """Entity observations found in a parsed batch.

    Args:
        turns: The batch's utterances with their parses.
        kb: Read-only context: known names, aliases and types are reused.

    Returns:
        One observation per entity, speakers first (but no generic assistant), then in order of
        first mention.
    """
    batch = _Batch(turns, kb)
    for speaker in dict.fromkeys(t.utterance.speaker for t in turns):
        acc = batch.acc(speaker)
        acc.is_speaker = True
        acc.type_votes[EntityType.PERSON] += _DECLARED
    for turn in turns:
        batch.read(turn)
    batch.merge_short_forms()
    out = [
        acc.build()
        for acc in batch.accs.values()
        if acc.sources and acc.name.casefold() not in GENERIC_ASSISTANT_NAMES
    ]
    _log.debug("%d entity observations from %d utterances", len(out), len(turns))
    return out


def entity_names(observations: Iterable[EntityObservation], *types: EntityType) -> dict[str, str]:
    """Casefolded name and alias -> name, for the observations of the given types."""
    out: dict[str, str] = {}
    for obs in observations:
        if obs.type in types or obs.is_speaker:
            for alias in (obs.name, *obs.aliases):
                out.setdefault(alias.casefold(), obs.name)
    return out
