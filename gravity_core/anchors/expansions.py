"""The expanded queries an anchor yields: short plain-text search queries made without a model.

An entity's name with its attributes and relations, an event's participants, action and date, a
topic's key facts and participant-keyword pairs. The build embeds each anchor's first ones
(:mod:`gravity_core.storage.anchor_vectors`); the query phase searches the host's store with them
(:mod:`gravity_core.query.expansion`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from operator import attrgetter

from gravity_core.schema import Attribute, EntityAnchor, EventAnchor, Relation, TopicAnchor

__all__ = [
    "MAX_WORDS",
    "distinct_queries",
    "entity_expansions",
    "event_expansions",
    "expansion_key",
    "expansion_texts",
    "topic_expansions",
]

MAX_WORDS = 16
"""Longest expansion, in words."""

_TOPIC_KEYWORDS_PER_PARTICIPANT = 2
_FACT_ORDER = attrgetter("confidence", "mentions", "last_seen")


def _words(identifier: str) -> str:
    """'relationship_status' -> 'relationship status'."""
    return identifier.replace("_", " ").strip()


def distinct_queries(texts: Iterable[str], seen: set[str] | None = None) -> Iterator[str]:
    """Texts clipped to :data:`MAX_WORDS` single-spaced words, each identity once (``seen`` is updated)."""
    seen = set() if seen is None else seen
    for text in texts:
        clipped = " ".join(text.split()[:MAX_WORDS])
        key = clipped.casefold()
        if key and key not in seen:
            seen.add(key)
            yield clipped


def _entity_texts(entity: EntityAnchor) -> Iterator[str]:
    facts: list[Attribute | Relation] = [*entity.current_attributes(), *entity.relations]
    facts.sort(key=_FACT_ORDER, reverse=True)  # stable: ties keep attributes first, in KB order
    for fact in facts:
        if isinstance(fact, Attribute):
            yield f"{entity.name} {_words(fact.name)} {fact.value}"
        else:
            yield f"{entity.name} {_words(fact.relation)} {fact.object}"
    if not facts:
        yield entity.name


def entity_expansions(entity: EntityAnchor, limit: int | None = None) -> list[str]:
    """The entity's name with each current attribute and each relation.

    E.g. ``"Caroline career counseling"``, ``"Caroline sister Lena"``; best first by
    (confidence, mentions, most recent).

    Args:
        entity: Any entity anchor.
        limit: At most this many (all when None).

    Returns:
        Short queries, without duplicates; just the name when the entity has neither.
    """
    return list(islice(distinct_queries(_entity_texts(entity)), limit))


def _time_label(event: EventAnchor) -> str:
    when = event.when
    if when is None or when.start is None:
        return ""
    if when.basis == "mention":  # the day it was told: it happened then or shortly before
        return f"{when.start.day} {when.start:%B %Y}"
    return when.label()


def _event_texts(event: EventAnchor) -> Iterator[str]:
    head = f"{' and '.join(event.who)} {event.what}"
    yield f"{head} {_time_label(event)}"
    if event.where:
        yield f"{head} at {event.where}"
    if event.outcome:
        yield f"{head} {event.outcome}"


def event_expansions(event: EventAnchor, limit: int | None = None) -> list[str]:
    """Participants, action and date, then the place and the outcome when known.

    E.g. ``"Caroline went to a LGBTQ support group 7 May 2023"``.

    Args:
        event: Any event anchor.
        limit: At most this many (all when None).

    Returns:
        One to three short queries, the dated one first.
    """
    return list(islice(distinct_queries(_event_texts(event)), limit))


def _topic_texts(topic: TopicAnchor) -> Iterator[str]:
    for fact in topic.key_facts:
        yield fact.text
    keywords = topic.keywords[:_TOPIC_KEYWORDS_PER_PARTICIPANT] or [topic.label]
    for keyword in keywords:
        for person in topic.participants:
            yield f"{person} {keyword}"
    if not topic.key_facts and not topic.participants:
        yield topic.label


def topic_expansions(topic: TopicAnchor, limit: int | None = None) -> list[str]:
    """The topic's key facts, then each participant with the topic's first keywords.

    E.g. ``"Melanie: I painted that lake sunrise last year!"``, ``"Melanie painting"``.

    Args:
        topic: Any topic anchor.
        limit: At most this many (all when None).

    Returns:
        Short queries; the label when the topic has neither facts nor participants.
    """
    return list(islice(distinct_queries(_topic_texts(topic)), limit))


def expansion_key(text: str) -> str:
    """Identity of an expanded query (case and spacing ignored), the row id of its vector."""
    return " ".join(text.casefold().split())


def expansion_texts(anchor: EntityAnchor | EventAnchor | TopicAnchor) -> Iterator[str]:
    """All of an anchor's expanded queries, best first.

    They come before clipping and de-duplication (:func:`distinct_queries`).
    """
    if isinstance(anchor, EntityAnchor):
        return _entity_texts(anchor)
    if isinstance(anchor, EventAnchor):
        return _event_texts(anchor)
    return _topic_texts(anchor)
