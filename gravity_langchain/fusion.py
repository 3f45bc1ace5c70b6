"""Reciprocal-rank fusion of several ranked document lists.

Scores of different stores point in different directions (Chroma returns a distance, the
in-memory store a cosine), so the lists are fused by rank only, as LangChain's
``EnsembleRetriever`` does: a document scores ``sum(1 / (rank + c))`` over the lists it appears
in (rank starting at 1).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

from langchain_core.documents import Document

from gravity_core.errors import ConfigurationError

__all__ = ["document_key", "reciprocal_rank_fusion"]


def document_key(document: Document) -> Hashable:
    """What makes two results the same document: its id, else its text."""
    if document.id:
        return ("id", document.id)
    return ("text", document.page_content)


def reciprocal_rank_fusion(
    ranked_lists: Iterable[Sequence[Document]], *, k: int | None = None, c: int = 60
) -> list[Document]:
    """Fuse ranked lists into one, best first, without duplicates.

    Args:
        ranked_lists: one list per query, each best first; the first list (the original
            question's) wins ties, then earlier positions.
        k: how many documents to return (all when ``None``).
        c: the RRF constant; larger values flatten the difference between ranks.

    Returns:
        The documents by descending fused score; of duplicates the first one seen is kept.

    Raises:
        ConfigurationError: ``k`` below 1 or ``c`` below 0.
    """
    if k is not None and k < 1:
        raise ConfigurationError(f"k must be at least 1, got {k}")
    if c < 0:
        raise ConfigurationError(f"the RRF constant c must be >= 0, got {c}")
    scores: dict[Hashable, float] = {}
    first: dict[Hashable, Document] = {}
    for ranked in ranked_lists:
        seen_here: set[Hashable] = set()
        for rank, document in enumerate(ranked, start=1):
            key = document_key(document)
            if key in seen_here:  # a list that repeats a document counts it once, at its best rank
                continue
            seen_here.add(key)
            first.setdefault(key, document)
            scores[key] = scores.get(key, 0.0) + 1.0 / (rank + c)
    # sorted() is stable: equal scores keep first-seen order.
    order = sorted(first, key=lambda key: -scores[key])
    fused = [first[key] for key in order]
    return fused if k is None else fused[:k]
