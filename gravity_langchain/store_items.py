"""What a GravityStore search returns: the store's items, each saying why it is there."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import Item, SearchItem

from gravity_core.context.policy import MergedHit

__all__ = ["GravitySearchItem", "item_key", "merged_items"]


class GravitySearchItem(SearchItem):
    """A :class:`~langgraph.store.base.SearchItem` with GRAVITY's reason for returning it.

    The item's namespace, key, value and timestamps are the wrapped store's, unchanged (it equals
    the store's own item); ``score`` is the wrapped store's score for its search hits and ``None``
    for a turn GRAVITY fetched by key.

    Attributes:
        gravity: why the item is there, as a retriever's document metadata says it:
            ``gravity_slot`` (``"question"``: a hit of the store's own search; ``"provenance"``:
            the source turn of a selected anchor), ``gravity_score`` (reciprocal-rank score over
            what found it) and ``gravity_found_by`` (each query or anchor that found it, e.g.
            ``{"query": "provenance", "text": "event:ev-000025", ...}``). ``dict()`` lists it
            under ``"gravity"``.
    """

    __slots__ = ("gravity",)

    def __init__(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        created_at: datetime,
        updated_at: datetime,
        score: float | None = None,
        *,
        gravity: Mapping[str, object],
    ) -> None:
        """Make the item.

        Args:
            namespace: the item's namespace.
            key: the item's key.
            value: the stored value (not copied, never changed).
            created_at: when the item was created.
            updated_at: when it was last updated.
            score: the wrapped store's score, when its search found the item.
            gravity: why GRAVITY returns it (see the class doc).
        """
        super().__init__(namespace, key, value, created_at, updated_at, score)
        self.gravity = dict(gravity)

    def dict(self) -> dict[str, Any]:
        """The item as a plain dict, with ``"gravity"``."""
        result = super().dict()
        result["gravity"] = self.gravity
        return result


def item_key(item: Item) -> Hashable:
    """What makes two store items the same: their namespace and key."""
    return (item.namespace, item.key)


def merged_items(merged: Sequence[MergedHit[Item]]) -> list[SearchItem]:
    """The merge's items as :class:`GravitySearchItem`, keeping the store's scores."""
    return [
        GravitySearchItem(
            hit.item.namespace,
            hit.item.key,
            hit.item.value,
            hit.item.created_at,
            hit.item.updated_at,
            hit.item.score if isinstance(hit.item, SearchItem) else None,
            gravity=hit.metadata(),
        )
        for hit in merged
    ]
