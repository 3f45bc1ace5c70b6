"""Merge rules for event observations (the trails that link events: :mod:`gravity_core.build.trails`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gravity_core.build.merge_index import MergeIndex, what_key
from gravity_core.build.trails import link_trails
from gravity_core.schema import (
    EventAnchor,
    EventObservation,
    Granularity,
    KnowledgeBase,
    TimeRef,
    Utterance,
)
from gravity_core.schema.changes import KBChanges

__all__ = ["link_trails", "merge_events"]


def merge_events(
    kb: KnowledgeBase,
    observations: Iterable[EventObservation],
    said: Mapping[str, Utterance],
    index: MergeIndex | None = None,
    changes: KBChanges | None = None,
) -> list[str]:
    """Add event observations to ``kb``; returns the ids of new events.

    An observation that repeats a known event (same action reported by the same first utterance)
    only adds its sources. An event whose text gave no time phrase (or one that could not be
    resolved) is dated by the day it was mentioned, marked ``basis='mention'``. ``index``: the
    builder's lookups (made from ``kb`` if not given); events extended are noted in ``changes``.
    """
    index = index if index is not None else MergeIndex(kb)
    known = index.events
    next_number = len(kb.events) + 1
    added: list[str] = []
    for obs in observations:
        first = min(obs.sources, key=lambda s: said[s].timestamp)
        key = (first, what_key(obs.what))
        if key in known:
            event = known[key]
            event.sources = list(dict.fromkeys([*event.sources, *obs.sources]))
            if changes is not None:
                changes.note("events", [event.id])
            continue
        event_id = f"ev-{next_number:06d}"
        while event_id in kb.events:
            next_number += 1
            event_id = f"ev-{next_number:06d}"
        next_number += 1
        who_ids = [i for i in (index.names.find(name) for name in obs.who) if i is not None]
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
        if changes is not None:
            changes.note("events", [event_id])
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
