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

from gravity_core.context_policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_langchain.batched_search import can_search_many, search_many_by_vector
from gravity_langchain.embeddings import shares_embedder
from gravity_langchain.fusion import document_key
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
    call). The original question and every expansion are run against the host, and the results
    are merged by the :class:`~gravity_core.context_policy.ContextPolicy`: the question's own hits
    come first and the expansions may only add, at a bounded share of the places, documents the
    question has not placed (deduplicated by document id, else text), cut to ``k``. Each returned
    document says why it is there in its metadata: ``gravity_slot`` (``"question"`` or
    ``"expansion"``), ``gravity_score`` (reciprocal-rank score over the queries that found it) and
    ``gravity_found_by`` (each query, its text and the document's rank there). When no anchor is
    relevant to the question the engine makes no expansion and only the question is searched.
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
        policy: how the expansions' hits join the question's (default: the shipped policy, the one
            ``gravity eval`` measures).
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
    policy: ContextPolicy = DEFAULT_POLICY
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
            return self._merge(query, context.expansions, lists, top)
        store = self._store()
        search = self._search_kwargs(kwargs)
        fetch = self.fetch_k or top
        embeddings = store.embeddings
        if embeddings is None:
            context = self._context(query, None)
            self._emit(context, run_manager)
            expansions = self._searched(context, top, fetch)
            lists = [store.similarity_search(q, k=fetch, **search) for q in [query, *expansions]]
            return self._merge(query, expansions, lists, top)
        context, expansions, vectors = self._embedded_queries(query, embeddings, top, fetch)
        self._emit(context, run_manager)
        queries = [query, *expansions]
        if can_search_many(store, search):
            lists = search_many_by_vector(store, vectors, fetch, search)
        else:
            lists = [
                self._search_by_vector(store, v, q, fetch, search)
                for q, v in zip(queries, vectors, strict=True)
            ]
        return self._merge(query, expansions, lists, top)

    def _embedded_queries(
        self, query: str, embeddings: Embeddings, top: int, fetch: int
    ) -> tuple[AnchorContext, list[str], list[list[float]]]:
        """The anchor context, the expansions to search, and the vectors of the question and those."""
        if shares_embedder(embeddings, self.engine.embedder):
            question_vector = embeddings.embed_query(query)
            context = self._context(query, question_vector)
            expansions = self._searched(context, top, fetch)
            known = self.engine.known_expansion_vectors(expansions)
            missing = [text for text, v in zip(expansions, known, strict=True) if v is None]
            fresh = self._embed(embeddings, missing)
            return context, expansions, [question_vector, *_fill(known, fresh)]
        context = self._context(query, None)
        expansions = self._searched(context, top, fetch)
        return context, expansions, self._embed(embeddings, [query, *expansions])

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
            return self._merge(query, context.expansions, lists, top)
        store = self._store()
        search = self._search_kwargs(kwargs)
        fetch = self.fetch_k or top
        embeddings = store.embeddings
        if embeddings is None:
            context = await self._acontext(query, None)
            await self._aemit(context, run_manager)
            expansions = self._searched(context, top, fetch)
            lists = await asyncio.gather(
                *(store.asimilarity_search(q, k=fetch, **search) for q in [query, *expansions])
            )
            return self._merge(query, expansions, lists, top)
        context, expansions, vectors = await self._aembedded_queries(query, embeddings, top, fetch)
        await self._aemit(context, run_manager)
        queries = [query, *expansions]
        if can_search_many(store, search):
            lists = await asyncio.to_thread(search_many_by_vector, store, vectors, fetch, search)
            return self._merge(query, expansions, lists, top)
        lists = await asyncio.gather(
            *(
                self._asearch_by_vector(store, v, q, fetch, search)
                for q, v in zip(queries, vectors, strict=True)
            )
        )
        return self._merge(query, expansions, lists, top)

    async def _aembedded_queries(
        self, query: str, embeddings: Embeddings, top: int, fetch: int
    ) -> tuple[AnchorContext, list[str], list[list[float]]]:
        if shares_embedder(embeddings, self.engine.embedder):
            question_vector = await embeddings.aembed_query(query)
            context = await self._acontext(query, question_vector)
            expansions = self._searched(context, top, fetch)
            known = self.engine.known_expansion_vectors(expansions)
            missing = [text for text, v in zip(expansions, known, strict=True) if v is None]
            fresh = await self._aembed(embeddings, missing)
            return context, expansions, [question_vector, *_fill(known, fresh)]
        context = await self._acontext(query, None)
        expansions = self._searched(context, top, fetch)
        return context, expansions, await self._aembed(embeddings, [query, *expansions])

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

    def _searched(self, context: AnchorContext, top: int, fetch: int) -> list[str]:
        """The expansions worth searching the vector store with for ``top`` results.

        None when the policy gives them no place among ``top``: the question's own search fills
        every place (it fetches at least ``top`` from the same store the expansions would search).
        """
        if (fetch >= top and top <= self.policy.lead) or self.policy.every == 0:
            return []
        return list(context.expansions)

    def _merge(
        self, query: str, expansions: Sequence[str], lists: Sequence[Sequence[Document]], top: int
    ) -> list[Document]:
        """The policy's merge of the question's list (``lists[0]``) with the expansions', as new documents."""
        merged = self.policy.merge(query, lists[0], expansions, lists[1:], document_key, top_n=top)
        return [
            hit.item.model_copy(update={"metadata": {**hit.item.metadata, **hit.metadata()}})
            for hit in merged
        ]


def _fill(known: Sequence[np.ndarray | None], fresh: Sequence[list[float]]) -> list[list[float]]:
    """The known vectors, with the gaps filled in order from ``fresh``."""
    supply = iter(fresh)
    return [next(supply) if vector is None else vector.tolist() for vector in known]
