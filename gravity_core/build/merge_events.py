"""Merge rules for event observations and the chronological trails that link events."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from gravity_core.build.names import NameIndex
from gravity_core.schema import (
    EventAnchor,
    EventObservation,
    Granularity,
    KnowledgeBase,
    TimeRef,
    TrailLink,
    Utterance,
)

__all__ = ["link_trails", "merge_events"]

_WORDS = re.compile(r"\w+")


def _what_key(what: str) -> str:
    return " ".join(_WORDS.findall(what.casefold()))


def merge_events(
    kb: KnowledgeBase, observations: Iterable[EventObservation], said: Mapping[str, Utterance]
) -> list[str]:
    """Add event observations to ``kb``; returns the ids of new events.

    An observation that repeats a known event (same action reported by the same first utterance)
    only adds its sources. An event whose text gave no time phrase (or one that could not be
    resolved) is dated by the day it was mentioned, marked ``basis='mention'``.
    """
    index = NameIndex(kb)
    known = {(e.sources[0], _what_key(e.what)): e for e in kb.events.values()}
    next_number = len(kb.events) + 1
    added: list[str] = []
    for obs in observations:
        first = min(obs.sources, key=lambda s: said[s].timestamp)
        key = (first, _what_key(obs.what))
        if key in known:
            event = known[key]
            event.sources = list(dict.fromkeys([*event.sources, *obs.sources]))
            continue
        event_id = f"ev-{next_number:06d}"
        while event_id in kb.events:
            next_number += 1
            event_id = f"ev-{next_number:06d}"
        next_number += 1
        who_ids = [i for i in (index.find(name) for name in obs.who) if i is not None]
        event = EventAnchor(
            id=event_id,
            who=list(obs.who),
            who_ids=list(dict.fromkeys(who_ids)),
            what=obs.what.strip(),
            when=obs.when if obs.when is not None and obs.when.resolved else _mentioned(obs, said[first]),
            where=obs.where,
            outcome=obs.outcome,
            quote=obs.quote,
            said_at=said[first].timestamp,
            session=said[first].session,
            sources=[first, *(s for s in obs.sources if s != first)],
        )
        kb.events[event_id] = event
        known[key] = event
        added.append(event_id)
    return added


def _mentioned(obs: EventObservation, utterance: Utterance) -> TimeRef:
    if obs.when is not None:
        return obs.when.model_copy(
            update={
                "start": utterance.day,
                "end": utterance.day,
                "granularity": Granularity.DAY,
                "reference": utterance.day,
                "basis": "mention",
            }
        )
    return TimeRef.mentioned_on(utterance.day)


def link_trails(kb: KnowledgeBase) -> None:
    """Recompute every event's previous/next links, per participant and per topic, in time order."""
    trails: dict[str, list[EventAnchor]] = {}
    for event in kb.events.values():
        keys = [f"who:{i}" for i in event.who_ids]
        if event.topic_id:
            keys.append(f"topic:{event.topic_id}")
        for key in keys:
            trails.setdefault(key, []).append(event)
        event.trails = []
    for key, events in trails.items():
        events.sort(key=lambda e: (e.occurred(), e.said_at, e.id))
        for i, event in enumerate(events):
            event.trails.append(
                TrailLink(
                    trail=key,
                    prev=events[i - 1].id if i > 0 else None,
                    next=events[i + 1].id if i + 1 < len(events) else None,
                )
            )
