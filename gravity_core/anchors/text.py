"""Compact one-paragraph renderings of anchors: what gets embedded for reranking.

Kept short and factual so the embedding reflects what the anchor is about; the prompt blocks the
query phase injects are formatted elsewhere.
"""

from __future__ import annotations

from gravity_core.schema import EntityAnchor, EventAnchor, TopicAnchor

__all__ = ["entity_text", "event_text", "topic_text"]

_MAX_ITEMS = 12


def entity_text(entity: EntityAnchor) -> str:
    """The entity's rendering: name and type, a few aliases, then its best attributes and relations.

    E.g. ``Caroline (person). occupation: counselor; likes: painting. sister: Lena.``
    """
    parts = [f"{entity.name} ({entity.type.value})"]
    if entity.aliases:
        parts.append("also " + ", ".join(entity.aliases[:3]))
    attrs = sorted(entity.current_attributes(), key=lambda a: (-a.confidence, -a.mentions, a.name))
    if attrs:
        parts.append("; ".join(f"{a.name}: {a.value}" for a in attrs[:_MAX_ITEMS]))
    rels = sorted(entity.relations, key=lambda r: (-r.mentions, r.relation))
    if rels:
        parts.append("; ".join(f"{r.relation}: {r.object}" for r in rels[:_MAX_ITEMS]))
    return ". ".join(parts) + "."


def event_text(event: EventAnchor) -> str:
    """The event's rendering: who and what, then when, where and the outcome when known.

    E.g. ``Caroline: went to a support group (7 May 2023) at Denver; outcome: felt accepted.``
    """
    text = f"{', '.join(event.who)}: {event.what}"
    if event.when is not None:
        text += f" ({event.when.label()})"
    if event.where:
        text += f" at {event.where}"
    if event.outcome:
        text += f"; outcome: {event.outcome}"
    return text + "."


def topic_text(topic: TopicAnchor) -> str:
    """Label, keywords and the first key facts of a topic."""
    parts = [topic.label]
    if topic.keywords:
        parts.append(", ".join(topic.keywords))
    facts = [f.text for f in topic.key_facts[:3]] or [s.summary for s in topic.arc[-2:]]
    parts.extend(facts)
    return ". ".join(parts)
