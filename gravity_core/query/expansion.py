"""Query expansion without a model: short search queries made from the selected anchors.

Each anchor yields a few plain-text queries (an entity's name with its attributes and
relations, an event's participants, action and date, a topic's key facts and
participant-keyword pairs). The host's store is then searched with them, in a round robin over
the modules so that no module takes the whole budget. An anchor's texts are made once per KB
(:class:`ExpansionTexts`, a bounded memo): anchors that recur across questions are not read again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from gravity_core.anchors.expansions import distinct_queries, expansion_key, expansion_texts
from gravity_core.query.memo import remember
from gravity_core.query.types import ScoredAnchor
from gravity_core.schema import AnchorKind, EntityAnchor, EventAnchor, TopicAnchor
from gravity_core.storage.packed_kb import KBReader

__all__ = ["ROUND_ROBIN_ORDER", "ExpansionTexts", "expand", "round_robin"]

ROUND_ROBIN_ORDER: tuple[AnchorKind, ...] = (AnchorKind.TOPIC, AnchorKind.ENTITY, AnchorKind.EVENT)
"""The order modules take their turns in."""

#: Anchors whose texts an :class:`ExpansionTexts` keeps at most (it starts again when full).
_TEXTS_MEMO = 4096


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
            taken = next(distinct_queries(queue, seen), None)
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
                self._memo, key, tuple(distinct_queries(_texts_of(self.kb, kind, anchor_id))), _TEXTS_MEMO
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
    anchor: EntityAnchor | EventAnchor | TopicAnchor | None
    if kind is AnchorKind.ENTITY:
        anchor = kb.entities.get(anchor_id)
    elif kind is AnchorKind.EVENT:
        anchor = kb.events.get(anchor_id)
    else:
        anchor = kb.topics.get(anchor_id)
    return iter(()) if anchor is None else expansion_texts(anchor)
