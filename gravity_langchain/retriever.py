"""GravityRetriever: the user's own vector store or retriever, plus the anchors' source turns by id."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import VectorStore
from pydantic import Field, PrivateAttr

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.context.provenance import SourceTurn
from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.question_date import QUESTION_DATE_KEY, as_question_date
from gravity_core.serving.answer_cache import AnswerCache, UserAnswerCaches
from gravity_core.serving.provenance import ProvenanceNotices, source_turns_for
from gravity_core.serving.search_plan import PlanSteps, SearchPlan, arun_plan, plan_searches, run_plan
from gravity_core.serving.turn_documents import ChunkIds
from gravity_core.serving.users import UserKBs
from gravity_langchain.batched_search import BatchedSearch
from gravity_langchain.embeddings import shares_embedder
from gravity_langchain.fusion import document_key, merged_documents
from gravity_langchain.per_user import USER_ID_KEY, UserFilter, configured_user_id
from gravity_langchain.retrieval_call import (
    RetrievalCall,
    call_serving,
    check_serving,
    configured_question_date,
    refuse_call_arguments,
    refuse_search_arguments,
    refuse_unknown_arguments,
    with_user_search,
)
from gravity_langchain.source_fetch import (
    DocumentIds,
    TurnFetcher,
    afetch_source_documents,
    fetch_source_documents,
    source_host,
)
from gravity_langchain.store_search import asearch_store, search_store

__all__ = ["GravityRetriever", "TurnFetcher"]

logger = logging.getLogger(__name__)


class GravityRetriever(BaseRetriever):
    """Searches the host's vector store (or retriever) with the question and adds the anchors' source turns.

    For each question the engine selects anchors (no model call). The retriever returns, merged by
    the :class:`~gravity_core.context.policy.ContextPolicy` and cut to ``k``:

    - the question's own hits, from one search of the host, first;
    - the selected anchors' source turns, fetched from the store by id (``get_by_ids``; for a
      retriever, from a ``VectorStoreRetriever``'s store), placed after the question's first two
      hits at every second place (see **Source turns** below);
    - the hits of GRAVITY's expanded queries, only under a policy that places them, e.g.
      :data:`~gravity_core.context.policy.EXPANDING_POLICY` (the paper's query expansion): they
      may then only add, at a bounded share of the places after the question's first 25 hits,
      documents the question has not placed. The shipped policy places none, so the engine's
      expansions (still made, a few string joins) are neither embedded nor searched.

    Documents are deduplicated by document id, else text. Each says why it is there in its
    metadata: ``gravity_slot`` (``"question"``, ``"provenance"`` or ``"expansion"``),
    ``gravity_score`` (reciprocal-rank score over the queries that found it) and
    ``gravity_found_by`` (each query, its text and the document's rank there; for a source turn,
    the anchor that names it, e.g. ``"event:ev-000025"``). The retriever returns the host's
    documents only; the anchors' text reaches the prompt through
    :func:`~gravity_langchain.chain.gravity_anchors_runnable`. The selected anchors are emitted as
    the custom callback event ``"gravity_anchors_selected"`` (:data:`ANCHORS_EVENT`, payload:
    :func:`anchors_event_data`, which lists the expansions made).

    The searches are planned by :mod:`gravity_core.serving.search_plan`, as in the LlamaIndex
    retriever: only expansions whose hits the policy can place are searched (none with the
    shipped policy; with ``EXPANDING_POLICY``, none while ``k`` is within its lead of 25 and
    ``fetch_k`` at least ``k``, and in ``invoke`` in order while the merge can still place their
    hits), and known vectors are reused (the question's, when the store's embeddings are the
    engine's embedder: :func:`~gravity_langchain.embeddings.shares_embedder`; the expansions' the
    build stored). The rest are embedded in one ``embed_documents`` call and each query is searched
    with the store's own ``similarity_search_by_vector`` (concurrently in ``ainvoke``), so a
    wrapper of the store sees every search; or, with ``batched_search`` (e.g.
    :class:`~gravity_langchain.batched_search.ChromaBatchedSearch`), in one request. With a
    retriever, the queries go through ``retriever.batch`` (``ainvoke`` concurrently).

    **Source turns.** Every GRAVITY anchor knows the turns it came from. The shipped policy fetches
    those of the selected anchors (the surest first, up to eight per anchor) by id. A document holds
    the turn whose utterance id is its id, or the turns its metadata lists under
    ``"gravity_utterance_ids"``; over a store of chunks of ``n`` turns made by
    ``documents_from_utterances(turns, turns_per_document=n)``, give ``turns_per_document=n`` too,
    and the chunks holding the turns are fetched by their ids. Nothing is fetched with ``users=``,
    with search arguments (a filter cannot apply to a fetch by id) or for a retriever that is not a
    vector store's: the log says so once, and the question's hits fill the places.
    ``policy=dataclasses.replace(DEFAULT_POLICY, source_every=0)`` turns it off.

    **The question's date.** Phrases such as "last month" are resolved against the date the question
    is asked: ``invoke(q, question_date=d)``, else ``config={"configurable": {"question_date": d}}``
    (which also reaches the retriever inside a chain), else the ``question_date`` field, else the
    date of the KB's latest utterance. A date, a datetime or an ISO string is accepted; a shared
    cache keeps the answers for each date apart.

    **Many users, one retriever.** Give ``users=`` (a :class:`~gravity_core.serving.users.UserKBs`) instead
    of ``engine=`` and name the user per call: ``invoke(q, user_id="u1")``, else
    ``config={"configurable": {"user_id": "u1"}}`` (which also reaches the retriever inside a chain);
    a call that names no user is refused. The call uses ``users.engine(user_id)``, and every search
    of the host's store (the question's and each expansion's, sync, async or batched) gets the
    search arguments ``user_filter(user_id)`` returns, so one store can hold every user's documents.
    With ``retriever=``, only a ``VectorStoreRetriever`` is taken (it hands those arguments to each
    of its searches); other retrievers may drop them. The anchors event then also carries the
    ``"user_id"``.

    Other retrievers' arguments (``search_type``, ``top_k``) and misspelt ones are refused; other
    ``invoke`` keyword arguments go to the store's search or the retriever.

    Attributes:
        engine: the GRAVITY engine over the KB (give this or ``users``).
        vector_store: the host's vector store (give this or ``retriever``).
        retriever: the host's retriever (give this or ``vector_store``); its own settings decide how
            many documents each query brings back (and MMR or score thresholds, when it has them).
        k: documents returned (``invoke(q, k=2)`` overrides it for one call).
        fetch_k: documents fetched per query from a vector store (default: ``k``; ``invoke(q,
            fetch_k=20)`` overrides it for one call).
        question_date: the date questions are asked (default: the KB's latest day).
        policy: how the source turns and the expansions' hits join the question's (default: the
            shipped policy, the one ``gravity eval`` measures, which places no expansion;
            ``EXPANDING_POLICY`` searches them).
        search_kwargs: extra arguments of the store's search, e.g. ``{"filter": {...}}``.
        config: query settings of the engine (default: the engine's own).
        cache: a :class:`~gravity_core.serving.answer_cache.AnswerCache` of the engine shared with
            the anchors runnable, so a chain runs the engine query once per question; with ``users``,
            a :class:`~gravity_core.serving.answer_cache.UserAnswerCaches` of the same users (a cache per
            user; a single engine's cache is refused).
        batch_embeddings: embed all queries in one ``embed_documents`` call; set it to ``False`` for
            models whose query embeddings differ from their document embeddings (each query is then
            embedded with ``embed_query``).
        batched_search: searches all of a question's vectors in one request to the store, in place of
            the store's per-vector search (only with ``vector_store``).
        users: the KBs of many users (give this or ``engine``); each call names its user.
        user_filter: with ``users``, the store's extra search arguments for one user's documents,
            e.g. ``lambda u: {"filter": {"user_id": u}}`` for Chroma (required with ``users``).
        turns_per_document: the ``turns_per_document`` the store's documents were made with by
            :func:`~gravity_langchain.messages.documents_from_utterances` (default 1: a document
            per turn); the source turns are then fetched as the chunks holding them.

    Example:
        ```python
        retriever = GravityRetriever(engine=engine, vector_store=store, k=4)
        docs = retriever.invoke("What did Maya do last month?", question_date="2024-06-01")

        shared = GravityRetriever(
            users=UserKBs("kbs"), vector_store=chroma, user_filter=lambda u: {"filter": {"user_id": u}}
        )
        docs = shared.invoke("Where does Maya work now?", user_id="u1")
        ```
    """

    engine: GravityEngine | None = None
    vector_store: VectorStore | None = None
    retriever: BaseRetriever | None = None
    k: int = 4
    fetch_k: int | None = None
    question_date: date | None = None
    policy: ContextPolicy = DEFAULT_POLICY
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    config: QueryConfig | None = None
    cache: AnswerCache | UserAnswerCaches | None = None
    batch_embeddings: bool = True
    batched_search: BatchedSearch | None = None
    users: UserKBs | None = None
    user_filter: UserFilter | None = None
    turns_per_document: int = 1
    _notices: ProvenanceNotices = PrivateAttr(default_factory=lambda: ProvenanceNotices("GravityRetriever"))
    _chunk_ids: ChunkIds = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        # Checked here rather than in pydantic validators so users get a ConfigurationError that
        # names the argument (BaseRetriever ignores unknown arguments).
        refuse_unknown_arguments(type(self), data)
        if QUESTION_DATE_KEY in data:
            data[QUESTION_DATE_KEY] = as_question_date(data[QUESTION_DATE_KEY])
        super().__init__(**data)
        self._chunk_ids = ChunkIds(self.turns_per_document)
        if (self.vector_store is None) == (self.retriever is None):
            raise ConfigurationError("GravityRetriever needs exactly one of vector_store= or retriever=")
        for name, value in (("k", self.k), ("fetch_k", self.fetch_k)):
            if value is not None and value < 1:
                raise ConfigurationError(f"{name} must be at least 1, got {value}")
        refuse_search_arguments(self.search_kwargs)
        check_serving(self.engine, self.users, self.cache, self.user_filter, self.retriever)
        if self.batched_search is not None and self.retriever is not None:
            raise ConfigurationError(
                "batched_search= searches a vector store; it does not apply to retriever="
            )

    # -- entry points -------------------------------------------------------------------------

    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        """Documents for ``input``; ``config["configurable"]`` may date the question and name the user."""
        return super().invoke(input, config, **self._configured(config, kwargs))

    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """Async :meth:`invoke`."""
        return await super().ainvoke(input, config, **self._configured(config, kwargs))

    def _configured(self, config: RunnableConfig | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's keyword arguments, with the configured question date and user id added.

        Each is added where the call gives none; the user id only with ``users``.
        """
        readers: dict[str, Callable[[RunnableConfig | None], object]] = {
            QUESTION_DATE_KEY: configured_question_date
        }
        if self.users is not None:
            readers[USER_ID_KEY] = configured_user_id
        # Read (and checked) only where the call gives none, as a keyword argument wins.
        configured = {name: read(config) for name, read in readers.items() if kwargs.get(name) is None}
        missing = {name: value for name, value in configured.items() if value is not None}
        return {**kwargs, **missing} if missing else kwargs

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        fetch_k: int | None = None,
        question_date: date | datetime | str | None = None,
        user_id: object = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Documents for ``query``; extra keyword arguments go to the store's search or the retriever."""
        call = self._call(k, fetch_k, question_date, user_id, kwargs)
        embeddings = self._embeddings()
        plan = run_plan(
            self._steps(query, call, embeddings),
            embed_question=lambda text: embeddings.embed_query(text),  # type: ignore[union-attr]
            ask=lambda vector: call.ask(query, vector),
            embed_texts=lambda texts: self._embed(embeddings, texts),
        )
        assert plan.context is not None  # the plan asked the engine
        call.emit(plan.context, run_manager)
        sourced = self._sourced(plan, call)
        if self.retriever is not None:
            config = RunnableConfig(callbacks=run_manager.get_child())
            found = self.retriever.batch(plan.queries, config=config, **call.search)
            return self._merge(plan, found, call, sourced)
        store = self.vector_store
        assert store is not None  # checked in __init__
        batched = self._batched(call)
        if batched is not None and plan.vectors is not None:
            return self._merge(plan, batched.search(plan.vectors, call.fetch, call.search), call, sourced)

        def search(n: int) -> list[Document]:
            vector = None if plan.vectors is None else plan.vectors[n]
            return search_store(store, plan.queries[n], vector, call.fetch, call.search)

        merged, searched = self.policy.merge_searching(
            query,
            search(0),
            plan.expansions,
            lambda n: search(n + 1),
            document_key,
            top_n=call.top,
            sourced=sourced,
        )
        logger.debug(
            "searched %d of %d expanded queries for %d results", searched, len(plan.expansions), call.top
        )
        return merged_documents(merged)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        fetch_k: int | None = None,
        question_date: date | datetime | str | None = None,
        user_id: object = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Async :meth:`_get_relevant_documents`: the searches run concurrently."""
        if self.users is None:
            call = self._call(k, fetch_k, question_date, user_id, kwargs)
        else:  # the user's engine may be loaded from disk
            call = await asyncio.to_thread(self._call, k, fetch_k, question_date, user_id, kwargs)
        embeddings = self._embeddings()
        plan = await arun_plan(
            self._steps(query, call, embeddings),
            embed_question=lambda text: embeddings.aembed_query(text),  # type: ignore[union-attr]
            ask=lambda vector: call.aask(query, vector),
            embed_texts=lambda texts: self._aembed(embeddings, texts),
        )
        assert plan.context is not None  # the plan asked the engine
        await call.aemit(plan.context, run_manager)
        sourced = await self._asourced(plan, call)
        if self.retriever is not None:
            config = RunnableConfig(callbacks=run_manager.get_child())
            retriever = self.retriever
            lists = await asyncio.gather(
                *(retriever.ainvoke(q, config=config, **call.search) for q in plan.queries)
            )
            return self._merge(plan, lists, call, sourced)
        store = self.vector_store
        assert store is not None  # checked in __init__
        batched = self._batched(call)
        if batched is not None and plan.vectors is not None:
            found = await asyncio.to_thread(batched.search, plan.vectors, call.fetch, call.search)
            return self._merge(plan, found, call, sourced)

        async def search(n: int) -> list[Document]:
            vector = None if plan.vectors is None else plan.vectors[n]
            return await asearch_store(store, plan.queries[n], vector, call.fetch, call.search)

        lists = await asyncio.gather(*(search(n) for n in range(len(plan.queries))))
        return self._merge(plan, lists, call, sourced)

    # -- shared -------------------------------------------------------------------------------

    def _embeddings(self) -> Embeddings | None:
        return None if self.vector_store is None else self.vector_store.embeddings

    def _steps(self, query: str, call: RetrievalCall, embeddings: Embeddings | None) -> PlanSteps:
        """The search plan of ``query``: a retriever's own settings decide how much each search brings."""
        return plan_searches(
            query,
            policy=self.policy,
            top_n=call.top,
            fetch=call.fetch if self.vector_store is not None else None,
            embeds=embeddings is not None,
            shares_model=embeddings is not None and shares_embedder(embeddings, call.engine.embedder),
            stored=call.engine.known_expansion_vectors,
        )

    def _embed(self, embeddings: Embeddings | None, texts: list[str]) -> list[list[float]]:
        assert embeddings is not None  # the plan embeds only when the store has embeddings
        if self.batch_embeddings:
            return embeddings.embed_documents(texts)
        return [embeddings.embed_query(text) for text in texts]

    async def _aembed(self, embeddings: Embeddings | None, texts: list[str]) -> list[list[float]]:
        assert embeddings is not None  # the plan embeds only when the store has embeddings
        if self.batch_embeddings:
            return await embeddings.aembed_documents(texts)
        return list(await asyncio.gather(*(embeddings.aembed_query(text) for text in texts)))

    def _call(
        self,
        k: int | None,
        fetch_k: int | None,
        question_date: object,
        user_id: object,
        kwargs: Mapping[str, Any],
    ) -> RetrievalCall:
        """This call's settings; refuses other retrievers' arguments and misspelt GRAVITY ones."""
        refuse_call_arguments(kwargs)
        top = self.k if k is None else k
        fetch = fetch_k if fetch_k is not None else (self.fetch_k or top)
        for name, value in (("k", top), ("fetch_k", fetch)):
            if value < 1:
                raise ConfigurationError(f"{name} must be at least 1, got {value}")
        asked = as_question_date(question_date)
        search = {**self.search_kwargs, **kwargs} if self.vector_store is not None else dict(kwargs)
        engine, cache, user = call_serving(self.engine, self.users, self.cache, user_id)
        if user is not None:
            assert self.user_filter is not None  # checked in __init__
            search = with_user_search(search, self.user_filter, self.retriever, user)
        asked = asked if asked is not None else self.question_date
        return RetrievalCall(top, fetch, search, asked, engine, cache, user, self.config)

    def _batched(self, call: RetrievalCall) -> BatchedSearch | None:
        batched = self.batched_search
        return batched if batched is not None and batched.accepts(call.search) else None

    def _merge(
        self,
        plan: SearchPlan,
        lists: Sequence[Sequence[Document]],
        call: RetrievalCall,
        sourced: Sequence[tuple[str, Document]],
    ) -> list[Document]:
        """The policy's merge of the question's list (``lists[0]``), the source turns and the expansions'."""
        merged = self.policy.merge(
            plan.question,
            lists[0],
            plan.expansions,
            lists[1:],
            document_key,
            top_n=call.top,
            sourced=sourced,
        )
        return merged_documents(merged)

    # -- provenance ---------------------------------------------------------------------------

    def _source_host(
        self, plan: SearchPlan, call: RetrievalCall
    ) -> tuple[VectorStore | TurnFetcher | None, list[SourceTurn], DocumentIds]:
        """What to fetch the plan's source turns from, the turns (none: nothing to fetch), and their ids."""
        turns = source_turns_for(self.policy, plan.context, call.top)
        if not turns:
            return None, [], list
        host = source_host(
            self._notices,
            vector_store=self.vector_store,
            retriever=self.retriever,
            shared=self.users is not None,
            search=call.search,
        )
        snapshot = call.engine.snapshot
        return host, turns, lambda ids: self._chunk_ids.document_ids(snapshot, ids)

    def _sourced(self, plan: SearchPlan, call: RetrievalCall) -> list[tuple[str, Document]]:
        """The documents holding the selected anchors' source turns, each with its anchor."""
        host, turns, document_ids = self._source_host(plan, call)
        return [] if host is None else fetch_source_documents(self._notices, host, turns, document_ids)

    async def _asourced(self, plan: SearchPlan, call: RetrievalCall) -> list[tuple[str, Document]]:
        """Async :meth:`_sourced`."""
        host, turns, document_ids = self._source_host(plan, call)
        return [] if host is None else await afetch_source_documents(self._notices, host, turns, document_ids)
