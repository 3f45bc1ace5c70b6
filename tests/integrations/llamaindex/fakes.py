"""Test doubles for the LlamaIndex side: a scripted host retriever and a counting embedding model."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from gravity_core.embeddings import HashingEmbedder
from gravity_llamaindex import GravityEmbedding


class ScriptedRetriever(BaseRetriever):
    """A host retriever: for query q it returns the node "shared", then the node "only:<q>".

    It records every bundle it receives; its async path sleeps, so concurrent searches overlap.
    """

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__()
        self.bundles: list[QueryBundle] = []
        self.delay = delay
        self.in_flight = 0
        self.max_in_flight = 0

    def _nodes(self, bundle: QueryBundle) -> list[NodeWithScore]:
        self.bundles.append(bundle)
        return [
            NodeWithScore(node=TextNode(id_="shared", text="shared memory"), score=0.5),
            NodeWithScore(node=TextNode(id_=f"only:{bundle.query_str}", text=bundle.query_str), score=0.9),
        ]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(query_bundle)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            return self._nodes(query_bundle)
        finally:
            self.in_flight -= 1


class CountingEmbedding(BaseEmbedding):
    """A plain LlamaIndex embedding model (hashing inside) that counts its calls."""

    _inner: HashingEmbedder = PrivateAttr()
    _counts: dict[str, int] = PrivateAttr()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(model_name="counting", **kwargs)
        self._inner = HashingEmbedder()
        self._counts = {"query": 0, "batch": 0}

    @property
    def counts(self) -> dict[str, int]:
        return self._counts

    def _vec(self, text: str) -> Embedding:
        return [float(x) for x in self._inner.embed([text])[0]]

    def _get_query_embedding(self, query: str) -> Embedding:
        self._counts["query"] += 1
        return self._vec(query)

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._vec(text)

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        self._counts["batch"] += 1
        return [self._vec(t) for t in texts]


class CountingGravityEmbedding(GravityEmbedding):
    """GravityEmbedding that counts query embeddings and text batches."""

    _counts: dict[str, int] = PrivateAttr()

    def __init__(self, embedder: HashingEmbedder) -> None:
        super().__init__(embedder)
        self._counts = {"query": 0, "batch": 0}

    @property
    def counts(self) -> dict[str, int]:
        return self._counts

    def _get_query_embedding(self, query: str) -> Embedding:
        self._counts["query"] += 1
        return super()._get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> Embedding:
        self._counts["query"] += 1
        return await super()._aget_query_embedding(query)

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        self._counts["batch"] += 1
        return super()._get_text_embeddings(texts)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        self._counts["batch"] += 1
        return await super()._aget_text_embeddings(texts)
