"""One store round trip for all of a question's searches, where the host says its store can take it.

LangChain's ``VectorStore`` searches one vector per call, so by default :class:`GravityRetriever
<gravity_langchain.retriever.GravityRetriever>` calls the store's own ``similarity_search_by_vector``
once per query: a subclass or wrapper of the store (logging, a tenant filter) sees every search.

Some stores answer several vectors in one request, which is much faster (Chroma: one ``query``
of ten vectors costs about a quarter of ten single queries). The store classes do not expose that
publicly (``langchain_chroma.Chroma`` keeps its collection private), so GRAVITY never reaches into
them: the host hands the retriever a :class:`BatchedSearch` built on a public API, such as
:class:`ChromaBatchedSearch` over the ``chromadb`` collection the store was opened on. That search
then replaces the store's search methods for GRAVITY's queries, so it must apply whatever the
host's store adds to a search (a filter, say) itself.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document

from gravity_core.errors import ConfigurationError

__all__ = ["BatchedSearch", "ChromaBatchedSearch"]

logger = logging.getLogger(__name__)


class BatchedSearch(ABC):
    """Searches several query vectors in one request to the host's store.

    Subclass it for a store with a multi-vector search API, and give it to
    ``GravityRetriever(batched_search=...)``.
    """

    @abstractmethod
    def accepts(self, search: Mapping[str, Any]) -> bool:
        """Whether :meth:`search` can honour these search arguments.

        Else the retriever searches one vector at a time through the store.
        """

    @abstractmethod
    def search(
        self, vectors: Sequence[Sequence[float]], k: int, search: Mapping[str, Any]
    ) -> list[list[Document]]:
        """The ``k`` nearest documents of each vector, best first, in the order of ``vectors``.

        Args:
            vectors: the query vectors.
            k: documents per vector.
            search: the retriever's extra search arguments (already checked by :meth:`accepts`).
        """


# Search arguments of Chroma.similarity_search_by_vector and the collection.query argument each is.
_CHROMA_ARGUMENTS = {"filter": "where", "where_document": "where_document"}


class ChromaBatchedSearch(BatchedSearch):
    """All of a question's vectors in one ``Collection.query`` of ``chromadb``'s public API.

    Give it the collection a ``langchain_chroma.Chroma`` store was opened on; it returns the same
    documents ``Chroma.similarity_search_by_vector`` returns (``filter`` becomes Chroma's ``where``,
    ``where_document`` stays). It bypasses the store object, so a ``Chroma`` subclass or wrapper
    that changes its searches is not consulted: leave ``batched_search`` unset for such a store.

    Args:
        collection: a ``chromadb`` collection, e.g. ``client.get_collection("conversation")`` of the
            client the store was built with.

    Example:
        ```python
        client = chromadb.PersistentClient("chroma-db")
        store = Chroma(collection_name="conversation", client=client, embedding_function=embeddings)
        retriever = GravityRetriever(
            engine=engine,
            vector_store=store,
            batched_search=ChromaBatchedSearch(client.get_collection("conversation")),
        )
        ```
    """

    def __init__(self, collection: Any) -> None:
        if not callable(getattr(collection, "query", None)):
            raise ConfigurationError(
                "ChromaBatchedSearch needs a chromadb Collection (with .query), "
                f"got {type(collection).__name__}"
            )
        self.collection = collection

    def __repr__(self) -> str:
        return f"ChromaBatchedSearch(collection={getattr(self.collection, 'name', '?')!r})"

    def accepts(self, search: Mapping[str, Any]) -> bool:
        """Only ``filter`` and ``where_document`` map onto ``Collection.query``."""
        return not set(search) - _CHROMA_ARGUMENTS.keys()

    def search(
        self, vectors: Sequence[Sequence[float]], k: int, search: Mapping[str, Any]
    ) -> list[list[Document]]:
        """The ``k`` nearest documents of each vector, in one request."""
        if not vectors:
            return []
        unknown = sorted(set(search) - _CHROMA_ARGUMENTS.keys())
        if unknown:
            raise ConfigurationError(
                f"ChromaBatchedSearch maps only filter and where_document; got {', '.join(unknown)}"
            )
        arguments = {_CHROMA_ARGUMENTS[name]: value for name, value in search.items() if value is not None}
        result = self.collection.query(
            query_embeddings=[[float(x) for x in v] for v in vectors],
            n_results=k,
            include=["documents", "metadatas"],
            **arguments,
        )
        logger.debug("one Chroma query for %d vectors", len(vectors))
        return [_documents(result, row) for row in range(len(vectors))]


def _documents(result: Mapping[str, Any], row: int) -> list[Document]:
    metadatas = result.get("metadatas") or [[]]
    ids = result["ids"][row]
    return [
        Document(page_content=text, metadata=metadata or {}, id=doc_id)
        for text, metadata, doc_id in zip(
            result["documents"][row],
            metadatas[row] or [None] * len(ids),
            ids,
            strict=False,
        )
        if text is not None
    ]
