"""A retriever that runs the question and each GRAVITY expansion as its own search, fused by rank."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import date, datetime
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.indices.base import BaseIndex
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.prompts.mixin import PromptMixinType
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import FilterCondition, MetadataFilters

from gravity_core.context.fusion import DEFAULT_RRF_C
from gravity_core.context.fusion import reciprocal_rank_fusion as core_rrf
from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy, MergedHit
from gravity_core.embeddings.framework import shares_vectors
from gravity_core.errors import ConfigurationError
from gravity_core.query.question_date import as_question_date
from gravity_core.serving.users import UserKBs
from gravity_llamaindex.embeddings import GravityEmbedding
from gravity_llamaindex.provider import MISSING_USER_ID, AnchorProvider, EngineLike, as_provider
from gravity_llamaindex.transform import merge_queries, question_date_of, user_id_of

__all__ = [
    "GravityFusionRetriever",
    "UserFilters",
    "UserRetriever",
    "reciprocal_rank_fusion",
]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_TOP_K = 10

UserRetriever = Callable[[str], BaseRetriever]
"""The retriever that searches only one user's nodes, made from the user id."""

UserFilters = Callable[[str], MetadataFilters]
"""The metadata filters that keep a search to one user's nodes, made from the user id."""

_USER_RETRIEVER_EXAMPLE = (
    "lambda user_id: index.as_retriever(similarity_top_k=10, filters=MetadataFilters("
    "filters=[ExactMatchFilter(key='user_id', value=user_id)]))"
)


def reciprocal_rank_fusion(
    results: Sequence[Sequence[NodeWithScore]], *, c: int = DEFAULT_RRF_C, top_n: int | None = None
) -> list[NodeWithScore]:
    """Fuse ranked lists: each node scores ``sum(1 / (c + rank))`` over the lists it appears in.

    Store scores are ignored, because their direction and scale differ by backend (Chroma reports
    ``exp(-distance)``, others cosine). Nodes are deduplicated by ``node_id``; ties keep the order in
    which nodes were first met, so the earlier lists (the original question first) win them.

    Args:
        results: one ranked list per search, best first.
        c: the RRF constant; larger values flatten the difference between ranks.
        top_n: how many fused nodes to return (all when ``None``).

    Returns:
        New ``NodeWithScore`` objects (the inputs are not modified) with the fused score, best first.
    """
    fused = core_rrf(results, lambda item: item.node.node_id, c=c, top_n=top_n)
    return [NodeWithScore(node=item.node, score=score) for item, score in fused]


def _all_of(first: MetadataFilters | None, second: MetadataFilters) -> MetadataFilters:
    """Filters matching both ``first`` and ``second``, made with the public constructor only.

    Two flat AND lists are flattened into one (LlamaIndex's in-memory vector store refuses nested
    filters); anything else is nested under an AND.
    """
    if first is None or not first.filters:
        return second
    if _is_and_list(first) and _is_and_list(second):
        return MetadataFilters(filters=[*first.filters, *second.filters], condition=FilterCondition.AND)
    return MetadataFilters(filters=[first, second], condition=FilterCondition.AND)


def _is_and_list(filters: MetadataFilters) -> bool:
    """Whether ``filters`` is a flat list that must all match (an AND, or a single filter)."""
    flat = not any(isinstance(f, MetadataFilters) for f in filters.filters)
    joined = filters.condition in (None, FilterCondition.AND) or (
        len(filters.filters) == 1 and filters.condition == FilterCondition.OR
    )
    return flat and joined


def _checked_retriever(
    provider: AnchorProvider, retriever: BaseRetriever | UserRetriever
) -> tuple[BaseRetriever | None, UserRetriever | None]:
    """(the one host retriever, None) for one KB; (None, the function of the user id) with many users."""
    if provider.users is None:
        if isinstance(retriever, BaseRetriever):
            return retriever, None
        if callable(retriever):
            raise ConfigurationError(
                "a function from the user id to a retriever serves many users: pass users= "
                "(or an AnchorProvider(users=...)) with it, or pass one BaseRetriever"
            )
        raise ConfigurationError(f"expected a LlamaIndex BaseRetriever, got {type(retriever).__name__}")
    if isinstance(retriever, BaseRetriever):
        raise ConfigurationError(
            "with users=, one retriever over an index holding every user's nodes would mix users in "
            "each search: pass a function from the user id to that user's retriever, e.g. "
            f"{_USER_RETRIEVER_EXAMPLE} (or from_index(index, users=..., user_filters=...))"
        )
    if not callable(retriever):
        raise ConfigurationError(
            "with users=, retriever must be a function from the user id to that user's BaseRetriever, "
            f"got {type(retriever).__name__}"
        )
    return None, retriever


def _checked_user_filters(users: bool, user_filters: UserFilters | None) -> UserFilters | None:
    """``user_filters`` when the retriever serves many users (``users``), else why not."""
    if not users:
        if user_filters is not None:
            raise ConfigurationError(
                "user_filters restricts each search to the query's user: pass users= "
                "(or an AnchorProvider(users=...)) with it"
            )
        return None
    if user_filters is None:
        raise ConfigurationError(
            "with users=, the host's index holds every user's nodes and each search would mix them: "
            "pass user_filters=, e.g. lambda user_id: MetadataFilters("
            "filters=[ExactMatchFilter(key='user_id', value=user_id)])"
        )
    if not callable(user_filters):
        raise ConfigurationError(f"user_filters must be callable, got {type(user_filters).__name__}")
    return user_filters


class GravityFusionRetriever(BaseRetriever):
    """Searches the host's retriever with the question and each GRAVITY expansion, then merges them.

    For each question it:

    1. takes the queries: the question, then the expansions. When the bundle came through
       :class:`~gravity_llamaindex.GravityQueryTransform` (its ``custom_embedding_strs`` hold more
       than the question) those strings are used as they are; otherwise the engine is asked.
    2. embeds every query with the index's embedding model (except the expansions whose vectors
       the build stored, when that model is the KB's embedder): one ``get_query_embedding`` per query,
       or one text batch (``get_text_embedding_batch``) when ``batch_embed`` is on. With a
       :class:`~gravity_llamaindex.GravityEmbedding` on the KB's own embedder, the question's
       vector is also handed to the engine, so nothing is embedded twice.
    3. runs one search per query, ``QueryBundle(query, embedding=vector)``, on the wrapped retriever:
       concurrently (``asyncio.gather``) in :meth:`aretrieve`; in :meth:`retrieve` the question, then
       the expansions one after another only while the merge can still place their hits
       (:meth:`~gravity_core.context.policy.ContextPolicy.merge_searching`; the nodes returned are
       the same). Within the policy's lead (25 places) only the question is searched.
    4. merges the lists by the :class:`~gravity_core.context.policy.ContextPolicy` (deduplicated
       by ``node_id``): the question's own hits come first and the expansions may only add, at a
       bounded share of the places, nodes the question has not placed. It returns the top
       ``similarity_top_k``. Each returned node is a copy whose metadata says why it is there
       (``gravity_slot``, ``gravity_score``: the reciprocal-rank score over the queries that found
       it, ``gravity_found_by``: each query with the node's rank there; kept out of the LLM's and
       the embedder's text).

    **Scores.** A returned node keeps the score the host's retriever gave it: a node in one of the
    question's places has its score for the question (as without GRAVITY), a node an expansion
    added has the best score any of its searches gave it (the host's score for that expansion).
    So a ``SimilarityPostprocessor(similarity_cutoff=...)`` after this retriever cuts where it
    would cut the host's own results. (A node whose searches gave no score gets its
    reciprocal-rank score.) The order is the policy's, so the scores need not be descending.

    **The question's date**, for phrases such as "last month": the bundle's, when it is a
    :class:`~gravity_llamaindex.GravityQueryBundle`, else ``question_date``, else the provider's.

    When no anchor is relevant to the question the engine makes no expansion, and only the
    question is searched.

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
        embed_model: the model that embeds the queries (default: the wrapped retriever's, when it
            has one, as ``VectorIndexRetriever`` does; with ``users``, none but this one). Without
            one, each search gets the bare query text and the retriever embeds it itself (needed
            for keyword retrievers such as BM25).
        batch_embed: embed the queries as one text batch instead of one query embedding each.
            ``None`` (default) batches only for a ``GravityEmbedding``, whose query and text
            embeddings are the same; leave it off for models that embed queries differently from
            documents (instruction-prefixed models).
        policy: how the expansions' hits join the question's (default: the shipped policy, the one
            ``gravity eval`` measures).
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
        host, per_user = _checked_retriever(provider, retriever)
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self._retriever = host
        self._user_retriever = per_user
        self._provider = provider
        self._similarity_top_k = similarity_top_k
        found = getattr(host, "_embed_model", None)  # VectorIndexRetriever keeps it there
        self._embed_model = embed_model or (found if isinstance(found, BaseEmbedding) else None)
        self._batch_embed = (
            isinstance(self._embed_model, GravityEmbedding) if batch_embed is None else batch_embed
        )
        self._policy = policy
        self._question_date = as_question_date(question_date)

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
        **retriever_kwargs: Any,
    ) -> GravityFusionRetriever:
        """Wrap ``index.as_retriever(similarity_top_k=per_query_top_k, **retriever_kwargs)``.

        With ``users``, each query's searches run on ``index.as_retriever(similarity_top_k=
        per_query_top_k, filters=<user_filters(user_id) AND filters>, **retriever_kwargs)``, made
        for the query's user.

        Args:
            index: the host's index, e.g. a ``VectorStoreIndex`` on Chroma.
            engine: a GRAVITY engine or a shared :class:`AnchorProvider`; not together with ``users``.
            users: the KBs of many users (see the class docstring).
            user_filters: with ``users`` (required then, also with a shared
                ``AnchorProvider(users=...)`` as ``engine``), the metadata filters of a user's nodes
                in the index, made from the user id, e.g. ``lambda user_id: MetadataFilters(
                filters=[ExactMatchFilter(key="user_id", value=user_id)])``; they are joined by AND
                with ``filters`` passed here.
            similarity_top_k: how many fused nodes are returned.
            per_query_top_k: how many nodes each search returns (default: ``similarity_top_k``).
            embed_model: the query embedding model (default: the index's; with ``users``, none:
                LlamaIndex has no public accessor for the index's model, so pass it here to embed
                each query once and reuse the vectors the build stored, else each user's retriever
                embeds its queries itself).
            batch_embed: see the class docstring.
            policy: see the class docstring.
            question_date: see the class docstring.
            **retriever_kwargs: passed to ``as_retriever`` (``filters``, ``vector_store_query_mode``...).
        """
        per_query = per_query_top_k or similarity_top_k
        provider = as_provider(engine, users=users)
        restrict = _checked_user_filters(provider.users is not None, user_filters)
        inner: BaseRetriever | UserRetriever
        if restrict is None:
            inner = index.as_retriever(similarity_top_k=per_query, **retriever_kwargs)
        else:
            inner = _user_retriever(index, restrict, per_query, retriever_kwargs)
        return cls(
            inner,
            provider,
            similarity_top_k=similarity_top_k,
            embed_model=embed_model,
            batch_embed=batch_embed,
            policy=policy,
            question_date=question_date,
        )

    @property
    def retriever(self) -> BaseRetriever:
        """The wrapped host retriever.

        Raises:
            ConfigurationError: with ``users=``, where each user has their own
                (:meth:`retriever_for`).
        """
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
            assert self._retriever is not None  # one of the two is set in __init__
            return self._retriever
        if user_id is None:
            raise ConfigurationError(MISSING_USER_ID)
        made = self._user_retriever(user_id)
        if not isinstance(made, BaseRetriever):
            raise ConfigurationError(
                f"the retriever function must return a LlamaIndex BaseRetriever for user {user_id!r}, "
                f"got {type(made).__name__}"
            )
        return made

    @property
    def provider(self) -> AnchorProvider:
        """Where the anchors and expansions come from."""
        return self._provider

    @property
    def question_date(self) -> date | None:
        """The date this retriever's questions are asked, unless the bundle says otherwise."""
        return self._question_date

    def _asked(self, bundle: QueryBundle) -> date | None:
        """The bundle's date, else this retriever's (``None``: the provider's)."""
        given = question_date_of(bundle)
        return given if given is not None else self._question_date

    def _get_prompt_modules(self) -> PromptMixinType:
        return {} if self._retriever is None else {"retriever": self._retriever}

    # -- the query's user ---------------------------------------------------------------------

    def _scope(self, bundle: QueryBundle) -> tuple[AnchorProvider, BaseRetriever]:
        """The provider answering the query and the retriever it searches (the user's, with ``users=``)."""
        user_id = user_id_of(bundle)
        return self._provider.for_user(user_id), self.retriever_for(user_id)

    async def _ascope(self, bundle: QueryBundle) -> tuple[AnchorProvider, BaseRetriever]:
        user_id = user_id_of(bundle)
        return await self._provider.afor_user(user_id), self.retriever_for(user_id)

    # -- queries ------------------------------------------------------------------------------

    def _given_queries(self, bundle: QueryBundle) -> list[str] | None:
        """The queries a transform already attached, or ``None`` when the engine must be asked."""
        if bundle.custom_embedding_strs is None:
            return None
        queries = merge_queries([bundle.query_str], list(bundle.custom_embedding_strs))
        return queries if len(queries) > 1 else None

    def _shares_engine_embedder(self, provider: AnchorProvider) -> bool:
        model = self._embed_model
        wrapped = model.embedder if isinstance(model, GravityEmbedding) else None
        return shares_vectors(provider.engine.embedder, wrapped=wrapped, model=model)

    def _plan(self, bundle: QueryBundle, provider: AnchorProvider) -> tuple[list[str], dict[str, Embedding]]:
        known: dict[str, Embedding] = {}
        if bundle.embedding is not None:
            known[bundle.query_str] = list(bundle.embedding)
        queries = self._given_queries(bundle)
        if queries is None:
            if self._shares_engine_embedder(provider) and bundle.query_str not in known:
                known.update(self._embed([bundle.query_str]))
            context = provider.get(
                bundle.query_str,
                query_embedding=self._engine_vector(provider, bundle, known),
                question_date=self._asked(bundle),
            )
            queries = merge_queries([bundle.query_str], context.expansions)
        known.update(self._stored(provider, queries, known))
        missing = [q for q in queries if q not in known]
        known.update(self._embed(missing))
        return queries, known

    async def _aplan(
        self, bundle: QueryBundle, provider: AnchorProvider
    ) -> tuple[list[str], dict[str, Embedding]]:
        known: dict[str, Embedding] = {}
        if bundle.embedding is not None:
            known[bundle.query_str] = list(bundle.embedding)
        queries = self._given_queries(bundle)
        if queries is None:
            if self._shares_engine_embedder(provider) and bundle.query_str not in known:
                known.update(await self._aembed([bundle.query_str]))
            vector = self._engine_vector(provider, bundle, known)
            context = await provider.aget(
                bundle.query_str, query_embedding=vector, question_date=self._asked(bundle)
            )
            queries = merge_queries([bundle.query_str], context.expansions)
        known.update(self._stored(provider, queries, known))
        missing = [q for q in queries if q not in known]
        known.update(await self._aembed(missing))
        return queries, known

    def _stored(
        self, provider: AnchorProvider, queries: list[str], known: dict[str, Embedding]
    ) -> dict[str, Embedding]:
        """Vectors the build stored for these queries, when the index embeds with the KB's embedder."""
        if not self._shares_engine_embedder(provider):
            return {}
        rest = [q for q in queries if q not in known]
        stored = provider.engine.known_expansion_vectors(rest)
        return {q: v.tolist() for q, v in zip(rest, stored, strict=True) if v is not None}

    def _engine_vector(
        self, provider: AnchorProvider, bundle: QueryBundle, known: dict[str, Embedding]
    ) -> Embedding | None:
        return known.get(bundle.query_str) if self._shares_engine_embedder(provider) else None

    def _embed(self, queries: list[str]) -> dict[str, Embedding]:
        model = self._embed_model
        if model is None or not queries:
            return {}
        if self._batch_embed:
            vectors = model.get_text_embedding_batch(queries)
        else:
            vectors = [model.get_query_embedding(q) for q in queries]
        return dict(zip(queries, vectors, strict=True))

    async def _aembed(self, queries: list[str]) -> dict[str, Embedding]:
        model = self._embed_model
        if model is None or not queries:
            return {}
        if self._batch_embed:
            vectors = await model.aget_text_embedding_batch(queries)
        else:
            vectors = list(await asyncio.gather(*(model.aget_query_embedding(q) for q in queries)))
        return dict(zip(queries, vectors, strict=True))

    @staticmethod
    def _search_bundle(query: str, known: dict[str, Embedding]) -> QueryBundle:
        # A fresh bundle per search: VectorIndexRetriever writes the embedding back onto the bundle.
        return QueryBundle(query_str=query, embedding=known.get(query))

    def _log(self, bundle: QueryBundle, queries: list[str]) -> None:
        level = logging.INFO if self._verbose else logging.DEBUG
        user = user_id_of(bundle)
        whose = f" of user {user}" if user is not None else ""
        logger.log(level, "%d queries for %r%s: %s", len(queries), bundle.query_str, whose, queries)

    # -- retrieval ----------------------------------------------------------------------------

    @dispatcher.span
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        provider, host = self._scope(query_bundle)
        queries, known = self._plan(query_bundle, provider)
        self._log(query_bundle, queries)
        results = [host.retrieve(self._search_bundle(queries[0], known))]

        def search(n: int) -> list[NodeWithScore]:
            results.append(host.retrieve(self._search_bundle(queries[n + 1], known)))
            return results[-1]

        # The expansions in order, only while the merge can still place their hits.
        merged, searched = self._policy.merge_searching(
            queries[0], results[0], queries[1:], search, _node_id, top_n=self._similarity_top_k
        )
        logger.debug("searched %d of %d expanded queries", searched, len(queries) - 1)
        return [_explained(hit, _host_score(hit, results)) for hit in merged]

    @dispatcher.span
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        provider, host = await self._ascope(query_bundle)
        queries, known = await self._aplan(query_bundle, provider)
        self._log(query_bundle, queries)
        results = await asyncio.gather(*(host.aretrieve(self._search_bundle(q, known)) for q in queries))
        return self._merge(queries, results)

    def _merge(self, queries: list[str], results: Sequence[Sequence[NodeWithScore]]) -> list[NodeWithScore]:
        merged = self._policy.merge(
            queries[0],
            results[0],
            queries[1:],
            results[1:],
            _node_id,
            top_n=self._similarity_top_k,
        )
        return [_explained(hit, _host_score(hit, results)) for hit in merged]


def _node_id(item: NodeWithScore) -> str:
    return item.node.node_id


def _user_retriever(
    index: BaseIndex[Any], user_filters: UserFilters, top_k: int, retriever_kwargs: dict[str, Any]
) -> UserRetriever:
    """A function making the user's ``index.as_retriever``: the user's filters AND the given ones."""
    given = retriever_kwargs.get("filters")
    if given is not None and not isinstance(given, MetadataFilters):
        raise ConfigurationError(f"filters must be MetadataFilters, got {type(given).__name__}")
    rest = {key: value for key, value in retriever_kwargs.items() if key != "filters"}

    def for_user(user_id: str) -> BaseRetriever:
        own = user_filters(user_id)
        if not isinstance(own, MetadataFilters):
            raise ConfigurationError(
                f"user_filters({user_id!r}) must return MetadataFilters, got {type(own).__name__}"
            )
        return index.as_retriever(similarity_top_k=top_k, filters=_all_of(given, own), **rest)

    return for_user


def _host_score(hit: MergedHit[NodeWithScore], results: Sequence[Sequence[NodeWithScore]]) -> float:
    """The host's score of the hit: the question's for a question place, else the best of its searches.

    ``results[0]`` is the question's list, ``results[n]`` expansion ``n``'s; ``found_by`` gives each
    query's number and the node's rank (from 1) in its list. The fused score stands in when no
    search gave one.
    """
    found = hit.found_by
    if hit.slot == "question":
        found = tuple(f for f in found if f.query == "question") or found
    scores = [results[f.index][f.rank - 1].score for f in found]
    given = [float(s) for s in scores if s is not None]
    return max(given) if given else hit.score


def _explained(hit: MergedHit[NodeWithScore], score: float) -> NodeWithScore:
    """A copy of the hit's node carrying why it is there (not shown to the LLM or the embedder)."""
    node = hit.item.node
    why = hit.metadata()
    copy = node.model_copy(
        update={
            "metadata": {**node.metadata, **why},
            "excluded_llm_metadata_keys": list(dict.fromkeys([*node.excluded_llm_metadata_keys, *why])),
            "excluded_embed_metadata_keys": list(dict.fromkeys([*node.excluded_embed_metadata_keys, *why])),
        }
    )
    return NodeWithScore(node=copy, score=score)
