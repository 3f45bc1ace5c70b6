"""A retriever that runs the question and each GRAVITY expansion as its own search, merged by the policy."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.indices.base import BaseIndex
from llama_index.core.indices.vector_store.retrievers.retriever import VectorIndexRetriever
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.prompts.mixin import PromptMixinType
from llama_index.core.schema import NodeWithScore, QueryBundle

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.context.provenance import SourceTurn
from gravity_core.embeddings.framework import shares_vectors
from gravity_core.errors import ConfigurationError
from gravity_core.query.question_date import as_question_date
from gravity_core.serving.provenance import ProvenanceNotices, source_turns_for
from gravity_core.serving.search_plan import PlanSteps, SearchPlan, arun_plan, plan_searches, run_plan
from gravity_core.serving.turn_documents import ChunkIds
from gravity_core.serving.users import UserKBs
from gravity_llamaindex.embeddings import GravityEmbedding, aembed_texts, embed_texts
from gravity_llamaindex.fusion import explained_nodes, node_id
from gravity_llamaindex.index_fetch import NodeIds, aindex_sources, index_sources
from gravity_llamaindex.per_user import (
    UserFilters,
    UserRetriever,
    checked_retriever,
    checked_user_filters,
    retriever_of_user,
    user_retriever,
)
from gravity_llamaindex.provider import AnchorProvider, EngineLike, as_provider
from gravity_llamaindex.transform import question_date_of, user_id_of

__all__ = ["GravityFusionRetriever"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_TOP_K = 10

# Arguments of ``as_retriever`` that keep a search to some nodes: a fetch by id could not apply them.
_RESTRICTING = ("filters", "node_ids", "doc_ids", "vector_store_kwargs")


class GravityFusionRetriever(BaseRetriever):
    """Searches the host's retriever with the question, adds the anchors' source turns, merges them.

    It returns, merged by the :class:`~gravity_core.context.policy.ContextPolicy`, the question's
    own hits first, the selected anchors' source turns fetched from the host's index by id
    (**Retrieval by provenance**, below), and the hits of GRAVITY's expanded queries only under a
    policy that places them, e.g. :data:`~gravity_core.context.policy.EXPANDING_POLICY` (the
    paper's query expansion). The shipped policy places no expansion, so the expansions (still
    made by the engine, a few string joins, and still attached by a
    :class:`~gravity_llamaindex.GravityQueryTransform`) are neither embedded nor searched: the
    host gets one search, the question's. For each question it:

    1. plans the searches with :mod:`gravity_core.serving.search_plan`, as the LangChain
       retriever does: the question, then the expansions (those a
       :class:`~gravity_llamaindex.GravityQueryTransform` attached to ``custom_embedding_strs``,
       else the engine's), only those whose hits the policy can place (none with the shipped
       policy; with ``EXPANDING_POLICY``, none while ``similarity_top_k`` is within its lead of 25
       places and a ``VectorIndexRetriever`` host fetches at least as many). With
       ``embed_model``, the queries are embedded with it in one request
       (``get_text_embedding_batch`` when ``batch_embed`` is on, else ``get_query_embedding``
       each), reusing every known vector: the bundle's, the question's handed to the engine when
       ``embed_model`` is the KB's embedder, and the vectors the build stored for expansions.
    2. runs one search per query, ``QueryBundle(query, embedding=vector)``, on the wrapped retriever:
       concurrently in :meth:`aretrieve`; in :meth:`retrieve` the expansions in order only while
       the merge can still place their hits (the nodes returned are the same).
    3. merges the lists by the policy (deduplicated by ``node_id``): the question's own hits come
       first, the selected anchors' source turns (below) join them, and the expansions, when
       placed, may only add, at a bounded share of the places after the question's first 25, nodes
       the question has not placed. It returns the top ``similarity_top_k``. Each returned node is
       a copy whose metadata says why it is there (``gravity_slot``: ``"question"``,
       ``"provenance"`` or ``"expansion"``; ``gravity_score``: the reciprocal-rank score over the
       queries that found it; ``gravity_found_by``: each query with the node's rank there, or for
       a source turn the anchor, e.g. ``"event:ev-000025"``; kept out of the LLM's and the
       embedder's text).

    **Retrieval by provenance.** Every GRAVITY anchor knows the turns it came from. With the
    shipped policy, the source turns of the selected anchors (the surest first, up to eight
    per anchor) are fetched from the host's index by id and placed after the question's first two
    hits, at every second place, before any expansion. Built with :meth:`from_index`, the nodes
    are read with the public API: the vector store's ``get_nodes(node_ids=...)`` when it keeps
    the text (Chroma), else the index's docstore ``get_nodes(ids, raise_error=False)``
    (``SimpleVectorStore``, the default).
    A node holds the turn whose utterance id is its ``node_id`` (as
    :func:`~gravity_llamaindex.nodes_from_utterances` makes them), or the turns its metadata lists
    under ``"gravity_utterance_ids"`` (:data:`~gravity_core.serving.provenance.UTTERANCE_IDS_KEY`);
    a node holding several is placed once. Over an index of chunks of ``n`` turns made by
    ``nodes_from_utterances(turns, turns_per_node=n)``, give ``from_index(..., turns_per_node=n)``
    too, and the chunks holding the turns are fetched by their ids. Nothing is fetched, and the
    log says why once per retriever, for a retriever given without its index (LlamaIndex keeps a
    retriever's index private), a store that cannot hand nodes back by id, ``users=`` or a
    ``from_index`` with ``filters``, ``node_ids``, ``doc_ids`` or ``vector_store_kwargs`` (a fetch
    by id could not keep to them); nodes indexed under other ids are warned about once. With the
    expansions of a :class:`~gravity_llamaindex.GravityQueryTransform`, the sources come from the
    provider's remembered answer (share the provider). ``dataclasses.replace(DEFAULT_POLICY,
    source_every=0)`` turns it off.

    **Scores.** A returned node keeps the score the host's retriever gave it: a node in one of the
    question's places has its score for the question (as without GRAVITY), a node an expansion
    added has the best score any of its searches gave it (the host's score for that expansion).
    So a ``SimilarityPostprocessor(similarity_cutoff=...)`` after this retriever cuts where it
    would cut the host's own results. A source turn no search found has no score of the host's:
    it takes the score of the node placed just before it, so a cutoff keeps it when it keeps that
    node. (A node whose searches gave no score gets its reciprocal-rank score.) The order is the
    policy's, so the scores need not be descending.

    **The question's date**, for phrases such as "last month": the bundle's, when it is a
    :class:`~gravity_llamaindex.GravityQueryBundle`, else ``question_date``, else the provider's.

    **Many users.** Built with ``users=`` (a :class:`~gravity_core.serving.users.UserKBs`, or a shared
    ``AnchorProvider(users=...)`` as ``engine``), each query must name its user
    (``GravityQueryBundle(q, user_id=...)``): the expansions come from that user's KB, and every
    search of the query (the question's and each expansion's) runs on ``retriever(user_id)``, the
    retriever the host made for that user (any ``BaseRetriever``: a vector retriever with the
    user's metadata filters, BM25 over the user's nodes...), so one index holding every user's
    nodes serves each user only theirs. :meth:`from_index` makes that function from
    ``user_filters``.

    Args:
        retriever: the host's retriever, e.g. ``index.as_retriever(similarity_top_k=10)``; with
            ``users``, a function from the user id to that user's retriever, e.g. ``lambda u:
            index.as_retriever(similarity_top_k=10, filters=MetadataFilters(
            filters=[ExactMatchFilter(key="user_id", value=u)]))``, called once per query.
        engine: a GRAVITY engine, or an :class:`AnchorProvider` shared with the other components;
            not together with ``users``.
        users: the KBs of many users; not together with ``engine``.
        similarity_top_k: how many fused nodes are returned.
        embed_model: the model that embeds the queries (default: the wrapped retriever's public
            ``embed_model``, as :class:`~gravity_llamaindex.SGMemRetriever` has; LlamaIndex's
            ``VectorIndexRetriever`` has none, so pass the index's model to embed all queries in
            one request and reuse known vectors). Without one, each search gets the bare query
            text and the retriever embeds it itself (as keyword retrievers such as BM25 need).
        batch_embed: embed the queries as one text batch instead of one query embedding each.
            ``None`` (default) batches only for a ``GravityEmbedding``, whose query and text
            embeddings are the same; leave it off for models that embed queries differently from
            documents (instruction-prefixed models).
        policy: how the source turns and the expansions' hits join the question's (default: the
            shipped policy, the one ``gravity eval`` measures, which places no expansion;
            ``EXPANDING_POLICY`` searches them).
        question_date: the date questions are asked (a date, a datetime or an ISO string;
            default: the provider's).
        callback_manager: LlamaIndex callback manager (legacy callbacks).
        verbose: log the queries at INFO level.

    Raises:
        ConfigurationError: a bad argument; both or neither of ``engine`` and ``users``; ``users``
            with one ``BaseRetriever`` (its searches would mix users) rather than a function of the
            user id; such a function without ``users``. At a query, with ``users``: a query that
            names no user, or a function that does not return a ``BaseRetriever``.

    Example:
        ```python
        retriever = GravityFusionRetriever.from_index(index, engine, similarity_top_k=8)
        query_engine = RetrieverQueryEngine.from_args(retriever, llm=llm)

        per_user = GravityFusionRetriever.from_index(
            index,
            users=UserKBs("kbs/"),
            user_filters=lambda u: MetadataFilters(filters=[ExactMatchFilter(key="user_id", value=u)]),
            embed_model=index_embed_model,  # optional: each query embedded once, stored vectors reused
        )
        # or any retriever per user:
        per_user = GravityFusionRetriever(lambda u: bm25_retriever_of(u), users=UserKBs("kbs/"))
        nodes = per_user.retrieve(GravityQueryBundle("Where did I hike?", user_id="u-17"))
        ```
    """

    def __init__(
        self,
        retriever: BaseRetriever | UserRetriever,
        engine: EngineLike | None = None,
        *,
        users: UserKBs | None = None,
        similarity_top_k: int = DEFAULT_TOP_K,
        embed_model: BaseEmbedding | None = None,
        batch_embed: bool | None = None,
        policy: ContextPolicy = DEFAULT_POLICY,
        question_date: date | datetime | str | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if not isinstance(retriever, BaseRetriever) and not callable(retriever):
            raise ConfigurationError(
                f"expected a LlamaIndex BaseRetriever (or, with users=, a function from the user id "
                f"to one), got {type(retriever).__name__}"
            )
        if similarity_top_k < 1:
            raise ConfigurationError(f"similarity_top_k must be >= 1, got {similarity_top_k}")
        provider = as_provider(engine, users=users)
        host, per_user = checked_retriever(provider.users is not None, retriever)
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self._retriever = host
        self._user_retriever = per_user
        self._provider = provider
        self._similarity_top_k = similarity_top_k
        found = getattr(host, "embed_model", None)  # a public model of the host's, as SGMemRetriever has
        self._embed_model = embed_model or (found if isinstance(found, BaseEmbedding) else None)
        batch = isinstance(self._embed_model, GravityEmbedding) if batch_embed is None else batch_embed
        self._batch_embed = batch
        self._policy = policy
        self._question_date = as_question_date(question_date)
        # Where the source turns are fetched from: set by from_index (an unfiltered index's retriever).
        self._source_index: BaseIndex[Any] | None = None
        self._filtered = False
        self._chunk_ids = ChunkIds(1)
        self._notices = ProvenanceNotices(type(self).__name__)

    @classmethod
    def from_index(
        cls,
        index: BaseIndex[Any],
        engine: EngineLike | None = None,
        *,
        users: UserKBs | None = None,
        user_filters: UserFilters | None = None,
        similarity_top_k: int = DEFAULT_TOP_K,
        per_query_top_k: int | None = None,
        embed_model: BaseEmbedding | None = None,
        batch_embed: bool | None = None,
        policy: ContextPolicy = DEFAULT_POLICY,
        question_date: date | datetime | str | None = None,
        turns_per_node: int = 1,
        **retriever_kwargs: Any,
    ) -> GravityFusionRetriever:
        """Wrap ``index.as_retriever(similarity_top_k=per_query_top_k, **retriever_kwargs)``.

        With ``users``, each query's searches run on ``index.as_retriever(similarity_top_k=
        per_query_top_k, filters=<user_filters(user_id) AND filters>, **retriever_kwargs)``, made
        for the query's user.

        Args:
            index: the host's index, e.g. a ``VectorStoreIndex`` on Chroma; the selected anchors'
                source turns are fetched from it by id (see the class docstring).
            engine: a GRAVITY engine or a shared :class:`AnchorProvider`; not together with ``users``.
            users: the KBs of many users (see the class docstring).
            user_filters: with ``users`` (required then), the metadata filters of a user's nodes,
                made from the user id, e.g. ``lambda user_id: MetadataFilters(filters=[
                ExactMatchFilter(key="user_id", value=user_id)])``; joined by AND with ``filters``.
            similarity_top_k: how many fused nodes are returned.
            per_query_top_k: how many nodes each search returns (default: ``similarity_top_k``).
            embed_model: the query embedding model, e.g. the index's (see the class docstring).
            batch_embed: as in the class docstring.
            policy: as in the class docstring.
            question_date: as in the class docstring.
            turns_per_node: the ``turns_per_node`` the index's nodes were made with by
                :func:`~gravity_llamaindex.messages.nodes_from_utterances` (default 1: a node per
                turn); the source turns are then fetched as the nodes holding them.
            **retriever_kwargs: passed to ``as_retriever`` (``filters``, ``vector_store_query_mode``...).
        """
        chunk_ids = ChunkIds(turns_per_node)
        per_query = per_query_top_k or similarity_top_k
        provider = as_provider(engine, users=users)
        restrict = checked_user_filters(provider.users is not None, user_filters)
        inner: BaseRetriever | UserRetriever
        if restrict is None:
            inner = index.as_retriever(similarity_top_k=per_query, **retriever_kwargs)
        else:
            inner = user_retriever(index, restrict, per_query, retriever_kwargs)
        made = cls(
            inner,
            provider,
            similarity_top_k=similarity_top_k,
            embed_model=embed_model,
            batch_embed=batch_embed,
            policy=policy,
            question_date=question_date,
        )
        made._chunk_ids = chunk_ids
        if restrict is None:
            made._source_index = index
            made._filtered = any(retriever_kwargs.get(name) for name in _RESTRICTING)
        return made

    @property
    def retriever(self) -> BaseRetriever:
        """The wrapped host retriever (a ``ConfigurationError`` with ``users=``: :meth:`retriever_for`)."""
        if self._retriever is None:
            raise ConfigurationError(
                "with users=, each user has their own retriever: use retriever_for(user_id)"
            )
        return self._retriever

    def retriever_for(self, user_id: str | None) -> BaseRetriever:
        """The retriever this retriever searches for a query of ``user_id``.

        With ``users=``, a new one from the constructor's function; else the one host retriever
        (``user_id`` is ignored then).

        Raises:
            ConfigurationError: with ``users=``, no ``user_id``, or the function did not return a
                ``BaseRetriever``.
        """
        if self._user_retriever is None:
            return self.retriever
        return retriever_of_user(self._user_retriever, user_id)

    @property
    def provider(self) -> AnchorProvider:
        """Where the anchors and expansions come from."""
        return self._provider

    @property
    def question_date(self) -> date | None:
        """The date this retriever's questions are asked, unless the bundle says otherwise."""
        return self._question_date

    def _get_prompt_modules(self) -> PromptMixinType:
        return {} if self._retriever is None else {"retriever": self._retriever}

    # -- planning -----------------------------------------------------------------------------

    def _steps(self, bundle: QueryBundle, provider: AnchorProvider, host: BaseRetriever) -> PlanSteps:
        """The search plan of the bundle's question (see :mod:`gravity_core.serving.search_plan`)."""
        model = self._embed_model
        wrapped = model.embedder if isinstance(model, GravityEmbedding) else None
        given = bundle.custom_embedding_strs
        return plan_searches(
            bundle.query_str,
            policy=self._policy,
            top_n=self._similarity_top_k,
            fetch=host.similarity_top_k if isinstance(host, VectorIndexRetriever) else None,
            embeds=model is not None,
            shares_model=shares_vectors(provider.engine.embedder, wrapped=wrapped, model=model),
            stored=provider.engine.known_expansion_vectors,
            question_vector=bundle.embedding,
            # A transform's strings, when it attached more than the question.
            given_expansions=given[1:] if given is not None and len(given) > 1 else None,
        )

    def _asked(self, bundle: QueryBundle) -> date | None:
        """The bundle's date, else this retriever's (``None``: the provider's)."""
        given = question_date_of(bundle)
        return given if given is not None else self._question_date

    @staticmethod
    def _search_bundle(plan: SearchPlan, n: int, given: Sequence[float] | None) -> QueryBundle:
        # A fresh bundle per search: VectorIndexRetriever writes the embedding back onto the bundle.
        vector = plan.vectors[n] if plan.vectors is not None else (given if n == 0 else None)
        return QueryBundle(query_str=plan.queries[n], embedding=None if vector is None else list(vector))

    def _log(self, bundle: QueryBundle, plan: SearchPlan) -> None:
        level = logging.INFO if self._verbose else logging.DEBUG
        user = user_id_of(bundle)
        whose = f" of user {user}" if user is not None else ""
        logger.log(level, "%d queries for %r%s: %s", len(plan.queries), bundle.query_str, whose, plan.queries)

    # -- retrieval ----------------------------------------------------------------------------

    @dispatcher.span
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        user_id = user_id_of(query_bundle)
        provider, host = self._provider.for_user(user_id), self.retriever_for(user_id)
        model, asked, question = self._embed_model, self._asked(query_bundle), query_bundle.query_str
        plan = run_plan(
            self._steps(query_bundle, provider, host),
            embed_question=lambda text: model.get_query_embedding(text),  # type: ignore[union-attr]
            ask=lambda vector: provider.get(question, query_embedding=vector, question_date=asked),
            embed_texts=lambda texts: embed_texts(model, texts, batch=self._batch_embed),
        )
        self._log(query_bundle, plan)
        index, turns = self._source_turns(plan, provider, asked)
        sourced = self._fetched(index, turns)
        results = [host.retrieve(self._search_bundle(plan, 0, query_bundle.embedding))]

        def search(n: int) -> list[NodeWithScore]:
            results.append(host.retrieve(self._search_bundle(plan, n + 1, None)))
            return results[-1]

        # The expansions in order, only while the merge can still place their hits.
        merged, searched = self._policy.merge_searching(
            plan.question,
            results[0],
            plan.expansions,
            search,
            node_id,
            top_n=self._similarity_top_k,
            sourced=sourced,
        )
        logger.debug("searched %d of %d expanded queries", searched, len(plan.expansions))
        return explained_nodes(merged, results)

    @dispatcher.span
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        user_id = user_id_of(query_bundle)
        provider, host = await self._provider.afor_user(user_id), self.retriever_for(user_id)
        model, asked, question = self._embed_model, self._asked(query_bundle), query_bundle.query_str
        plan = await arun_plan(
            self._steps(query_bundle, provider, host),
            embed_question=lambda text: model.aget_query_embedding(text),  # type: ignore[union-attr]
            ask=lambda vector: provider.aget(question, query_embedding=vector, question_date=asked),
            embed_texts=lambda texts: aembed_texts(model, texts, batch=self._batch_embed),
        )
        self._log(query_bundle, plan)
        index, turns = self._source_turns(plan, provider, asked)
        given = query_bundle.embedding
        searches = (host.aretrieve(self._search_bundle(plan, n, given)) for n in range(len(plan.queries)))
        sourced, results = await asyncio.gather(self._afetched(index, turns), asyncio.gather(*searches))
        merged = self._policy.merge(
            plan.question,
            results[0],
            plan.expansions,
            results[1:],
            node_id,
            top_n=self._similarity_top_k,
            sourced=sourced,
        )
        return explained_nodes(merged, results)

    # -- provenance ---------------------------------------------------------------------------

    def _source_turns(
        self, plan: SearchPlan, provider: AnchorProvider, asked: date | None
    ) -> tuple[BaseIndex[Any] | None, list[SourceTurn]]:
        """The index to fetch the plan's source turns from, and the turns (none: nothing to fetch).

        With expansions a query transform gave, the plan did not ask GRAVITY: the provider's
        remembered answer (the transform's, when they share the provider) names the sources.
        """
        context = plan.context
        if context is None:
            context = provider.cached(plan.question, question_date=asked)
        turns = source_turns_for(self._policy, context, self._similarity_top_k)
        if not turns:
            return None, []
        if self._user_retriever is not None:
            # The user's retriever keeps to the user's nodes; a fetch by id could not.
            self._notices.cannot_fetch(
                "a retriever per user", "a fetch by id cannot apply the user's filters"
            )
            return None, []
        if self._source_index is None:
            self._notices.cannot_fetch(
                type(self._retriever).__name__,
                "a retriever gives no public fetch by id; GravityFusionRetriever.from_index(index, ...) "
                "fetches from the index",
            )
            return None, []
        if self._filtered:
            self._notices.cannot_fetch(
                "a filtered search", "a fetch by id cannot apply the retriever's filters"
            )
            return None, []
        return self._source_index, turns

    def _fetched(
        self, index: BaseIndex[Any] | None, turns: Sequence[SourceTurn]
    ) -> list[tuple[str, NodeWithScore]]:
        """The index's nodes holding ``turns``, each with the anchor that asked for it (none: no index)."""
        return [] if index is None else index_sources(self._notices, index, turns, self._node_ids())

    async def _afetched(
        self, index: BaseIndex[Any] | None, turns: Sequence[SourceTurn]
    ) -> list[tuple[str, NodeWithScore]]:
        """Async :meth:`_fetched`."""
        return [] if index is None else await aindex_sources(self._notices, index, turns, self._node_ids())

    def _node_ids(self) -> NodeIds:
        """The index's node ids of utterance ids (an index is fetched from only with one engine)."""
        snapshot = self._provider.engine.snapshot
        return lambda ids: self._chunk_ids.document_ids(snapshot, ids)
