"""Fetching a LlamaIndex index's nodes by id, for retrieval by provenance.

A ``VectorStoreIndex`` whose vector store keeps the nodes' text (Chroma...) hands them back through
the store's ``get_nodes``; over the default ``SimpleVectorStore`` the index's docstore holds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.indices.base import BaseIndex
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.schema import BaseNode, NodeWithScore
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from gravity_core.serving.provenance import held_utterances

__all__ = ["aget_index_nodes", "as_results", "get_index_nodes", "index_host_name", "node_turns"]


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
