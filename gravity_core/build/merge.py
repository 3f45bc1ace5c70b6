"""Apply one extractor update to the KB: entities, then topics, then events and their trails."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from gravity_core.build.merge_entities import merge_entities
from gravity_core.build.merge_events import link_trails, merge_events
from gravity_core.build.merge_summaries import merge_summaries
from gravity_core.build.merge_topics import assign_event_topics, merge_topics
from gravity_core.schema import AnchorUpdate, KnowledgeBase, Utterance

__all__ = ["MergeResult", "apply_update"]

logger = logging.getLogger(__name__)


class MergeResult:
    """What one merge changed."""

    def __init__(self, entities: set[str], events: list[str], topics: set[str], dropped: int) -> None:
        self.entities = entities
        self.events = events
        self.topics = topics
        self.dropped = dropped


def _keep_known_sources(update: AnchorUpdate, said: Mapping[str, Utterance]) -> tuple[AnchorUpdate, int]:
    """Drop source ids that name no utterance, and observations left with none."""
    dropped = 0
    kept = AnchorUpdate()
    for name in ("entities", "events", "topics", "summaries"):
        for obs in getattr(update, name):
            sources = [s for s in obs.sources if s in said]
            if not sources:
                dropped += 1
                continue
            getattr(kept, name).append(
                obs if sources == obs.sources else obs.model_copy(update={"sources": sources})
            )
    return kept, dropped


def apply_update(kb: KnowledgeBase, update: AnchorUpdate, batch: Sequence[Utterance]) -> MergeResult:
    """Merge ``update`` (extracted from ``batch``) into ``kb`` and record the batch's utterances."""
    for utterance in batch:
        kb.utterances[utterance.id] = utterance
    said: Mapping[str, Utterance] = kb.utterances
    update, dropped = _keep_known_sources(update, said)
    if dropped:
        logger.warning("dropped %d observation(s) citing no known utterance", dropped)
    entities = merge_entities(kb, update.entities, said)
    topics = merge_topics(kb, update.topics, said)
    events = merge_events(kb, update.events, said)
    merge_summaries(kb, update.summaries, said)
    assign_event_topics(kb, events)
    link_trails(kb)
    return MergeResult(entities=entities, events=events, topics=topics, dropped=dropped)
