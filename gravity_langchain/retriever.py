"""GravityRetriever: the user's own vector store or retriever, searched with GRAVITY's expanded queries."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import VectorStore
from pydantic import Field

from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_langchain.batched_search import can_search_many, search_many_by_vector
from gravity_langchain.embeddings import shares_embedder
from gravity_langchain.fusion import reciprocal_rank_fusion
from gravity_langchain.query_cache import GravityQueryCache

__all__ = ["ANCHORS_EVENT", "GravityRetriever", "anchors_event_data"]

logger = logging.getLogger(__name__)

ANCHORS_EVENT = "gravity_anchors"
"""Name of the custom callback event that carries the selected anchors (``on_custom_event``)."""


def anchors_event_data(context: AnchorContext) -> dict[str, Any]:
    """Payload of the :data:`ANCHORS_EVENT` event: question, anchors (kind, id, score, reason), expansions."""
    return {
        "question": context.question,
        "anchors": [
            {"kind": a.kind.value, "id": a.id, "score": float(a.score), "reason": a.reason}
            for a in context.anchors
        ],
        "expansions": list(context.expansions),
        "tokens": context.tokens,
    }


class GravityRetriever(BaseRetriever):
    """Searches the host's vector store (or retriever) with the question plus GRAVITY's expansions.

    For each question the engine selects anchors and makes up to nine expanded queries (no model
    call). The original question and every expansion are run against the host, and the result
    lists are fused by reciprocal rank, deduplicated (by document id, else text) and cut to ``k``.
    The retriever returns the host's documents only; the anchors' text reaches the prompt through
    :func:`~gravity_langchain.chain.gravity_anchors_runnable`. The selected anchors are emitted as
    the custom callback event ``"gravity_anchors"`` (see :func:`anchors_event_data`).

    With a vector store, the queries are embedded with the store's embeddings in one
    ``embed_documents`` call and searched by vector (concurrently in ``ainvoke``). When the store's
    embeddings are the engine's embedder (:func:`~gravity_langchain.embeddings.shares_embedder`),
    the question is embedded once and that vector also serves the engine, and expansions whose
    vectors the build stored are not embedded at all. A ``langchain_chroma.Chroma`` store gets all
    of a question's vectors in one ``query`` request (filters via ``search_kwargs["filter"]``).
    With a retriever, the queries go through ``retriever.batch`` (``ainvoke`` concurrently), with
    this run's callbacks.

    Attributes:
        engine: the GRAVITY engine over the KB.
        vector_store: the host's vector store (give this or ``retriever``).
        retriever: the host's retriever (give this or ``vector_store``); its own settings decide how
            many documents each query brings back.
        k: documents returned (``invoke(q, k=2)`` overrides it for one call).
        fetch_k: documents fetched per query from a vector store (default: ``k``).
        rrf_c: the reciprocal-rank-fusion constant.
        search_kwargs: extra arguments of the store's search, e.g. ``{"filter": {...}}``.
        config: query settings of the engine (default: the engine's own).
        cache: a :class:`~gravity_langchain.query_cache.GravityQueryCache` shared with the anchors
            runnable, so a chain runs the engine query once per question.
        batch_embeddings: embed all queries in one ``embed_documents`` call; set it to ``False`` for
            models whose query embeddings differ from their document embeddings (each query is then
            embedded with ``embed_query``).

    Example:
        ```python
        retriever = GravityRetriever(engine=engine, vector_store=store, k=4)
        docs = retriever.invoke("Where does Maya work now?")
        ```
    """

    engine: GravityEngine
    vector_store: VectorStore | None = None
    retriever: BaseRetriever | None = None
    k: int = 4
    fetch_k: int | None = None
    rrf_c: int = 60
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    config: QueryConfig | None = None
    cache: GravityQueryCache | None = None
    batch_embeddings: bool = True

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        # Checked here rather than in a pydantic validator so users get a ConfigurationError.
        if (self.vector_store is None) == (self.retriever is None):
            raise ConfigurationError("GravityRetriever needs exactly one of vector_store= or retriever=")
        if self.k < 1:
            raise ConfigurationError(f"k must be at least 1, got {self.k}")
        if self.fetch_k is not None and self.fetch_k < 1:
            raise ConfigurationError(f"fetch_k must be at least 1, got {self.fetch_k}")
        if self.rrf_c < 0:
            raise ConfigurationError(f"rrf_c must be >= 0, got {self.rrf_c}")
        if "k" in self.search_kwargs:
            raise ConfigurationError("set the number of results with k= or fetch_k=, not in search_kwargs")
        if self.cache is not None and self.cache.engine is not self.engine:
            raise ConfigurationError("the cache was made for another engine")

    # -- sync ---------------------------------------------------------------------------------

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Documents for ``query``; extra keyword arguments go to the store's search or the retriever."""
        top = self._top(k)
        if self.retriever is not None:
            context = self._context(query, None)
            self._emit(context, run_manager)
            queries = [query, *context.expansions]
            lists = self.retriever.batch(queries, config={"callbacks": run_manager.get_child()}, **kwargs)
            return reciprocal_rank_fusion(lists, k=top, c=self.rrf_c)
        store = self._store()
        search = self._search_kwargs(kwargs)
        fetch = self.fetch_k or top
        embeddings = store.embeddings
        if embeddings is None:
            context = self._context(query, None)
            self._emit(context, run_manager)
            lists = [store.similarity_search(q, k=fetch, **search) for q in [query, *context.expansions]]
            return reciprocal_rank_fusion(lists, k=top, c=self.rrf_c)
        context, vectors = self._embedded_queries(query, embeddings)
        self._emit(context, run_manager)
        queries = [query, *context.expansions]
        if can_search_many(store, search):
            lists = search_many_by_vector(store, vectors, fetch, search)
        else:
            lists = [
                self._search_by_vector(store, v, q, fetch, search)
                for q, v in zip(queries, vectors, strict=True)
            ]
        return reciprocal_rank_fusion(lists, k=top, c=self.rrf_c)

    def _embedded_queries(
        self, query: str, embeddings: Embeddings
    ) -> tuple[AnchorContext, list[list[float]]]:
        if shares_embedder(embeddings, self.engine.embedder):
            question_vector = embeddings.embed_query(query)
            context = self._context(query, question_vector)
            known = self.engine.known_expansion_vectors(context.expansions)
            missing = [text for text, v in zip(context.expansions, known, strict=True) if v is None]
            fresh = self._embed(embeddings, missing)
            return context, [question_vector, *_fill(known, fresh)]
        context = self._context(query, None)
        return context, self._embed(embeddings, [query, *context.expansions])

    def _embed(self, embeddings: Embeddings, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if self.batch_embeddings:
            return embeddings.embed_documents(texts)
        return [embeddings.embed_query(text) for text in texts]

    def _context(self, query: str, vector: Sequence[float] | None) -> AnchorContext:
        if self.cache is not None:
            return self.cache.get(query, config=self.config, query_embedding=vector)
        return self.engine.query(query, config=self.config, query_embedding=vector)

    @staticmethod
    def _search_by_vector(
        store: VectorStore, vector: list[float], query: str, fetch: int, search: dict[str, Any]
    ) -> list[Document]:
        try:
            return store.similarity_search_by_vector(vector, k=fetch, **search)
        except NotImplementedError:
            logger.debug("%s cannot search by vector; searching by text", type(store).__name__)
            return store.similarity_search(query, k=fetch, **search)

    @staticmethod
    def _emit(context: AnchorContext, run_manager: CallbackManagerForRetrieverRun) -> None:
        dispatch_custom_event(
            ANCHORS_EVENT, anchors_event_data(context), config={"callbacks": run_manager.get_child()}
        )

    # -- async --------------------------------------------------------------------------------

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Async :meth:`_get_relevant_documents`: the searches run concurrently."""
        top = self._top(k)
        if self.retriever is not None:
            context = await self._acontext(query, None)
            await self._aemit(context, run_manager)
            retriever = self.retriever
            config = RunnableConfig(callbacks=run_manager.get_child())
            lists = await asyncio.gather(
                *(retriever.ainvoke(q, config=config, **kwargs) for q in [query, *context.expansions])
            )
            return reciprocal_rank_fusion(lists, k=top, c=self.rrf_c)
        store = self._store()
        search = self._search_kwargs(kwargs)
        fetch = self.fetch_k or top
        embeddings = store.embeddings
        if embeddings is None:
            context = await self._acontext(query, None)
            await self._aemit(context, run_manager)
            lists = await asyncio.gather(
                *(store.asimilarity_search(q, k=fetch, **search) for q in [query, *context.expansions])
            )
            return reciprocal_rank_fusion(lists, k=top, c=self.rrf_c)
        context, vectors = await self._aembedded_queries(query, embeddings)
        await self._aemit(context, run_manager)
        queries = [query, *context.expansions]
        if can_search_many(store, search):
            lists = await asyncio.to_thread(search_many_by_vector, store, vectors, fetch, search)
            return reciprocal_rank_fusion(lists, k=top, c=self.rrf_c)
        lists = await asyncio.gather(
            *(
                self._asearch_by_vector(store, v, q, fetch, search)
                for q, v in zip(queries, vectors, strict=True)
            )
        )
        return reciprocal_rank_fusion(lists, k=top, c=self.rrf_c)

    async def _aembedded_queries(
        self, query: str, embeddings: Embeddings
    ) -> tuple[AnchorContext, list[list[float]]]:
        if shares_embedder(embeddings, self.engine.embedder):
            question_vector = await embeddings.aembed_query(query)
            context = await self._acontext(query, question_vector)
            known = self.engine.known_expansion_vectors(context.expansions)
            missing = [text for text, v in zip(context.expansions, known, strict=True) if v is None]
            fresh = await self._aembed(embeddings, missing)
            return context, [question_vector, *_fill(known, fresh)]
        context = await self._acontext(query, None)
        return context, await self._aembed(embeddings, [query, *context.expansions])

    async def _aembed(self, embeddings: Embeddings, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if self.batch_embeddings:
            return await embeddings.aembed_documents(texts)
        return list(await asyncio.gather(*(embeddings.aembed_query(text) for text in texts)))

    async def _acontext(self, query: str, vector: Sequence[float] | None) -> AnchorContext:
        if self.cache is not None:
            return await self.cache.aget(query, config=self.config, query_embedding=vector)
        return await self.engine.aquery(query, config=self.config, query_embedding=vector)

    @staticmethod
    async def _asearch_by_vector(
        store: VectorStore, vector: list[float], query: str, fetch: int, search: dict[str, Any]
    ) -> list[Document]:
        try:
            return await store.asimilarity_search_by_vector(vector, k=fetch, **search)
        except NotImplementedError:
            logger.debug("%s cannot search by vector; searching by text", type(store).__name__)
            return await store.asimilarity_search(query, k=fetch, **search)

    @staticmethod
    async def _aemit(context: AnchorContext, run_manager: AsyncCallbackManagerForRetrieverRun) -> None:
        await adispatch_custom_event(
            ANCHORS_EVENT, anchors_event_data(context), config={"callbacks": run_manager.get_child()}
        )

    # -- shared -------------------------------------------------------------------------------

    def _top(self, k: int | None) -> int:
        top = self.k if k is None else k
        if top < 1:
            raise ConfigurationError(f"k must be at least 1, got {top}")
        return top

    def _store(self) -> VectorStore:
        assert self.vector_store is not None  # checked in __init__
        return self.vector_store

    def _search_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {**self.search_kwargs, **kwargs}


def _fill(known: Sequence[np.ndarray | None], fresh: Sequence[list[float]]) -> list[list[float]]:
    """The known vectors, with the gaps filled in order from ``fresh``."""
    supply = iter(fresh)
    return [next(supply) if vector is None else vector.tolist() for vector in known]
