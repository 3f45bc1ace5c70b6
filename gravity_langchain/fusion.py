"""Reciprocal-rank fusion of LangChain documents (the rule itself: :mod:`gravity_core.context.fusion`)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

from langchain_core.documents import Document

from gravity_core.context.fusion import DEFAULT_RRF_C
from gravity_core.context.fusion import reciprocal_rank_fusion as core_rrf
from gravity_core.context.policy import MergedHit

__all__ = ["document_key", "merged_documents", "reciprocal_rank_fusion"]


def document_key(document: Document) -> Hashable:
    """What makes two results the same document: its id, else its text."""
    if document.id:
        return ("id", document.id)
    return ("text", document.page_content)


def reciprocal_rank_fusion(
    ranked_lists: Iterable[Sequence[Document]], *, c: int = DEFAULT_RRF_C, top_n: int | None = None
) -> list[Document]:
    """Fuse ranked document lists into one, best first, without duplicates (by :func:`document_key`).

    Args:
        ranked_lists: one list per query, each best first; the first list (the original
            question's) wins ties, then earlier positions.
        c: the RRF constant; larger values flatten the difference between ranks.
        top_n: how many documents to return (all when ``None``).

    Raises:
        ConfigurationError: ``c`` below 0 or ``top_n`` below 1.
    """
    fused = core_rrf(ranked_lists, document_key, c=c, top_n=top_n)
    return [document for document, _ in fused]


def merged_documents(merged: Sequence[MergedHit[Document]]) -> list[Document]:
    """The documents of a context policy's merge as new documents, each saying why it is there.

    Why (``gravity_slot``, ``gravity_score``, ``gravity_found_by``) is added to each one's metadata.
    """
    return [
        hit.item.model_copy(update={"metadata": {**hit.item.metadata, **hit.metadata()}}) for hit in merged
    ]
