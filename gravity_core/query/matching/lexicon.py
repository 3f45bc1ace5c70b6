"""Native (embedding-free) matching of a question against a KB's anchors.

:class:`AnchorLexicon` is built once per loaded KB from three tables: the names
(:mod:`~gravity_core.query.matching.names`), the keyword indexes
(:mod:`~gravity_core.query.matching.keywords`) and the event timeline
(:mod:`~gravity_core.query.matching.timeline`). Per question it does dictionary lookups and a
few numpy operations over the posting lists, never a Python scan over all anchors, so it stays
well under a millisecond at tens of thousands of events.

Matching, in short:

- Entities: names and aliases, misspelt names and words of multi-word names, then, at lower
  scores, entities holding a relation to a named entity and entities whose attribute or relation
  values share the question's words.
- Events: participants (events of the entities named in the question) plus IDF-weighted
  keyword coverage of ``what`` / ``where`` / ``outcome``.
- Topics: IDF-weighted keyword coverage of label and keywords, key facts at a lower weight.

Every score comes from :class:`~gravity_core.query.config.MatchWeights`; :meth:`AnchorLexicon.reweighted`
gives the lexicon of the same KB under other weights without reading the KB again.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from typing import TypeVar

import numpy as np

from gravity_core.extract.offline.keywords import content_tokens
from gravity_core.query.config import MatchWeights
from gravity_core.query.matching.keywords import (
    QUESTION_STEMS,
    KeywordIndex,
    Stemmer,
    attribute_fields,
    event_fields,
    topic_fields,
)
from gravity_core.query.matching.names import NameTable, lowercase_words, name_tokens
from gravity_core.query.matching.ranking import FloatArray, IntArray, ties, top
from gravity_core.query.matching.timeline import EventTimeline
from gravity_core.storage.packed_kb import KBReader

__all__ = ["AnchorLexicon"]

R = TypeVar("R")

_PARSE_CACHE_SIZE = 64
_VARIANTS = 8  # lexicons under other weights kept per KB


@dataclass(frozen=True, slots=True)
class _Parsed:
    """What one question yields, shared by the entity, event and topic lookups."""

    named: dict[int, float]  # entity position -> name-level score
    participants: tuple[int, ...]  # named entities that take part in events
    stems: tuple[str, ...]  # keyword stems, participant names removed
    attribute_stems: tuple[str, ...]  # keyword stems, every matched name removed


class AnchorLexicon:
    """Precomputed name tables, keyword indexes and event timeline of one KB, for native matching.

    Build it with :meth:`from_kb` once per loaded KB; every method then costs dictionary lookups
    and vector operations on posting lists. All scores are in ``[0, 1]``, higher is better; they
    rank candidates within one question and are not comparable across kinds. Small caches
    (stems, misspellings, the last questions) make repeated lookups of one question cheap.

    Attributes:
        entity_ids: Entity ids in KB order (the positions the arrays use).
        event_ids: Event ids in KB order.
        topic_ids: Topic ids in KB order.
        timeline: The events by day and participant (dates, before/after look-ups).
        latest_day: Day of the KB's latest utterance (latest event report without utterances).
        weights: The weights every score is made of.
    """

    def __init__(self, kb: KBReader, weights: MatchWeights | None = None) -> None:
        """Index ``kb`` (prefer :meth:`from_kb`)."""
        self.weights = weights or MatchWeights()
        w = self.weights
        # Each pass reads the records again: a packed KB makes its models as they are read, and
        # holding them all at once is what packing avoids.
        entities = _Records(kb.entities)
        events = _Records(kb.events)
        topics = _Records(kb.topics)
        # The KB's own keys (the ids it is read by), so the strings are shared with it.
        self.entity_ids: tuple[str, ...] = tuple(kb.entities)
        self.event_ids: tuple[str, ...] = tuple(kb.events)
        self.topic_ids: tuple[str, ...] = tuple(kb.topics)
        entity_pos = {eid: i for i, eid in enumerate(self.entity_ids)}
        self._stem = stemmer = Stemmer()

        self._event_index = KeywordIndex(
            (stemmer.field_masks(event_fields(e)) for e in events), len(events), w.event_fields
        )
        self._topic_index = KeywordIndex(
            (stemmer.field_masks(topic_fields(t)) for t in topics), len(topics), w.topic_fields
        )
        self._attribute_index = KeywordIndex(
            (stemmer.field_masks(attribute_fields(e)) for e in entities), len(entities), w.attribute_fields
        )
        indexes = (self._event_index, self._topic_index, self._attribute_index)
        keywords = [stem for index in indexes for stem in index.postings]
        self._names = NameTable(entities, entity_pos, lowercase_words(events, topics), keywords, stemmer)
        self.latest_day: date | None = _latest_day(kb)
        self.timeline = EventTimeline(events, self.event_ids, entity_pos, self._names.unique, self.latest_day)
        self._entity_ties = ties(len(entities))
        self._topic_ties = ties(len(topics))
        self._parse_cache: dict[str, _Parsed] = {}
        self._variants: dict[MatchWeights, AnchorLexicon] = {}

    @classmethod
    def from_kb(cls, kb: KBReader, weights: MatchWeights | None = None) -> AnchorLexicon:
        """Build the lexicon of ``kb``.

        Args:
            kb: The loaded knowledge base; later changes to it are not seen.
            weights: The matching weights (default: :class:`MatchWeights`'s defaults).

        Returns:
            A lexicon answering :meth:`entities`, :meth:`events` and :meth:`topics`.
        """
        return cls(kb, weights)

    def reweighted(self, weights: MatchWeights) -> AnchorLexicon:
        """This KB's lexicon under ``weights``: itself when they are its own.

        Names and timeline are shared; the keyword indexes are weighed again when their field
        weights differ. A few such lexicons are kept, so a preset's weights cost that once per KB.
        """
        if weights is self.weights or weights == self.weights:
            return self
        found = self._variants.get(weights)
        if found is not None:
            return found
        out = copy.copy(self)
        out.weights = weights
        out._parse_cache = {}
        out._variants = {}
        if weights.event_fields != self.weights.event_fields:
            out._event_index = self._event_index.reweighted(weights.event_fields)
        if weights.topic_fields != self.weights.topic_fields:
            out._topic_index = self._topic_index.reweighted(weights.topic_fields)
        if weights.attribute_fields != self.weights.attribute_fields:
            out._attribute_index = self._attribute_index.reweighted(weights.attribute_fields)
        if len(self._variants) >= _VARIANTS:
            self._variants.clear()
        self._variants[weights] = out
        return out

    # ---------------------------------------------------------------------------- question side

    def _parse(self, question: str) -> _Parsed:
        cached = self._parse_cache.get(question)
        if cached is not None:
            return cached
        raw = name_tokens(question)
        named, consumed, forms = self._names.match(raw, self.weights)
        participants = tuple(
            p
            for p, s in sorted(named.items(), key=lambda kv: -kv[1])
            if s >= self.weights.participant_min and self.timeline.takes_part(p)
        )
        part_set = set(participants)
        all_names = {raw[j][0] for j in consumed} | {forms[j] for j in consumed}
        part_names = {raw[j][0] for j, e in consumed.items() if e in part_set}
        part_names |= {forms[j] for j, e in consumed.items() if e in part_set}
        tokens = [(t.surface.lower(), t.lemma) for t in content_tokens(question)]

        def stems_without(excluded: set[str]) -> tuple[str, ...]:
            kept = (
                self._stem(lemma) for word, lemma in tokens if word not in excluded and lemma not in excluded
            )
            return tuple(s for s in dict.fromkeys(kept) if len(s) >= 3 and s not in QUESTION_STEMS)

        parsed = _Parsed(
            named=named,
            participants=participants,
            stems=stems_without(part_names),
            attribute_stems=stems_without(all_names),
        )
        if len(self._parse_cache) >= _PARSE_CACHE_SIZE:
            self._parse_cache.clear()
        self._parse_cache[question] = parsed
        return parsed

    # ---------------------------------------------------------------------------------- public

    def focus(self, question: str) -> frozenset[str]:
        """The stems of what ``question`` asks about: its keyword stems but question words."""
        return frozenset(self._stem.stems(question)) - QUESTION_STEMS

    def participants(self, question: str) -> list[str]:
        """Ids of the entities named in ``question`` that take part in events, best match first."""
        return [self.entity_ids[p] for p in self._parse(question).participants]

    def entities(self, question: str, limit: int) -> dict[str, float]:
        """Entities the question names or points at.

        Args:
            question: The question as asked.
            limit: At most this many entities.

        Returns:
            ``{entity_id: score}`` best first. Names and aliases score near 1 (lower when
            misspelled, written as a lowercase common word, or only partly given); with the
            default weights, holders of a relation to a named entity 0.6, the named entities' own
            relation objects 0.4, and entities whose attribute or relation values share the
            question's words up to 0.5.
        """
        if limit <= 0 or not self.entity_ids:
            return {}
        w = self.weights
        parsed = self._parse(question)
        scores = np.zeros(len(self.entity_ids), dtype=np.float64)
        touched: list[IntArray] = []
        coverage = self._attribute_index.coverage(parsed.attribute_stems)
        if coverage is not None:
            positions, values = coverage
            scores[positions] = w.attribute * values
            touched.append(positions)
        linked: list[int] = list(parsed.named)
        for pos, named in parsed.named.items():
            for holder in self._names.holders(pos):
                scores[holder] = max(scores[holder], w.holder * named)
                linked.append(holder)
            for obj in self._names.objects(pos):
                scores[obj] = max(scores[obj], w.relation_object * named)
                linked.append(obj)
        for pos, named in parsed.named.items():
            scores[pos] = max(scores[pos], named)
        touched.append(np.asarray(linked, dtype=np.intp))
        positions = np.unique(np.concatenate(touched))
        return top(positions, scores[positions], self._entity_ties, limit, self.entity_ids)

    def events(self, question: str, limit: int, entity_ids: Collection[str] = ()) -> dict[str, float]:
        """Events matching the question by participants and keywords.

        Args:
            question: The question as asked (or any phrase describing an event).
            limit: At most this many events.
            entity_ids: Participants to match; empty means the entities named in the question.

        Returns:
            ``{event_id: score}`` best first. With participants, the score is
            ``event_keywords * keyword coverage + (1 - event_keywords) * (takes part)``
            (0.7 and 0.3 by default); without, the keyword coverage (IDF-weighted share of the
            question's content words found in what/where/outcome). Among equal scores the later
            event comes first.
        """
        if limit <= 0 or not self.event_ids:
            return {}
        w, timeline = self.weights, self.timeline
        parsed = self._parse(question)
        people = timeline.people(entity_ids) if entity_ids else list(parsed.participants)
        people = [p for p in people if timeline.takes_part(p)]
        coverage = self._event_index.coverage(parsed.stems)
        if not people:
            if coverage is None:
                return {}
            return top(*coverage, timeline.ties, limit, self.event_ids)
        parts: list[tuple[IntArray, FloatArray]] = []
        matched = np.empty(0, dtype=np.intp)
        if coverage is not None:
            matched, values = coverage
            member = timeline.involves(matched, people)
            parts.append((matched, w.event_keywords * values + w.event_participant * member))
        # Events sharing no word all score the participation weight: only the latest can make it.
        latest = timeline.latest_unmatched(people, matched, limit)
        parts.append((latest, np.full(latest.size, w.event_participant)))
        positions = np.concatenate([p for p, _ in parts])
        scores = np.concatenate([s for _, s in parts])
        return top(positions, scores, timeline.ties, limit, self.event_ids)

    def topics(self, question: str, limit: int) -> dict[str, float]:
        """Topics whose label, keywords or key facts share the question's words.

        Returns:
            ``{topic_id: score}`` best first: IDF-weighted keyword coverage, key-fact words
            counting 0.4 of label and keyword words by default.
        """
        if limit <= 0 or not self.topic_ids:
            return {}
        coverage = self._topic_index.coverage(self._parse(question).stems)
        if coverage is None:
            return {}
        return top(*coverage, self._topic_ties, limit, self.topic_ids)

    def match_event(self, phrase: str, entity_ids: Collection[str] = ()) -> str | None:
        """The event best described by ``phrase`` ('the charity race'), or None if no word matches.

        Scored as :meth:`events`, but an event must share at least one keyword with the phrase.

        Args:
            phrase: A short description of an event.
            entity_ids: Participants that make an event likelier; empty means those the phrase names.
        """
        if not self.event_ids:
            return None
        w, timeline = self.weights, self.timeline
        parsed = self._parse(phrase)
        coverage = self._event_index.coverage(parsed.stems)
        if coverage is None:
            return None
        positions, values = coverage
        people = timeline.people(entity_ids) if entity_ids else parsed.participants
        score = w.event_keywords * values + w.event_participant * timeline.involves(positions, people)
        best = int(np.argmax(score + timeline.ties[positions]))
        return self.event_ids[int(positions[best])]

    def __repr__(self) -> str:
        return (
            f"AnchorLexicon(entities={len(self.entity_ids)}, events={len(self.event_ids)}, "
            f"topics={len(self.topic_ids)})"
        )


class _Records(Collection[R]):
    """The values of a mapping, read again on each iteration."""

    def __init__(self, records: Mapping[str, R]) -> None:
        self._records = records

    def __iter__(self) -> Iterator[R]:
        return iter(self._records.values())

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, item: object) -> bool:
        return any(item is record for record in self)


def _latest_day(kb: KBReader) -> date | None:
    if kb.utterances:
        return max(u.timestamp.date() for u in kb.utterances.values())
    return max((e.said_at.date() for e in kb.events.values()), default=None)
