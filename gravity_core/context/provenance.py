"""Retrieval by provenance: the selected anchors' source turns, fetched from the host by id.

The policy (:meth:`ContextPolicy.source_turns <gravity_core.context.policy.ContextPolicy.source_turns>`)
says which turns to fetch; the host hands back what holds them (a turn, or a chunk of several);
:func:`pair_sources` names, for each fetched document, the anchor that asked for it, in the
policy's order, so the merge places them and every document says where it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from gravity_core.schema import AnchorKind

__all__ = ["UTTERANCE_IDS_KEY", "SourceTurn", "SourcedAnchor", "pair_sources"]

T = TypeVar("T")

UTTERANCE_IDS_KEY = "gravity_utterance_ids"
"""Metadata key of a host document that holds several turns: the utterance ids it holds.

A list of strings, or one string of ids separated by commas (for stores whose metadata holds
only scalars, such as Chroma).
"""


class SourcedAnchor(Protocol):
    """A selected anchor's source utterance ids (:class:`gravity_core.query.types.AnchorSources`)."""

    @property
    def kind(self) -> AnchorKind:
        """Entity, event or topic."""
        ...

    @property
    def label(self) -> str:
        """``"<kind>:<id>"``."""
        ...

    @property
    def utterance_ids(self) -> Sequence[str]:
        """The anchor's sources, the most telling first."""
        ...

    @property
    def score(self) -> float:
        """The anchor's score for the question."""
        ...

    def fit(self, position: int) -> float:
        """How surely the source at ``position`` is about the question, in ``[0, 1]``."""
        ...


@dataclass(frozen=True)
class SourceTurn:
    """A turn to fetch from the host by id, and the anchor whose source it is."""

    utterance_id: str
    anchor: str


def pair_sources(
    turns: Sequence[SourceTurn],
    fetched: Sequence[T],
    holds: Callable[[T], Iterable[str]],
    key: Callable[[T], Hashable],
) -> list[tuple[str, T]]:
    """Each fetched document with the anchor that named it, in the order of ``turns``.

    Args:
        turns: the turns asked for, in the policy's order.
        fetched: what the host returned for them, in any order; documents holding none of the
            turns are ignored.
        holds: the utterance ids a document holds.
        key: what makes two documents the same.

    Returns:
        ``(anchor label, document)`` per turn found, in ``turns`` order; a document holding
        several of the turns comes once, at its first.
    """
    holder: dict[str, T] = {}
    for document in fetched:
        for utterance_id in holds(document):
            holder.setdefault(utterance_id, document)
    paired: list[tuple[str, T]] = []
    taken: set[Hashable] = set()
    for turn in turns:
        found = holder.get(turn.utterance_id)
        if found is not None and key(found) not in taken:
            taken.add(key(found))
            paired.append((turn.anchor, found))
    return paired
