"""Reciprocal-rank fusion of LangChain documents (the rule itself: :mod:`gravity_core.context.fusion`)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

from langchain_core.documents import Document

from gravity_core.context.fusion import reciprocal_rank_fusion as core_rrf
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
    """Fuse ranked document lists into one, best first, without duplicates (by :func:`document_key`).

    Args:
        ranked_lists: one list per query, each best first; the first list (the original
            question's) wins ties, then earlier positions.
        k: how many documents to return (all when ``None``).
        c: the RRF constant; larger values flatten the difference between ranks.

    Raises:
        ConfigurationError: ``k`` below 1 or ``c`` below 0.
    """
    if k is not None and k < 1:
        raise ConfigurationError(f"k must be at least 1, got {k}")
    fused = core_rrf(ranked_lists, document_key, c=c, top_n=k)
    return [document for document, _ in fused]
