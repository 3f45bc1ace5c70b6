"""Apply one extractor update to the KB: entities, then topics, then events and their trails.

A builder passes its :class:`~gravity_core.build.merge_index.MergeIndex` (so a batch costs what it
adds, not what the KB holds) and a :class:`~gravity_core.schema.changes.KBChanges` (what a checkpoint
must write); without an index one is made from the KB, and every event's trails are relinked.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from gravity_core.build.merge_entities import merge_entities
from gravity_core.build.merge_events import merge_events
from gravity_core.build.merge_index import MergeIndex
from gravity_core.build.merge_summaries import merge_summaries
from gravity_core.build.merge_topics import assign_event_topics, merge_topics
from gravity_core.build.trails import link_trails
from gravity_core.schema import AnchorUpdate, KnowledgeBase, Utterance
from gravity_core.schema.changes import KBChanges

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


def apply_update(
    kb: KnowledgeBase,
    update: AnchorUpdate,
    batch: Sequence[Utterance],
    *,
    index: MergeIndex | None = None,
    changes: KBChanges | None = None,
) -> MergeResult:
    """Merge ``update`` (extracted from ``batch``) into ``kb`` and record the batch's utterances.

    Args:
        kb: the KB to merge into (changed in place).
        update: the observations an extractor returned for ``batch``.
        batch: the utterances ``update`` was extracted from; each is recorded in ``kb``.
        index: the builder's lookups, made from ``kb`` and given to every merge since (kept up to
            date here); ``None``: made now from ``kb``.
        changes: where to note every utterance, entity, event, topic and summary added or changed.
    """
    fresh_index = index is None
    index = index if index is not None else MergeIndex(kb)
    for utterance in batch:
        kb.utterances[utterance.id] = utterance
    said: Mapping[str, Utterance] = kb.utterances
    update, dropped = _keep_known_sources(update, said)
    if dropped:
        logger.warning("dropped %d observation(s) citing no known utterance", dropped)
    entities = merge_entities(kb, update.entities, said, index, changes)
    topics = merge_topics(kb, update.topics, said, index.topics)
    events = merge_events(kb, update.events, said, index, changes)
    summaries = merge_summaries(kb, update.summaries, said)
    assign_event_topics(kb, events, index.topics)
    relinked = index.trails.add(kb, events)
    if fresh_index:
        link_trails(kb)  # a KB changed by other means than merges keeps consistent trails
    if changes is not None:
        changes.note("utterances", (u.id for u in batch))
        changes.note("topics", topics)
        changes.note("events", relinked)
        changes.note("summaries", summaries)
    return MergeResult(entities=entities, events=events, topics=set(topics), dropped=dropped)
