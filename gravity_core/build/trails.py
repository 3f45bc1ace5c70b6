"""The chronological trails that link events, per participant and per topic.

Each event's ``trails`` hold one link per trail it is on (``who:<entity id>`` for each of its
participants, ``topic:<topic id>`` for its topic), in the order the trails first appear in the KB,
each with the previous and next event of that trail in time order (day it occurred, when it was
said, id).

:func:`link_trails` recomputes every link of the KB. :class:`TrailIndex` keeps the trails sorted
across batches and links only the new events and their neighbours, with the same result: a
build's cost per batch then depends on the batch, not on how many events the KB already holds.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from datetime import date, datetime

from gravity_core.schema import EventAnchor, KnowledgeBase, TrailLink

__all__ = ["TrailIndex", "link_trails", "trail_keys"]

_SortKey = tuple[date, datetime, str]


def trail_keys(event: EventAnchor) -> list[str]:
    """The trails ``event`` is on, in the order the event names them."""
    keys = [f"who:{i}" for i in event.who_ids]
    if event.topic_id:
        keys.append(f"topic:{event.topic_id}")
    return keys


def _sort_key(event: EventAnchor) -> _SortKey:
    return (event.occurred(), event.said_at, event.id)


def link_trails(kb: KnowledgeBase) -> None:
    """Recompute every event's previous/next links, per participant and per topic, in time order."""
    trails: dict[str, list[EventAnchor]] = {}
    for event in kb.events.values():
        for key in trail_keys(event):
            trails.setdefault(key, []).append(event)
        event.trails = []
    for key, events in trails.items():
        events.sort(key=_sort_key)
        for i, event in enumerate(events):
            event.trails.append(
                TrailLink(
                    trail=key,
                    prev=events[i - 1].id if i > 0 else None,
                    next=events[i + 1].id if i + 1 < len(events) else None,
                )
            )


class TrailIndex:
    """Every trail of a KB in time order, kept up to date as events are added.

    Built from a KB whose links are those :func:`link_trails` gives (as every saved KB's are).
    Existing events must not change their participants, topic or dates afterwards (merging never
    does); new events are handed to :meth:`add`.
    """

    def __init__(self, kb: KnowledgeBase) -> None:
        self._rank: dict[str, int] = {}
        self._trails: dict[str, list[_SortKey]] = {}
        for event in kb.events.values():
            for key in trail_keys(event):
                self._rank.setdefault(key, len(self._rank))
                self._trails.setdefault(key, []).append(_sort_key(event))
        for trail in self._trails.values():
            trail.sort()

    def add(self, kb: KnowledgeBase, event_ids: Iterable[str]) -> set[str]:
        """Put new events (in KB order) on their trails; returns the ids of events whose links changed."""
        placed: dict[str, list[_SortKey]] = {}
        for event_id in event_ids:
            event = kb.events[event_id]
            event.trails = []
            for key in trail_keys(event):
                self._rank.setdefault(key, len(self._rank))
                position = _sort_key(event)
                insort(self._trails.setdefault(key, []), position)
                placed.setdefault(key, []).append(position)
        changed: set[str] = set()
        for key, positions in placed.items():
            trail = self._trails[key]
            around: set[int] = set()
            for position in positions:
                i = bisect_left(trail, position)
                around.update(n for n in (i - 1, i, i + 1) if 0 <= n < len(trail))
            for n in sorted(around):
                event_id = trail[n][2]
                self._link(
                    kb.events[event_id],
                    TrailLink(
                        trail=key,
                        prev=trail[n - 1][2] if n > 0 else None,
                        next=trail[n + 1][2] if n + 1 < len(trail) else None,
                    ),
                )
                changed.add(event_id)
        return changed

    def _link(self, event: EventAnchor, link: TrailLink) -> None:
        """Set ``event``'s link on ``link.trail``, its links kept in the order trails first appeared."""
        for n, old in enumerate(event.trails):
            if old.trail == link.trail:
                event.trails[n] = link
                return
        rank = self._rank[link.trail]
        at = next(
            (n for n, old in enumerate(event.trails) if self._rank[old.trail] > rank), len(event.trails)
        )
        event.trails.insert(at, link)
