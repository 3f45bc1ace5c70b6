"""The event timeline of a KB: each event's day interval and participants, for date look-ups.

Events are held by position (their order in the KB) in day-ordinal arrays, chronologically per
participant, so 'what happened in May', 'before the wedding' or 'Caroline's latest events' are
binary searches and vector operations, never a scan of Python objects.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date

import numpy as np
import numpy.typing as npt

from gravity_core.query.matching.ranking import ties
from gravity_core.schema import EventAnchor

__all__ = ["EventDates", "EventTimeline"]

IntArray = npt.NDArray[np.intp]

_SHORT_SPAN = 31  # days; see _Spans


@dataclass(frozen=True, slots=True)
class EventDates:
    """Per-event day ordinals (``date.toordinal()``), aligned with :attr:`EventTimeline.event_ids`.

    Attributes:
        start: First day of the event's normalized interval (its mention day when it has none).
        end: Last day of that interval.
        phrase: Whether the interval came from a time phrase (``TimeRef.basis == "phrase"``).
    """

    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    phrase: npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class _Spans:
    """Events by start day, for interval look-ups by binary search.

    Events spanning at most ``_SHORT_SPAN`` days are found in a window of the start-sorted
    list; the few longer ones ('last year', 'since 2019') are checked one by one.
    """

    short: IntArray
    short_starts: npt.NDArray[np.int64]
    short_ends: npt.NDArray[np.int64]
    long: IntArray
    long_starts: npt.NDArray[np.int64]
    long_ends: npt.NDArray[np.int64]

    @classmethod
    def of(cls, chronological: IntArray, dates: EventDates) -> _Spans:
        starts, ends = dates.start[chronological], dates.end[chronological]
        is_short = ends - starts <= _SHORT_SPAN
        short, long = chronological[is_short], chronological[~is_short]
        return cls(short, starts[is_short], ends[is_short], long, starts[~is_short], ends[~is_short])

    def overlapping(self, first: int, last: int) -> IntArray:
        """Positions of the events sharing a day with ``[first, last]`` (day ordinals)."""
        lo = int(np.searchsorted(self.short_starts, first - _SHORT_SPAN, side="left"))
        hi = int(np.searchsorted(self.short_starts, last, side="right"))
        short = self.short[lo:hi][self.short_ends[lo:hi] >= first]
        if self.long.size == 0:
            return short
        long = self.long[(self.long_starts <= last) & (self.long_ends >= first)]
        return np.concatenate([short, long])


class EventTimeline:
    """A KB's events by day and by participant.

    Entities are given by position (their order in the KB; :meth:`people` maps ids); events are
    returned as positions in :attr:`event_ids`.

    Args:
        events: The KB's events, in the order of their positions.
        event_ids: Their ids.
        entity_pos: Entity id -> position.
        resolve: Position of the one entity a name names (None if none or several), for events of
            older KBs that list their participants by name only.
        latest_day: Day of the KB's latest utterance.

    Attributes:
        event_ids: Event ids in KB order.
        dates: Each event's day interval, aligned with ``event_ids``.
        ties: Tie-breaking offsets by which later events win (chronological, conversation order
            within a day).
        latest_day: Day of the KB's latest utterance (latest event report without utterances).
    """

    def __init__(
        self,
        events: Collection[EventAnchor],
        event_ids: tuple[str, ...],
        entity_pos: Mapping[str, int],
        resolve: Callable[[str], int | None],
        latest_day: date | None,
    ) -> None:
        self.event_ids = event_ids
        self.latest_day = latest_day
        self._entity_pos = entity_pos
        self._event_pos = {eid: i for i, eid in enumerate(event_ids)}
        self._n_entities = len(entity_pos)
        n = len(events)
        start = np.empty(n, dtype=np.int64)
        end = np.empty(n, dtype=np.int64)
        phrase = np.zeros(n, dtype=np.bool_)
        who: list[list[int]] = []
        for pos, event in enumerate(events):
            when = event.when
            if when is not None and when.start is not None and when.end is not None:
                start[pos], end[pos] = when.start.toordinal(), when.end.toordinal()
                phrase[pos] = when.basis == "phrase"
            else:
                start[pos] = end[pos] = event.said_at.date().toordinal()
            people = list(dict.fromkeys(entity_pos[i] for i in event.who_ids if i in entity_pos))
            if not people:  # older KBs: resolve the names
                found = (resolve(w) for w in event.who)
                people = list(dict.fromkeys(p for p in found if p is not None))
            who.append(people)
        self.dates = EventDates(start=start, end=end, phrase=phrase)
        # Chronological order (conversation order within a day): later events win score ties,
        # and each entity's events are kept in this order for 'before/after' look-ups.
        chrono = np.lexsort((np.arange(n), start)).astype(np.intp)
        self.ties = ties(n, chrono)
        by_entity: dict[int, list[int]] = defaultdict(list)
        for pos in chrono.tolist():
            for p in who[pos]:
                by_entity[p].append(pos)
        self._by_entity = {k: np.asarray(v, dtype=np.intp) for k, v in by_entity.items()}
        self._starts_by_entity = {k: start[v] for k, v in self._by_entity.items()}
        self._chrono, self._chrono_starts = chrono, start[chrono]
        self._spans = _Spans.of(chrono, self.dates)
        self._spans_by_entity = {k: _Spans.of(v, self.dates) for k, v in self._by_entity.items()}
        # Participants as columns: column k holds each event's k-th participant (-1 if none).
        width = max((len(w) for w in who), default=0) or 1
        columns = [np.full(n, -1, dtype=np.intp) for _ in range(width)]
        for pos, people in enumerate(who):
            for k, p in enumerate(people):
                columns[k][pos] = p
        self._who_columns = columns

    def people(self, entity_ids: Iterable[str]) -> list[int]:
        """Positions of the known ones of ``entity_ids``, in order."""
        return [p for p in (self._entity_pos.get(e) for e in entity_ids) if p is not None]

    def takes_part(self, entity: int) -> bool:
        """Whether the entity at position ``entity`` takes part in any event."""
        return entity in self._by_entity

    def position(self, event_id: str) -> int | None:
        """Position of an event in :attr:`event_ids` and :attr:`dates` (None if unknown)."""
        return self._event_pos.get(event_id)

    def involves(self, positions: IntArray, people: Collection[int]) -> npt.NDArray[np.bool_]:
        """Per event position, whether one of ``people`` (entity positions) takes part."""
        if not people or positions.size == 0:
            return np.zeros(positions.size, dtype=np.bool_)
        # One slot more than there are entities: the -1 padding lands there.
        table = np.zeros(self._n_entities + 1, dtype=np.bool_)
        table[list(people)] = True
        out = table[self._who_columns[0][positions]]
        for column in self._who_columns[1:]:
            out |= table[column[positions]]
        return out

    def latest_unmatched(self, people: Sequence[int], matched: IntArray, limit: int) -> IntArray:
        """The ``limit`` latest events of each of ``people`` (who take part in events) not in ``matched``."""
        taken: npt.NDArray[np.bool_] | None = None
        if matched.size:
            taken = np.zeros(len(self.event_ids), dtype=np.bool_)
            taken[matched] = True
        chunks = []
        for p in people:
            chronological = self._by_entity[p]
            take = 2 * limit
            while True:
                tail = chronological[-take:]
                if taken is not None:
                    tail = tail[~taken[tail]]
                if tail.size >= limit or take >= chronological.size:
                    break
                take *= 4
            chunks.append(tail[-limit:])
        latest = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.intp)
        return np.unique(latest) if len(chunks) > 1 else latest

    def events_of(self, people: Iterable[int]) -> IntArray:
        """Positions of the events any of ``people`` takes part in (ascending positions)."""
        arrays = [self._by_entity[p] for p in people if p in self._by_entity]
        if not arrays:
            return np.empty(0, dtype=np.intp)
        return np.unique(np.concatenate(arrays))

    def overlapping(self, first: int, last: int, people: Sequence[int] | None = None) -> IntArray:
        """Events whose day interval shares a day with ``[first, last]``.

        Args:
            first: First day, as ``date.toordinal()``.
            last: Last day (inclusive).
            people: Only events of these participants (entity positions); None means all events.

        Returns:
            Event positions, each once, in no particular order.
        """
        if people is None:
            return self._spans.overlapping(first, last)
        spans = [self._spans_by_entity[p] for p in people if p in self._spans_by_entity]
        return self.union([s.overlapping(first, last) for s in spans])

    def union(self, chunks: Sequence[IntArray]) -> IntArray:
        """The distinct event positions of ``chunks``, ascending."""
        if not chunks:
            return np.empty(0, dtype=np.intp)
        if len(chunks) == 1:
            return np.sort(chunks[0]) if chunks[0].size < 2048 else _mask_union(chunks, len(self.event_ids))
        if sum(c.size for c in chunks) * 16 < len(self.event_ids):
            return np.unique(np.concatenate(chunks))
        return _mask_union(chunks, len(self.event_ids))

    def around(self, people: Sequence[int] | None, day: int, window: int) -> IntArray:
        """Events of ``people`` (of everyone when None) starting near a day.

        Args:
            people: Participants (entity positions); None means all events.
            day: A day ordinal (``date.toordinal()``).
            window: How many events to take on each side of ``day`` in each participant's
                chronological list (events starting on ``day`` are always included).

        Returns:
            Event positions (ascending), without order by distance.
        """
        if people is not None:
            lists = [(self._by_entity[p], self._starts_by_entity[p]) for p in people if p in self._by_entity]
        else:
            lists = [(self._chrono, self._chrono_starts)]
        chunks = []
        for positions, starts in lists:
            lo = int(np.searchsorted(starts, day, side="left"))
            hi = int(np.searchsorted(starts, day, side="right"))
            chunks.append(positions[max(0, lo - window) : hi + window])
        if not chunks:
            return np.empty(0, dtype=np.intp)
        return np.unique(np.concatenate(chunks))


def _mask_union(chunks: Sequence[IntArray], n: int) -> IntArray:
    """Distinct positions through a boolean mask: linear in ``n``, no sort."""
    mask = np.zeros(n, dtype=np.bool_)
    for chunk in chunks:
        mask[chunk] = True
    return np.flatnonzero(mask)
