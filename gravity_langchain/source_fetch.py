"""Retrieval by provenance for GravityRetriever: fetching the selected anchors' source turns by id.

The host is the vector store (also a ``VectorStoreRetriever``'s), asked with ``get_by_ids``, or a
host retriever that fetches turns itself (:class:`TurnFetcher`). Over a store of chunks of several
turns (``documents_from_utterances(..., turns_per_document=n)``), the turns' ids are first turned
into the ids of the chunks holding them (:class:`~gravity_core.serving.turn_documents.ChunkIds`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from pydantic import ValidationError

from gravity_core.context.provenance import SourceTurn
from gravity_core.serving.provenance import ProvenanceNotices, afetch_sources, fetch_sources, held_utterances
from gravity_langchain.fusion import document_key

__all__ = ["DocumentIds", "TurnFetcher", "afetch_source_documents", "fetch_source_documents", "source_host"]

DocumentIds = Callable[[list[str]], list[str]]
"""The host's document ids of the utterance ids asked for (each once)."""


@runtime_checkable
class TurnFetcher(Protocol):
    """A host retriever that hands back the documents holding given turns (retrieval by provenance)."""

    def fetch_turns(self, utterance_ids: Sequence[str]) -> list[Document]:
        """The documents holding these utterance ids, each once; ids it does not hold are skipped."""
        ...

    async def afetch_turns(self, utterance_ids: Sequence[str]) -> list[Document]:
        """Async :meth:`fetch_turns`."""
        ...


_NO_METADATA = (
    "its get_by_ids fails on documents stored without metadata, as langchain-chroma's does; give "
    "each document some metadata, e.g. metadata={'session': turn.session}"
)


def _holds(document: Document) -> list[str]:
    return held_utterances(document.id, document.metadata)


def source_host(
    notices: ProvenanceNotices,
    *,
    vector_store: VectorStore | None,
    retriever: BaseRetriever | None,
    shared: bool,
    search: Mapping[str, Any],
) -> VectorStore | TurnFetcher | None:
    """What to fetch source turns from (``None``: nothing can be fetched, and the notice says why).

    Args:
        notices: the retriever's notices.
        vector_store: the retriever's vector store, if it has one.
        retriever: the retriever's host retriever, if it has one.
        shared: the store holds many users' documents (``users=``).
        search: the call's search arguments.
    """
    if shared:
        # One store holds every user's documents, and a fetch by id cannot apply user_filter.
        notices.cannot_fetch("a store shared by users", "a fetch by id cannot keep to one user")
        return None
    if search:
        # A filter (or other search argument) cannot be applied to a fetch by id.
        notices.cannot_fetch("a filtered search", "a fetch by id cannot apply search arguments")
        return None
    if isinstance(retriever, TurnFetcher):
        return retriever
    store = vector_store
    if store is None and isinstance(retriever, VectorStoreRetriever):
        store = retriever.vectorstore
    if store is None:
        notices.cannot_fetch(
            type(retriever).__name__, "it is not a vector store's retriever and has no fetch_turns"
        )
    return store


def fetch_source_documents(
    notices: ProvenanceNotices,
    host: VectorStore | TurnFetcher,
    turns: Sequence[SourceTurn],
    document_ids: DocumentIds,
) -> list[tuple[str, Document]]:
    """The host's documents holding ``turns``, each with the anchor that asked for it.

    Args:
        notices: the retriever's notices.
        host: :func:`source_host`'s answer.
        turns: the turns to fetch.
        document_ids: the store's document ids of the turns' utterance ids (not used for a
            :class:`TurnFetcher`, which is asked for the turns themselves).
    """
    if isinstance(host, TurnFetcher):
        return fetch_sources(notices, type(host).__name__, turns, host.fetch_turns, _holds, document_key)
    store = host

    def fetch(ids: list[str]) -> list[Document]:
        try:
            return store.get_by_ids(document_ids(ids))
        except ValidationError as error:
            raise NotImplementedError(_NO_METADATA) from error

    return fetch_sources(notices, type(store).__name__, turns, fetch, _holds, document_key)


async def afetch_source_documents(
    notices: ProvenanceNotices,
    host: VectorStore | TurnFetcher,
    turns: Sequence[SourceTurn],
    document_ids: DocumentIds,
) -> list[tuple[str, Document]]:
    """Async :func:`fetch_source_documents`."""
    if isinstance(host, TurnFetcher):
        return await afetch_sources(
            notices, type(host).__name__, turns, host.afetch_turns, _holds, document_key
        )
    store = host

    async def fetch(ids: list[str]) -> list[Document]:
        try:
            return await store.aget_by_ids(document_ids(ids))
        except ValidationError as error:
            raise NotImplementedError(_NO_METADATA) from error

    return await afetch_sources(notices, type(store).__name__, turns, fetch, _holds, document_key)
