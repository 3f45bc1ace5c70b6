"""Reciprocal-rank fusion: merge several ranked lists by rank alone.

Stores score in different directions and scales (Chroma returns a distance, LlamaIndex's Chroma
store ``exp(-distance)``, the in-memory stores a cosine), so results of the original question and
of each expanded query are fused by rank: an item scores ``sum(1 / (rank + c))`` over the lists it
appears in (rank starting at 1), as LangChain's ``EnsembleRetriever`` and LlamaIndex's
``QueryFusionRetriever`` do.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypeVar

from gravity_core.errors import ConfigurationError

__all__ = ["DEFAULT_RRF_C", "reciprocal_rank_fusion"]

T = TypeVar("T")

DEFAULT_RRF_C = 60


def reciprocal_rank_fusion(
    ranked_lists: Iterable[Sequence[T]],
    key: Callable[[T], Hashable],
    *,
    c: int = DEFAULT_RRF_C,
    top_n: int | None = None,
) -> list[tuple[T, float]]:
    """Fuse ranked lists into one, best first, without duplicates.

    Args:
        ranked_lists: one list per query, each best first. Ties go to the item met first, so the
            earlier lists (the original question's first) win them.
        key: what makes two items the same (a document id, a node id, a turn id).
        c: the rank constant; larger values flatten the difference between ranks.
        top_n: how many items to return (all when ``None``).

    Returns:
        ``(item, fused score)`` pairs by descending score; of duplicates the first one met is kept.
        A list that repeats an item counts it once, at its best rank.

    Raises:
        ConfigurationError: ``c`` below 0 or ``top_n`` below 1.
    """
    if c < 0:
        raise ConfigurationError(f"the RRF constant must be >= 0, got {c}")
    if top_n is not None and top_n < 1:
        raise ConfigurationError(f"top_n must be at least 1, got {top_n}")
    scores: dict[Hashable, float] = {}
    first: dict[Hashable, T] = {}
    for ranked in ranked_lists:
        seen_here: set[Hashable] = set()
        for rank, item in enumerate(ranked, start=1):
            item_key = key(item)
            if item_key in seen_here:
                continue
            seen_here.add(item_key)
            first.setdefault(item_key, item)
            scores[item_key] = scores.get(item_key, 0.0) + 1.0 / (rank + c)
    order = sorted(first, key=lambda k: -scores[k])  # stable: first met wins ties
    if top_n is not None:
        order = order[:top_n]
    return [(first[k], scores[k]) for k in order]
