"""GravityRetriever: the user's own vector store or retriever, searched with GRAVITY's expanded queries."""

from __future__ import annotations

import asyncio
import difflib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
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
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from pydantic import Field

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy, MergedHit
from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.question_date import QUESTION_DATE_KEY, as_question_date
from gravity_core.query.types import AnchorContext
from gravity_core.serving.users import UserKBs
from gravity_langchain.batched_search import BatchedSearch
from gravity_langchain.embeddings import shares_embedder
from gravity_langchain.fusion import document_key
from gravity_langchain.per_user import (
    USER_ID_KEY,
    UserFilter,
    configured_user_id,
    required_user_id,
    user_search_arguments,
)
from gravity_langchain.query_cache import GravityQueryCache, UserQueryCaches

__all__ = [
    "ANCHORS_EVENT",
    "QUESTION_DATE_KEY",
    "GravityRetriever",
    "anchors_event_data",
    "as_question_date",
    "configured_question_date",
    "refuse_unknown_arguments",
]

logger = logging.getLogger(__name__)

ANCHORS_EVENT = "gravity_anchors_selected"
"""Name of the custom callback event that carries the selected anchors (``on_custom_event``).

Not ``"gravity_anchors"``: that is the name of the anchors runnable's run (and the prompt variable).
"""

# Arguments of LangChain's VectorStoreRetriever (or other retrievers) that GravityRetriever does not
# take, and what to do instead.
_WRAP_YOUR_RETRIEVER = (
    "GravityRetriever runs similarity searches by vector; for MMR or a score threshold wrap your "
    "store's own retriever: GravityRetriever(engine=..., retriever=store.as_retriever(search_type=..., "
    "search_kwargs=...))"
)
_INSTEAD = {
    "search_type": _WRAP_YOUR_RETRIEVER,
    "score_threshold": _WRAP_YOUR_RETRIEVER,
    "lambda_mult": _WRAP_YOUR_RETRIEVER,
    "top_k": "use k= (documents returned) or fetch_k= (documents fetched per query)",
    "n_results": "use k= (documents returned) or fetch_k= (documents fetched per query)",
    "vectorstore": "use vector_store=",
    "store": "use vector_store=",
    "base_retriever": "use retriever=",
}
# The keyword arguments GravityRetriever itself takes in invoke(); the others go to the store's search.
_CALL_ARGUMENTS = ("k", "fetch_k", QUESTION_DATE_KEY, USER_ID_KEY)

_NO_USER_FILTER = (
    "GravityRetriever(users=...) needs user_filter=: the store holds every user's documents, so each "
    "search must keep to the call's user, e.g. user_filter=lambda u: {'filter': {'user_id': u}} for "
    "Chroma; with a store per user, build a GravityRetriever(engine=users.engine(u), ...) per user"
)


def configured_question_date(config: RunnableConfig | None) -> date | None:
    """The question date in ``config["configurable"]["question_date"]`` (``None`` when not set).

    Raises:
        ConfigurationError: the value is not a date, a datetime or an ISO date string.
    """
    configurable = ensure_config(config).get("configurable") or {}
    return as_question_date(configurable.get(QUESTION_DATE_KEY), f"configurable[{QUESTION_DATE_KEY!r}]")


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


def _hint(name: str, known: Iterable[str], instead: Mapping[str, str] = _INSTEAD) -> str:
    if name in instead:
        return f" ({instead[name]})"
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def refuse_unknown_arguments(
    owner: type[BaseRetriever], data: Mapping[str, Any], instead: Mapping[str, str] = _INSTEAD
) -> None:
    """Raise for constructor arguments ``owner`` has no field for (LangChain's retrievers ignore them).

    Raises:
        ConfigurationError: naming each unknown argument, what to use instead (or the field it
            looks like a misspelling of), and the arguments ``owner`` takes.
    """
    known = owner.model_fields
    unknown = [name for name in data if name not in known]
    if not unknown:
        return
    supported = ", ".join(n for n in known if n not in ("name", "tags", "metadata"))
    raise ConfigurationError(
        f"{owner.__name__} got unknown argument(s) "
        + "; ".join(f"{name!r}{_hint(name, known, instead)}" for name in unknown)
        + f". It takes: {supported} (and LangChain's name, tags, metadata)"
    )


@dataclass(frozen=True)
class _Call:
    """The settings of one retrieval: documents returned, fetched per query, search arguments, date,
    and the engine (with its query cache, if any) of the call's user."""

    top: int
    fetch: int
    search: dict[str, Any]
    asked: date | None
    engine: GravityEngine
    cache: GravityQueryCache | None
    user_id: str | None


class GravityRetriever(BaseRetriever):
    """Searches the host's vector store (or retriever) with the question plus GRAVITY's expansions.

    For each question the engine selects anchors and makes up to nine expanded queries (no model
    call). The original question and every expansion are run against the host, and the results
    are merged by the :class:`~gravity_core.context.policy.ContextPolicy`: the question's own hits
    come first and the expansions may only add, at a bounded share of the places, documents the
    question has not placed (deduplicated by document id, else text), cut to ``k``. Each returned
    document says why it is there in its metadata: ``gravity_slot`` (``"question"`` or
    ``"expansion"``), ``gravity_score`` (reciprocal-rank score over the queries that found it) and
    ``gravity_found_by`` (each query, its text and the document's rank there). When no anchor is
    relevant to the question the engine makes no expansion and only the question is searched.
    The retriever returns the host's documents only; the anchors' text reaches the prompt through
    :func:`~gravity_langchain.chain.gravity_anchors_runnable`. The selected anchors are emitted as
    the custom callback event ``"gravity_anchors_selected"`` (:data:`ANCHORS_EVENT`, payload:
    :func:`anchors_event_data`).

    With a vector store, the queries are embedded with the store's embeddings in one
    ``embed_documents`` call and each is searched with the store's own ``similarity_search_by_vector``
    (concurrently in ``ainvoke``), so a subclass or wrapper of the store sees every search. In
    ``invoke`` the expansions are searched in order only while the merge can still place their hits
    (:meth:`~gravity_core.context.policy.ContextPolicy.merge_searching`): at ``k`` five past the
    policy's lead of 25, once the expansions searched have filled the five places, the rest are not
    searched; the documents returned are the same, and ``gravity_found_by`` names only the queries
    searched. With ``k`` at most the lead, only the question is searched. When the
    store's embeddings are the engine's embedder
    (:func:`~gravity_langchain.embeddings.shares_embedder`), the question is embedded once and that
    vector also serves the engine, and expansions whose vectors the build stored are not embedded
    at all. Give ``batched_search`` (e.g. a
    :class:`~gravity_langchain.batched_search.ChromaBatchedSearch` over the store's ``chromadb``
    collection) to send all of a question's vectors in one request instead.
    With a retriever, the queries go through ``retriever.batch`` (``ainvoke`` concurrently), with
    this run's callbacks.

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

    Unknown constructor arguments are refused (``search_type``, ``top_k``, a misspelt ``fetch_k``),
    and so are the per-call arguments of other retrievers (``top_k``, ``search_type``) and misspelt
    GRAVITY ones; other ``invoke`` keyword arguments go to the store's search or the retriever.

    Attributes:
        engine: the GRAVITY engine over the KB (give this or ``users``).
        vector_store: the host's vector store (give this or ``retriever``).
        retriever: the host's retriever (give this or ``vector_store``); its own settings decide how
            many documents each query brings back (and MMR or score thresholds, when it has them).
        k: documents returned (``invoke(q, k=2)`` overrides it for one call).
        fetch_k: documents fetched per query from a vector store (default: ``k``; ``invoke(q,
            fetch_k=20)`` overrides it for one call).
        question_date: the date questions are asked (default: the KB's latest day).
        policy: how the expansions' hits join the question's (default: the shipped policy, the one
            ``gravity eval`` measures).
        search_kwargs: extra arguments of the store's search, e.g. ``{"filter": {...}}``.
        config: query settings of the engine (default: the engine's own).
        cache: a :class:`~gravity_langchain.query_cache.GravityQueryCache` of the engine shared with
            the anchors runnable, so a chain runs the engine query once per question; with ``users``,
            a :class:`~gravity_langchain.query_cache.UserQueryCaches` of the same users (a cache per
            user; a single engine's cache is refused).
        batch_embeddings: embed all queries in one ``embed_documents`` call; set it to ``False`` for
            models whose query embeddings differ from their document embeddings (each query is then
            embedded with ``embed_query``).
        batched_search: searches all of a question's vectors in one request to the store, in place of
            the store's per-vector search (only with ``vector_store``).
        users: the KBs of many users (give this or ``engine``); each call names its user.
        user_filter: with ``users``, the store's extra search arguments for one user's documents,
            e.g. ``lambda u: {"filter": {"user_id": u}}`` for Chroma (required with ``users``).

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
    cache: GravityQueryCache | UserQueryCaches | None = None
    batch_embeddings: bool = True
    batched_search: BatchedSearch | None = None
    users: UserKBs | None = None
    user_filter: UserFilter | None = None

    def __init__(self, **data: Any) -> None:
        # Checked here rather than in pydantic validators so users get a ConfigurationError that
        # names the argument (BaseRetriever ignores unknown arguments).
        refuse_unknown_arguments(type(self), data)
        if QUESTION_DATE_KEY in data:
            data[QUESTION_DATE_KEY] = as_question_date(data[QUESTION_DATE_KEY])
        super().__init__(**data)
        if (self.vector_store is None) == (self.retriever is None):
            raise ConfigurationError("GravityRetriever needs exactly one of vector_store= or retriever=")
        if self.k < 1:
            raise ConfigurationError(f"k must be at least 1, got {self.k}")
        if self.fetch_k is not None and self.fetch_k < 1:
            raise ConfigurationError(f"fetch_k must be at least 1, got {self.fetch_k}")
        for name in self.search_kwargs:
            if name in _CALL_ARGUMENTS:
                raise ConfigurationError(f"set {name} with {name}=, not in search_kwargs")
            if name in _INSTEAD:
                raise ConfigurationError(f"search_kwargs[{name!r}] is not supported: {_INSTEAD[name]}")
        self._check_serving()
        if self.batched_search is not None and self.retriever is not None:
            raise ConfigurationError(
                "batched_search= searches a vector store; it does not apply to retriever="
            )

    def _check_serving(self) -> None:
        """Exactly one of ``engine`` and ``users``, each with the cache and the user filter it takes."""
        if (self.engine is None) == (self.users is None):
            raise ConfigurationError(
                "GravityRetriever needs exactly one of engine= (one KB) or users= (a KB per user)"
            )
        if self.users is None:
            if self.user_filter is not None:
                raise ConfigurationError("user_filter= goes with users=, not with engine=")
            if self.cache is not None and (
                not isinstance(self.cache, GravityQueryCache) or self.cache.engine is not self.engine
            ):
                raise ConfigurationError("the cache was made for another engine")
            return
        if self.user_filter is None:
            raise ConfigurationError(_NO_USER_FILTER)
        if self.cache is not None and (
            not isinstance(self.cache, UserQueryCaches) or self.cache.users is not self.users
        ):
            raise ConfigurationError(
                "with users=, the cache must be a UserQueryCaches(users) of the same users (one cache "
                "per user), not a single engine's GravityQueryCache"
            )
        if self.retriever is not None and not isinstance(self.retriever, VectorStoreRetriever):
            raise ConfigurationError(
                f"with users=, a {type(self.retriever).__name__} may not apply user_filter's arguments "
                "to its searches: give vector_store= (or its as_retriever())"
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
        """The call's keyword arguments, with the configured question date and (with ``users``) user
        id where the call gives none."""
        readers: dict[str, Callable[[RunnableConfig | None], object]] = {
            QUESTION_DATE_KEY: configured_question_date
        }
        if self.users is not None:
            readers[USER_ID_KEY] = configured_user_id
        # Read (and checked) only where the call gives none, as a keyword argument wins.
        configured = {name: read(config) for name, read in readers.items() if kwargs.get(name) is None}
        missing = {name: value for name, value in configured.items() if value is not None}
        return {**kwargs, **missing} if missing else kwargs

    # -- sync ---------------------------------------------------------------------------------

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
        if self.retriever is not None:
            context = self._context(query, None, call)
            self._emit(context, run_manager, call)
            queries = [query, *context.expansions]
            lists = self.retriever.batch(
                queries, config={"callbacks": run_manager.get_child()}, **call.search
            )
            return self._merge(query, context.expansions, lists, call.top)
        store = self._store()
        embeddings = store.embeddings
        if embeddings is None:
            context = self._context(query, None, call)
            self._emit(context, run_manager, call)
            expansions = self._searched(context, call)
            return self._merge_searching(
                query,
                store.similarity_search(query, k=call.fetch, **call.search),
                expansions,
                lambda n: store.similarity_search(expansions[n], k=call.fetch, **call.search),
                call.top,
            )
        context, expansions, vectors = self._embedded_queries(query, embeddings, call)
        self._emit(context, run_manager, call)
        batched = self._batched(call)
        if batched is not None:
            lists = batched.search(vectors, call.fetch, call.search)
            return self._merge(query, expansions, lists, call.top)
        return self._merge_searching(
            query,
            self._search_by_vector(store, vectors[0], query, call),
            expansions,
            lambda n: self._search_by_vector(store, vectors[n + 1], expansions[n], call),
            call.top,
        )

    def _embedded_queries(
        self, query: str, embeddings: Embeddings, call: _Call
    ) -> tuple[AnchorContext, list[str], list[list[float]]]:
        """The anchor context, the expansions to search, and the vectors of the question and those."""
        if shares_embedder(embeddings, call.engine.embedder):
            question_vector = embeddings.embed_query(query)
            context = self._context(query, question_vector, call)
            expansions = self._searched(context, call)
            known = call.engine.known_expansion_vectors(expansions)
            missing = [text for text, v in zip(expansions, known, strict=True) if v is None]
            fresh = self._embed(embeddings, missing)
            return context, expansions, [question_vector, *_fill(known, fresh)]
        context = self._context(query, None, call)
        expansions = self._searched(context, call)
        return context, expansions, self._embed(embeddings, [query, *expansions])

    def _embed(self, embeddings: Embeddings, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if self.batch_embeddings:
            return embeddings.embed_documents(texts)
        return [embeddings.embed_query(text) for text in texts]

    def _context(self, query: str, vector: Sequence[float] | None, call: _Call) -> AnchorContext:
        if call.cache is not None:
            return call.cache.get(query, config=self.config, query_embedding=vector, question_date=call.asked)
        return call.engine.query(query, config=self.config, query_embedding=vector, question_date=call.asked)

    @staticmethod
    def _search_by_vector(store: VectorStore, vector: list[float], query: str, call: _Call) -> list[Document]:
        try:
            return store.similarity_search_by_vector(vector, k=call.fetch, **call.search)
        except NotImplementedError:
            logger.debug("%s cannot search by vector; searching by text", type(store).__name__)
            return store.similarity_search(query, k=call.fetch, **call.search)

    @staticmethod
    def _emit(context: AnchorContext, run_manager: CallbackManagerForRetrieverRun, call: _Call) -> None:
        dispatch_custom_event(
            ANCHORS_EVENT, _event_data(context, call), config={"callbacks": run_manager.get_child()}
        )

    # -- async --------------------------------------------------------------------------------

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
        if self.retriever is not None:
            context = await self._acontext(query, None, call)
            await self._aemit(context, run_manager, call)
            retriever = self.retriever
            config = RunnableConfig(callbacks=run_manager.get_child())
            lists = await asyncio.gather(
                *(retriever.ainvoke(q, config=config, **call.search) for q in [query, *context.expansions])
            )
            return self._merge(query, context.expansions, lists, call.top)
        store = self._store()
        embeddings = store.embeddings
        if embeddings is None:
            context = await self._acontext(query, None, call)
            await self._aemit(context, run_manager, call)
            expansions = self._searched(context, call)
            lists = await asyncio.gather(
                *(store.asimilarity_search(q, k=call.fetch, **call.search) for q in [query, *expansions])
            )
            return self._merge(query, expansions, lists, call.top)
        context, expansions, vectors = await self._aembedded_queries(query, embeddings, call)
        await self._aemit(context, run_manager, call)
        queries = [query, *expansions]
        batched = self._batched(call)
        if batched is not None:
            lists = await asyncio.to_thread(batched.search, vectors, call.fetch, call.search)
            return self._merge(query, expansions, lists, call.top)
        lists = await asyncio.gather(
            *(self._asearch_by_vector(store, v, q, call) for q, v in zip(queries, vectors, strict=True))
        )
        return self._merge(query, expansions, lists, call.top)

    async def _aembedded_queries(
        self, query: str, embeddings: Embeddings, call: _Call
    ) -> tuple[AnchorContext, list[str], list[list[float]]]:
        if shares_embedder(embeddings, call.engine.embedder):
            question_vector = await embeddings.aembed_query(query)
            context = await self._acontext(query, question_vector, call)
            expansions = self._searched(context, call)
            known = call.engine.known_expansion_vectors(expansions)
            missing = [text for text, v in zip(expansions, known, strict=True) if v is None]
            fresh = await self._aembed(embeddings, missing)
            return context, expansions, [question_vector, *_fill(known, fresh)]
        context = await self._acontext(query, None, call)
        expansions = self._searched(context, call)
        return context, expansions, await self._aembed(embeddings, [query, *expansions])

    async def _aembed(self, embeddings: Embeddings, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if self.batch_embeddings:
            return await embeddings.aembed_documents(texts)
        return list(await asyncio.gather(*(embeddings.aembed_query(text) for text in texts)))

    async def _acontext(self, query: str, vector: Sequence[float] | None, call: _Call) -> AnchorContext:
        if call.cache is not None:
            return await call.cache.aget(
                query, config=self.config, query_embedding=vector, question_date=call.asked
            )
        return await call.engine.aquery(
            query, config=self.config, query_embedding=vector, question_date=call.asked
        )

    @staticmethod
    async def _asearch_by_vector(
        store: VectorStore, vector: list[float], query: str, call: _Call
    ) -> list[Document]:
        try:
            return await store.asimilarity_search_by_vector(vector, k=call.fetch, **call.search)
        except NotImplementedError:
            logger.debug("%s cannot search by vector; searching by text", type(store).__name__)
            return await store.asimilarity_search(query, k=call.fetch, **call.search)

    @staticmethod
    async def _aemit(
        context: AnchorContext, run_manager: AsyncCallbackManagerForRetrieverRun, call: _Call
    ) -> None:
        await adispatch_custom_event(
            ANCHORS_EVENT, _event_data(context, call), config={"callbacks": run_manager.get_child()}
        )

    # -- shared -------------------------------------------------------------------------------

    def _call(
        self,
        k: int | None,
        fetch_k: int | None,
        question_date: object,
        user_id: object,
        kwargs: Mapping[str, Any],
    ) -> _Call:
        """This call's settings; refuses other retrievers' arguments and misspelt GRAVITY ones."""
        for name in kwargs:
            if name in _INSTEAD or (name not in _CALL_ARGUMENTS and _hint(name, _CALL_ARGUMENTS)):
                raise ConfigurationError(
                    f"GravityRetriever.invoke got {name!r}{_hint(name, _CALL_ARGUMENTS)}; it takes k, "
                    "fetch_k, question_date and user_id, and passes other keyword arguments to the "
                    "store's search"
                )
        top = self.k if k is None else k
        if top < 1:
            raise ConfigurationError(f"k must be at least 1, got {top}")
        fetch = fetch_k if fetch_k is not None else (self.fetch_k or top)
        if fetch < 1:
            raise ConfigurationError(f"fetch_k must be at least 1, got {fetch}")
        asked = as_question_date(question_date)
        search = {**self.search_kwargs, **kwargs} if self.vector_store is not None else dict(kwargs)
        engine, cache, user = self._serving(user_id)
        if user is not None:
            search = self._with_user_search(search, user)
        return _Call(
            top, fetch, search, asked if asked is not None else self.question_date, engine, cache, user
        )

    def _serving(self, user_id: object) -> tuple[GravityEngine, GravityQueryCache | None, str | None]:
        """The engine of the call, its query cache (if any) and the checked user id (with ``users``)."""
        if self.users is None:
            if user_id is not None:
                raise ConfigurationError(
                    "user_id= names the user of a GravityRetriever(users=...); this one serves one engine"
                )
            assert self.engine is not None  # checked in __init__
            return self.engine, self.cache if isinstance(self.cache, GravityQueryCache) else None, None
        user = required_user_id(user_id, "this GravityRetriever")
        if isinstance(self.cache, UserQueryCaches):
            cache = self.cache.for_user(user)
            return cache.engine, cache, user
        return self.users.engine(user), None, user

    def _with_user_search(self, search: Mapping[str, Any], user_id: str) -> dict[str, Any]:
        """``search`` plus ``user_filter``'s arguments for the user; refused where they would overlap."""
        assert self.user_filter is not None  # checked in __init__
        own = user_search_arguments(self.user_filter, user_id)
        given = set(search)
        if isinstance(self.retriever, VectorStoreRetriever):
            given |= set(self.retriever.search_kwargs)
        clash = sorted(given & own.keys())
        if clash:
            raise ConfigurationError(
                f"{', '.join(clash)} is set by user_filter for each user's searches: put the condition "
                "into user_filter instead of search_kwargs or the invoke() arguments"
            )
        return {**search, **own}

    def _store(self) -> VectorStore:
        assert self.vector_store is not None  # checked in __init__
        return self.vector_store

    def _batched(self, call: _Call) -> BatchedSearch | None:
        batched = self.batched_search
        if batched is None or not batched.accepts(call.search):
            return None
        return batched

    def _searched(self, context: AnchorContext, call: _Call) -> list[str]:
        """The expansions worth searching the vector store with for ``call.top`` results.

        None when the policy gives them no place among ``top``: the question's own search fills
        every place (it fetches at least ``top`` from the same store the expansions would search).
        """
        if (call.fetch >= call.top and call.top <= self.policy.lead) or self.policy.every == 0:
            return []
        return list(context.expansions)

    def _merge(
        self, query: str, expansions: Sequence[str], lists: Sequence[Sequence[Document]], top: int
    ) -> list[Document]:
        """The policy's merge of the question's list (``lists[0]``) with the expansions', as new documents."""
        return _documents(self.policy.merge(query, lists[0], expansions, lists[1:], document_key, top_n=top))

    def _merge_searching(
        self,
        query: str,
        question_hits: list[Document],
        expansions: Sequence[str],
        search: Callable[[int], list[Document]],
        top: int,
    ) -> list[Document]:
        """The policy's merge, searching an expansion only while the merge can take its hits."""
        merged, searched = self.policy.merge_searching(
            query, question_hits, expansions, search, document_key, top_n=top
        )
        logger.debug("searched %d of %d expanded queries for %d results", searched, len(expansions), top)
        return _documents(merged)


def _documents(merged: Sequence[MergedHit[Document]]) -> list[Document]:
    """The merged documents as new documents, the merge's metadata added."""
    return [
        hit.item.model_copy(update={"metadata": {**hit.item.metadata, **hit.metadata()}}) for hit in merged
    ]


def _event_data(context: AnchorContext, call: _Call) -> dict[str, Any]:
    """The anchors event's payload, naming the user on a per-user call."""
    data = anchors_event_data(context)
    return data if call.user_id is None else {**data, USER_ID_KEY: call.user_id}


def _fill(known: Sequence[np.ndarray | None], fresh: Sequence[list[float]]) -> list[list[float]]:
    """The known vectors, with the gaps filled in order from ``fresh``."""
    supply = iter(fresh)
    return [next(supply) if vector is None else vector.tolist() for vector in known]
