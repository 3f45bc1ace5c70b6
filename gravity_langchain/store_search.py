"""One search of the host's LangChain vector store: by the query's vector, else by its text."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

__all__ = ["asearch_store", "search_store"]

logger = logging.getLogger(__name__)


def search_store(
    store: VectorStore, query: str, vector: Sequence[float] | None, k: int, search: Mapping[str, Any]
) -> list[Document]:
    """The store's ``k`` nearest documents of ``vector``, through the store's own search methods.

    Of ``query`` instead, for a store that cannot search by vector or when there is no vector.
    """
    if vector is not None:
        try:
            return store.similarity_search_by_vector(list(vector), k=k, **search)
        except NotImplementedError:
            logger.debug("%s cannot search by vector; searching by text", type(store).__name__)
    return store.similarity_search(query, k=k, **search)


async def asearch_store(
    store: VectorStore, query: str, vector: Sequence[float] | None, k: int, search: Mapping[str, Any]
) -> list[Document]:
    """Async :func:`search_store`."""
    if vector is not None:
        try:
            return await store.asimilarity_search_by_vector(list(vector), k=k, **search)
        except NotImplementedError:
            logger.debug("%s cannot search by vector; searching by text", type(store).__name__)
    return await store.asimilarity_search(query, k=k, **search)
