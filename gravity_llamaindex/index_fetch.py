"""Fetching a LlamaIndex index's nodes by id, for retrieval by provenance.

A ``VectorStoreIndex`` whose vector store keeps the nodes' text (Chroma...) hands them back through
the store's ``get_nodes``; over the default ``SimpleVectorStore`` the index's docstore holds them.
Over an index of chunks of several turns (``nodes_from_utterances(..., turns_per_node=n)``), the
turns' ids are first turned into the ids of the chunks holding them
(:class:`~gravity_core.serving.turn_documents.ChunkIds`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.indices.base import BaseIndex
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.schema import BaseNode, NodeWithScore
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from gravity_core.context.provenance import SourceTurn
from gravity_core.serving.provenance import ProvenanceNotices, afetch_sources, fetch_sources, held_utterances
from gravity_llamaindex.fusion import node_id

__all__ = [
    "NodeIds",
    "aget_index_nodes",
    "aindex_sources",
    "as_results",
    "get_index_nodes",
    "index_host_name",
    "index_sources",
    "node_turns",
]

NodeIds = Callable[[list[str]], list[str]]
"""The index's node ids of the utterance ids asked for (each once)."""


def index_host_name(index: BaseIndex[Any]) -> str:
    """How a notice names the index: its class, and its vector store's."""
    store = index.vector_store if isinstance(index, VectorStoreIndex) else None
    return type(index).__name__ if store is None else f"{type(index).__name__} over {type(store).__name__}"


def _text_store(index: BaseIndex[Any]) -> BasePydanticVectorStore | None:
    """The index's vector store when it keeps the nodes' text (Chroma...); else the docstore does."""
    store = index.vector_store if isinstance(index, VectorStoreIndex) else None
    return store if store is not None and store.stores_text else None


def get_index_nodes(index: BaseIndex[Any], ids: list[str]) -> list[BaseNode]:
    """The index's nodes of ``ids`` (those it holds): from a vector store keeping the text, else the docstore.

    Raises:
        NotImplementedError: the vector store keeps the text but has no ``get_nodes``, and the
            docstore holds none of the nodes.
    """
    store = _text_store(index)
    if store is not None:
        try:
            return list(store.get_nodes(node_ids=ids))
        except NotImplementedError:
            pass
    found = index.docstore.get_nodes(ids, raise_error=False)
    if not found and store is not None:
        raise NotImplementedError(_NO_GET_NODES.format(store=type(store).__name__))
    return found


async def aget_index_nodes(index: BaseIndex[Any], ids: list[str]) -> list[BaseNode]:
    """Async :func:`get_index_nodes`."""
    store = _text_store(index)
    if store is not None:
        try:
            return list(await store.aget_nodes(node_ids=ids))
        except NotImplementedError:
            pass
    found = await index.docstore.aget_nodes(ids, raise_error=False)
    if not found and store is not None:
        raise NotImplementedError(_NO_GET_NODES.format(store=type(store).__name__))
    return found


_NO_GET_NODES = (
    "{store} has no get_nodes and the index's docstore holds none of the nodes asked for "
    "(VectorStoreIndex(..., store_nodes_override=True) keeps them there)"
)


def as_results(nodes: Sequence[BaseNode]) -> list[NodeWithScore]:
    """Fetched nodes as results (no score: they were not searched)."""
    return [NodeWithScore(node=node, score=None) for node in nodes]


def node_turns(item: NodeWithScore) -> list[str]:
    """The utterance ids a node holds (:func:`~gravity_core.serving.provenance.held_utterances`)."""
    return held_utterances(item.node.node_id, item.node.metadata)


def index_sources(
    notices: ProvenanceNotices, index: BaseIndex[Any], turns: Sequence[SourceTurn], node_ids: NodeIds
) -> list[tuple[str, NodeWithScore]]:
    """The index's nodes holding ``turns``, each with the anchor that asked for it.

    Args:
        notices: the retriever's notices.
        index: the host's index.
        turns: the turns to fetch.
        node_ids: the index's node ids of the turns' utterance ids.
    """
    return fetch_sources(
        notices,
        index_host_name(index),
        turns,
        lambda ids: as_results(get_index_nodes(index, node_ids(ids))),
        node_turns,
        node_id,
    )


async def aindex_sources(
    notices: ProvenanceNotices, index: BaseIndex[Any], turns: Sequence[SourceTurn], node_ids: NodeIds
) -> list[tuple[str, NodeWithScore]]:
    """Async :func:`index_sources`."""

    async def fetch(ids: list[str]) -> list[NodeWithScore]:
        return as_results(await aget_index_nodes(index, node_ids(ids)))

    return await afetch_sources(notices, index_host_name(index), turns, fetch, node_turns, node_id)
