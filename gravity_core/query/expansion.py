"""Query expansion without a model: short search queries made from the selected anchors.

Each anchor yields a few plain-text queries (an entity's name with its attributes and
relations, an event's participants, action and date, a topic's key facts and
participant-keyword pairs). The host's store is then searched with them, in a round robin over
the modules so that no module takes the whole budget. An anchor's texts are made once per KB
(:class:`ExpansionTexts`, a bounded memo): anchors that recur across questions are not read again.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from operator import attrgetter

from gravity_core.anchor_vectors import expansion_key
from gravity_core.packed_kb import KBReader
from gravity_core.query.memo import remember
from gravity_core.query.types import ScoredAnchor
from gravity_core.schema import (
    AnchorKind,
    Attribute,
    EntityAnchor,
    EventAnchor,
    Relation,
    TopicAnchor,
)

__all__ = [
    "MAX_WORDS",
    "ExpansionTexts",
    "ROUND_ROBIN_ORDER",
    "entity_expansions",
    "event_expansions",
    "expand",
    "round_robin",
    "topic_expansions",
]

MAX_WORDS = 16
"""Longest expansion, in words."""

ROUND_ROBIN_ORDER: tuple[AnchorKind, ...] = (AnchorKind.TOPIC, AnchorKind.ENTITY, AnchorKind.EVENT)
"""The order modules take their turns in."""

_TOPIC_KEYWORDS_PER_PARTICIPANT = 2
#: Anchors whose texts an :class:`ExpansionTexts` keeps at most (it starts again when full).
_TEXTS_MEMO = 4096
_FACT_ORDER = attrgetter("confidence", "mentions", "last_seen")


def _words(identifier: str) -> str:
    """'relationship_status' -> 'relationship status'."""
    return identifier.replace("_", " ").strip()


def _distinct(texts: Iterable[str], seen: set[str] | None = None) -> Iterator[str]:
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
    return list(islice(_distinct(_entity_texts(entity)), limit))


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
    return list(islice(_distinct(_event_texts(event)), limit))


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
    return list(islice(_distinct(_topic_texts(topic)), limit))


def _take_turns(queues: Sequence[Iterator[str]], budget: int, exclude: str) -> list[str]:
    """Round robin over ``queues``: one new text each per round; an exhausted queue drops out."""
    seen = {expansion_key(exclude)}
    live = list(queues)
    out: list[str] = []
    while live and len(out) < budget:
        alive: list[Iterator[str]] = []
        for queue in live:
            if len(out) >= budget:
                break
            taken = next(_distinct(queue, seen), None)
            if taken is not None:
                out.append(taken)
                alive.append(queue)
        live = alive
    return out


def round_robin(per_module: Mapping[AnchorKind, Sequence[str]], budget: int, exclude: str) -> list[str]:
    """Interleave the modules' expansions: topic, entity, event, one each per round.

    "Until the budget is filled or a module is exhausted" is read as: a module that runs out
    drops out of the rotation and the others keep taking turns, until ``budget`` expansions are
    taken or every module is exhausted. Duplicates (ignoring case and spacing) and the question
    itself are skipped and do not count against the budget.

    Args:
        per_module: Each module's expansions, best first.
        budget: How many expansions at most.
        exclude: The question; never returned.

    Returns:
        At most ``budget`` expansions, single-spaced and clipped to :data:`MAX_WORDS` words.
    """
    if budget <= 0:
        return []
    return _take_turns([iter(per_module.get(kind, ())) for kind in ROUND_ROBIN_ORDER], budget, exclude)


def _interleave(iterators: list[Iterator[str]]) -> Iterator[str]:
    """First item of each iterator, then the second ones...; exhausted iterators drop out."""
    while iterators:
        alive = []
        for it in iterators:
            item = next(it, None)
            if item is not None:
                yield item
                alive.append(it)
        iterators = alive


class ExpansionTexts:
    """A memo of each anchor's expansion texts for one KB, filled lazily and bounded.

    Safe to share between threads: two threads may make the same texts, never different ones.

    Args:
        kb: The KB the anchors come from (not changed while the memo is used).
    """

    def __init__(self, kb: KBReader) -> None:
        self.kb = kb
        self._memo: dict[tuple[AnchorKind, str], tuple[str, ...]] = {}

    def of(self, kind: AnchorKind, anchor_id: str) -> tuple[str, ...]:
        """The anchor's distinct expansions, best first (none for an id the KB does not hold)."""
        key = (kind, anchor_id)
        found = self._memo.get(key)
        if found is None:
            found = remember(
                self._memo, key, tuple(_distinct(_texts_of(self.kb, kind, anchor_id))), _TEXTS_MEMO
            )
        return found


def expand(
    kb: KBReader,
    selected: Sequence[ScoredAnchor],
    budget: int,
    question: str,
    *,
    texts: ExpansionTexts | None = None,
) -> list[str]:
    """Expanded queries for the host's store, from the selected anchors.

    Per module, the anchors in score order each contribute their first expansion, then their
    second ones, and so on; the modules are then merged as by :func:`round_robin`.

    Args:
        kb: The KB the anchors come from (ids it does not hold are skipped).
        selected: The anchors the query kept.
        budget: How many expansions at most.
        question: The question; never returned as an expansion.
        texts: The memo of ``kb``'s expansion texts to read them from (default: made here).

    Returns:
        At most ``budget`` short plain-text queries.
    """
    if budget <= 0:
        return []
    memo = texts if texts is not None else ExpansionTexts(kb)
    queues = []
    for kind in ROUND_ROBIN_ORDER:
        anchors = sorted((a for a in selected if a.kind == kind), key=lambda a: -a.score)
        queues.append(_interleave([iter(memo.of(kind, a.id)) for a in anchors]))
    return _take_turns(queues, budget, question)


def _texts_of(kb: KBReader, kind: AnchorKind, anchor_id: str) -> Iterator[str]:
    if kind is AnchorKind.ENTITY:
        entity = kb.entities.get(anchor_id)
        return _entity_texts(entity) if entity is not None else iter(())
    if kind is AnchorKind.EVENT:
        event = kb.events.get(anchor_id)
        return _event_texts(event) if event is not None else iter(())
    topic = kb.topics.get(anchor_id)
    return _topic_texts(topic) if topic is not None else iter(())
