"""Where the selected anchors came from: their source utterance ids, for retrieval by provenance.

Every fact an anchor states carries the ids of the utterances it was read from. A host that stores
one document per turn under the utterance id (or lists the ids a document holds) can hand those
turns back by id, so the evidence itself reaches the context, not only GRAVITY's summary of it.
The context policy (:meth:`~gravity_core.context.policy.ContextPolicy.source_turns`) decides how
many of each anchor's sources are fetched and where the fetched turns are placed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gravity_core.query.types import AnchorSources, ScoredAnchor
from gravity_core.schema import AnchorKind, EntityAnchor, TopicAnchor
from gravity_core.storage.packed_kb import KBReader

__all__ = ["anchor_sources"]


def anchor_sources(kb: KBReader, anchors: Sequence[ScoredAnchor]) -> list[AnchorSources]:
    """The source utterance ids of ``anchors``, in their order; anchors no longer in the KB are skipped."""
    found: list[AnchorSources] = []
    for anchor in anchors:
        ids: Iterable[str] | None = None
        if anchor.kind is AnchorKind.EVENT:
            event = kb.events.get(anchor.id)
            ids = event.sources if event is not None else None
        elif anchor.kind is AnchorKind.ENTITY:
            entity = kb.entities.get(anchor.id)
            ids = _entity_sources(entity) if entity is not None else None
        else:
            topic = kb.topics.get(anchor.id)
            ids = _topic_sources(topic) if topic is not None else None
        if ids is not None:
            found.append(AnchorSources(anchor.kind, anchor.id, tuple(dict.fromkeys(ids))))
    return found


def _entity_sources(entity: EntityAnchor) -> Iterable[str]:
    # The values a profile shows first are its strongest current attributes.
    current = sorted((a for a in entity.attributes if a.current), key=lambda a: (-a.confidence, -a.mentions))
    for attribute in current:
        yield from attribute.sources
    for relation in sorted(entity.relations, key=lambda r: (-r.confidence, -r.mentions)):
        yield from relation.sources
    for attribute in entity.attributes:
        if not attribute.current:
            yield from attribute.sources


def _topic_sources(topic: TopicAnchor) -> Iterable[str]:
    for fact in topic.key_facts:
        yield from fact.sources
    for snapshot in topic.arc:
        yield from snapshot.sources
