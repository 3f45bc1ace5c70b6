"""One store round trip for all of a question's searches, where the store can take several vectors.

LangChain's ``VectorStore`` searches one vector per call; Chroma's collection takes many in one
``query``. For ``langchain_chroma.Chroma`` the question and its expansions are therefore sent
together, and the result rows are turned into the same Documents ``similarity_search_by_vector``
would give. Other stores, and search arguments this path does not map, fall back to one call per
vector.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

__all__ = ["can_search_many", "search_many_by_vector"]

logger = logging.getLogger(__name__)

# Search arguments of Chroma.similarity_search_by_vector and the collection.query argument each is.
_CHROMA_ARGUMENTS = {"filter": "where", "where_document": "where_document"}


def _chroma_collection(store: VectorStore) -> Any | None:
    if type(store).__module__.split(".")[0] != "langchain_chroma":
        return None
    # langchain-chroma keeps its collection in `_collection` (a property since 0.1).
    return getattr(store, "_collection", None)


def _documents(result: dict[str, Any], row: int) -> list[Document]:
    metadatas = result.get("metadatas") or [[]]
    return [
        Document(page_content=text, metadata=metadata or {}, id=doc_id)
        for text, metadata, doc_id in zip(
            result["documents"][row],
            metadatas[row] or [None] * len(result["ids"][row]),
            result["ids"][row],
            strict=False,
        )
        if text is not None
    ]


def can_search_many(store: VectorStore, search: dict[str, Any]) -> bool:
    """Whether :func:`search_many_by_vector` can serve this store with these search arguments."""
    return _chroma_collection(store) is not None and not set(search) - _CHROMA_ARGUMENTS.keys()


def search_many_by_vector(
    store: VectorStore, vectors: Sequence[Sequence[float]], k: int, search: dict[str, Any]
) -> list[list[Document]]:
    """The ``k`` nearest documents of each vector, in one request (check :func:`can_search_many` first).

    Args:
        store: the host's vector store.
        vectors: the query vectors.
        k: documents per vector.
        search: the retriever's extra search arguments (``filter``, ``where_document``).
    """
    collection = _chroma_collection(store)
    if collection is None:
        raise TypeError(f"{type(store).__name__} is no langchain-chroma store; check can_search_many first")
    if not vectors:
        return []
    arguments = {_CHROMA_ARGUMENTS[name]: value for name, value in search.items() if value is not None}
    result = collection.query(
        query_embeddings=[list(map(float, v)) for v in vectors],
        n_results=k,
        include=["documents", "metadatas"],
        **arguments,
    )
    return [_documents(result, row) for row in range(len(vectors))]
