"""Temporal questions: what time a question asks about, and the events dated there.

:func:`parse_temporal_query` reads a question once: the absolute intervals it names ('in May
2023', 'last year' against a reference day), whether it asks for a time at all ('When did...'),
and 'before X' / 'after X' relations. :func:`temporal_event_matches` turns that into events,
using the event timeline and the matching of an
:class:`~gravity_core.query.matching.lexicon.AnchorLexicon`, so a dated event is found even when its
wording is far from the question's. The scores are made of the lexicon's
:class:`~gravity_core.query.config.MatchWeights`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

import numpy as np
import numpy.typing as npt

from gravity_core.errors import ConfigurationError
from gravity_core.query.config import MatchWeights
from gravity_core.query.matching.lexicon import AnchorLexicon
from gravity_core.query.matching.timeline import EventTimeline
from gravity_core.storage.packed_kb import KBReader
from gravity_core.temporal import find_time_expressions

__all__ = ["BeforeAfter", "TemporalQuery", "parse_temporal_query", "temporal_event_matches"]

logger = logging.getLogger(__name__)

BeforeAfter = Literal["before", "after"]

_INTENT_RE = re.compile(
    r"\b(?:when|since\s+when|(?:what|which)\s+(?:date|day|year|month|week|season|time\s+of\s+year)"
    r"|how\s+long|how\s+many\s+(?:years|months|weeks|days)|recently|lately|before|after"
    r"|(?:the\s+)?(?:first|last)\s+time)\b",
    re.IGNORECASE,
)
# 'before the wedding', 'after her trip to Paris'; the phrase ends at punctuation (not the comma of
# 'August 3, 2023') or a new clause.
_RELATIVE_RE = re.compile(r"\b(before|after)\b\s+((?:[^?!.,;:]|,(?=\s*\d))+)", re.IGNORECASE)
_CLAUSE_END_RE = re.compile(r"\s+(?:and|but|when|while|because|so\s+that|since|although)\b", re.IGNORECASE)
_NOT_A_PIVOT = frozenset({"that", "this", "then", "now", "it", "which", "all", "ever", "before", "after"})
# A time phrase ending this close before 'before'/'after' modifies it ('the weekend before X').
_MODIFIER_GAP = 2

_TIE_EPS = 1e-6


@dataclass(frozen=True)
class TemporalQuery:
    """The time constraints of one question.

    Attributes:
        intervals: Absolute, inclusive day intervals the question names ('in May 2023').
        intent: Whether the question asks about time ('when', 'how long ago', 'recently'...).
        relative: ``("before" | "after", phrase)`` pairs, e.g. ``("before", "the wedding")``.
        reference: The day relative phrases were resolved against.
        question: The question itself (its named entities narrow the matches).
    """

    intervals: list[tuple[date, date]] = field(default_factory=list)
    intent: bool = False
    relative: list[tuple[BeforeAfter, str]] = field(default_factory=list)
    reference: date | None = None
    question: str = ""

    @property
    def is_temporal(self) -> bool:
        """Whether the question has any temporal aspect."""
        return bool(self.intervals or self.intent or self.relative)


def parse_temporal_query(question: str, reference: date) -> TemporalQuery:
    """Find the time constraints of a question.

    Args:
        question: The question as asked.
        reference: The day 'last year' or 'recently' are relative to: the question's date when
            known, else the day of the KB's latest utterance.

    Returns:
        The intervals, temporal intent and before/after relations of ``question``. Time phrases
        inside a before/after phrase ('before 3 August 2023') are kept in ``relative`` only.

    Raises:
        ConfigurationError: ``reference`` is not a date.
    """
    if not isinstance(reference, date):
        raise ConfigurationError(f"reference must be a date, got {type(reference).__name__}")
    relative: list[tuple[BeforeAfter, str]] = []
    spans: list[tuple[int, int]] = []
    for match in _RELATIVE_RE.finditer(question):
        phrase = match.group(2)
        cut = _CLAUSE_END_RE.search(phrase)
        if cut is not None:
            phrase = phrase[: cut.start()]
        phrase = phrase.strip()
        words = phrase.lower().split()
        if not words or words[0] in _NOT_A_PIVOT:
            continue
        kind: BeforeAfter = "before" if match.group(1).lower() == "before" else "after"
        relative.append((kind, phrase))
        spans.append((match.start(), match.start(2) + len(phrase)))
    intervals: list[tuple[date, date]] = []
    for mention in find_time_expressions(question, reference):
        time = mention.time
        if time.start is None or time.end is None:
            continue
        if any(s - _MODIFIER_GAP <= mention.end and mention.start < e for s, e in spans):
            continue
        if (time.start, time.end) not in intervals:
            intervals.append((time.start, time.end))
    intent = _INTENT_RE.search(question) is not None
    return TemporalQuery(
        intervals=intervals, intent=intent, relative=relative, reference=reference, question=question
    )


def temporal_event_matches(
    kb: KBReader,
    tq: TemporalQuery,
    lexicon: AnchorLexicon,
    candidates: Mapping[str, float],
    limit: int,
) -> list[tuple[str, float]]:
    """Events that satisfy a question's time constraints, best first.

    - Intervals: events whose normalized time overlaps one of them. Events of the entities the
      question names come first (when it names any), then phrase-dated events before
      mention-dated ones, then events lying wholly inside the interval, then the native
      ``candidates`` score.
    - 'before/after X': X is a date ('before 3 August 2023') or the event best matching X
      through the lexicon; then the events of the same participants before / after that day,
      closest first.
    - Intent alone ('When did Caroline...?'), or intent when the above leave room: the
      ``candidates`` with a phrase-based date first, then the mention-dated ones, by score.

    Args:
        kb: The KB the lexicon was built from.
        tq: The parsed question (:func:`parse_temporal_query`).
        lexicon: The KB's lexicon (timeline, participants and weights).
        candidates: Native event candidates of the question, ``{event_id: score in [0, 1]}``.
        limit: At most this many events.

    Returns:
        ``(event_id, score)`` pairs, score in ``[0, 1]``; empty for a non-temporal question.
    """
    if limit <= 0 or not tq.is_temporal or not lexicon.event_ids:
        return []
    timeline, weights = lexicon.timeline, lexicon.weights
    question_people = lexicon.participants(tq.question) if tq.question else []
    out: dict[str, float] = {}
    if tq.intervals:
        _add(out, _interval_matches(tq, timeline, weights, candidates, question_people, limit), limit)
    for kind, phrase in tq.relative:
        if len(out) >= limit:
            break
        _add(out, _relative_matches(kb, tq, kind, phrase, lexicon, question_people, limit), limit)
    if tq.intent and len(out) < limit:
        _add(out, _intent_matches(timeline, weights, candidates, limit), limit)
    return list(out.items())


def _add(out: dict[str, float], matches: list[tuple[str, float]], limit: int) -> None:
    for event_id, score in matches:
        if len(out) >= limit:
            return
        out.setdefault(event_id, score)


def _overlapping(
    tq: TemporalQuery, timeline: EventTimeline, people: list[int] | None
) -> npt.NDArray[np.intp]:
    return timeline.union(
        [timeline.overlapping(f.toordinal(), t.toordinal(), people) for f, t in tq.intervals]
    )


def _interval_matches(
    tq: TemporalQuery,
    timeline: EventTimeline,
    weights: MatchWeights,
    candidates: Mapping[str, float],
    people: list[str],
    limit: int,
) -> list[tuple[str, float]]:
    dates = timeline.dates
    # Events of the named participants rank first: when they fill the slots, no other counts.
    named = timeline.people(people)
    positions = _overlapping(tq, timeline, named) if people else np.empty(0, dtype=np.intp)
    if positions.size >= limit:
        involved = np.ones(positions.size, dtype=np.bool_)
    else:
        positions = _overlapping(tq, timeline, None)
        involved = timeline.involves(positions, named)
    if positions.size == 0:
        return []
    starts, ends = dates.start[positions], dates.end[positions]
    contained = np.zeros(positions.size, dtype=np.bool_)
    for first, last in tq.intervals:
        contained |= (starts >= first.toordinal()) & (ends <= last.toordinal())
    tier = 4 * involved.astype(np.int8) + 2 * dates.phrase[positions].astype(np.int8) + contained
    if positions.size > limit:
        # Only the best tiers can reach the top `limit` (MatchWeights checks the weights rank so):
        # drop the rest before scoring.
        counts = np.bincount(tier, minlength=8)
        floor = int(np.flatnonzero(np.cumsum(counts[::-1]) >= limit)[0])
        keep = tier >= 7 - floor
        positions, starts, ends = positions[keep], starts[keep], ends[keep]
        involved, contained = involved[keep], contained[keep]
    native = _native_scores(timeline, candidates, positions)
    score = (
        weights.temporal_participant * involved
        + weights.temporal_phrase * dates.phrase[positions]
        + weights.temporal_contained * contained
        + weights.temporal_native * native
    )
    # Ties: the narrower interval, then the later event.
    span = (ends - starts).astype(np.float64)
    rank = score + _TIE_EPS / (1.0 + span) + _TIE_EPS * 1e-3 * positions / max(1, len(timeline.event_ids))
    return _best(timeline, positions, score, rank, limit)


def _native_scores(
    timeline: EventTimeline, candidates: Mapping[str, float], positions: npt.NDArray[np.intp]
) -> npt.NDArray[np.float64]:
    """The candidates' native scores at ``positions``, 0 for the others."""
    found = [(timeline.position(e), v) for e, v in candidates.items()]
    pairs = [(p, min(1.0, max(0.0, float(v)))) for p, v in found if p is not None]
    if not pairs:
        return np.zeros(positions.size, dtype=np.float64)
    dense = np.zeros(len(timeline.event_ids), dtype=np.float64)  # lazily zeroed pages: cheap
    dense[[p for p, _ in pairs]] = [v for _, v in pairs]
    return dense[positions]


def _best(
    timeline: EventTimeline,
    positions: npt.NDArray[np.intp],
    score: npt.NDArray[np.float64],
    rank: npt.NDArray[np.float64],
    limit: int,
) -> list[tuple[str, float]]:
    if positions.size > limit:
        part = np.argpartition(-rank, limit - 1)[:limit]
        positions, score, rank = positions[part], score[part], rank[part]
    order = np.argsort(-rank, kind="stable")
    return [(timeline.event_ids[int(positions[i])], min(1.0, float(score[i]))) for i in order]


def _relative_matches(
    kb: KBReader,
    tq: TemporalQuery,
    kind: BeforeAfter,
    phrase: str,
    lexicon: AnchorLexicon,
    people: list[str],
    limit: int,
) -> list[tuple[str, float]]:
    timeline = lexicon.timeline
    dates = timeline.dates
    participants = list(people)
    pivot_pos = -1  # a date pivot has no position
    reference = tq.reference or lexicon.latest_day
    times = [m.time for m in find_time_expressions(phrase, reference)] if reference is not None else []
    bounds = [(t.start, t.end) for t in times if t.start is not None and t.end is not None]
    if bounds:
        first, last = bounds[0]
        pivot_day = (first if kind == "before" else last).toordinal()
    else:
        best = lexicon.match_event(phrase, people)
        pos = timeline.position(best) if best is not None else None
        if best is None or pos is None:
            logger.debug("no event matches %r", phrase)
            return []
        pivot_pos, pivot_day = pos, int(dates.start[pos])
        event = kb.events.get(best)
        if event is not None and event.who_ids:
            participants = list(event.who_ids)
    # The closest events lie next to the pivot in each participant's chronology; a window
    # of a few times `limit` leaves room for same-day and overlapping events.
    around = timeline.people(participants) if participants else None
    positions = timeline.around(around, pivot_day, 4 * limit + 16)
    starts, ends = dates.start[positions], dates.end[positions]
    # Same-day events of an event pivot count by conversation order (the KB keeps it).
    same_day = (starts == pivot_day) & (positions != pivot_pos) & (pivot_pos >= 0)
    if kind == "before":
        keep = (ends < pivot_day) | (same_day & (positions < pivot_pos))
        distance = np.maximum(pivot_day - ends, 0)
    else:
        keep = (starts > pivot_day) | (same_day & (positions > pivot_pos))
        distance = np.maximum(starts - pivot_day, 0)
    positions, distance = positions[keep], distance[keep].astype(np.float64)
    if positions.size == 0:
        return []
    score = 1.0 / (1.0 + distance / lexicon.weights.decay_days)
    # Ties: phrase-dated events first, then the closer in conversation order.
    closeness = 1.0 / (1.0 + np.abs(positions - max(pivot_pos, 0)))
    rank = score + _TIE_EPS * dates.phrase[positions] + _TIE_EPS * 1e-3 * closeness
    return _best(timeline, positions, score, rank, limit)


def _intent_matches(
    timeline: EventTimeline, weights: MatchWeights, candidates: Mapping[str, float], limit: int
) -> list[tuple[str, float]]:
    base, by_native = weights.temporal_intent, 1.0 - weights.temporal_intent
    scored: list[tuple[float, int, str]] = []
    for order, (event_id, native) in enumerate(candidates.items()):
        pos = timeline.position(event_id)
        if pos is None:
            continue
        value = min(1.0, max(0.0, float(native)))
        phrase = bool(timeline.dates.phrase[pos])
        scored.append(((base + by_native * value) if phrase else by_native * value, order, event_id))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [(event_id, score) for score, _, event_id in scored[:limit]]
