"""A retriever that runs the question and each GRAVITY expansion as its own search, fused by rank."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.indices.base import BaseIndex
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.prompts.mixin import PromptMixinType
from llama_index.core.schema import NodeWithScore, QueryBundle

from gravity_core.context_policy import DEFAULT_POLICY, ContextPolicy, MergedHit
from gravity_core.errors import ConfigurationError
from gravity_core.fusion import reciprocal_rank_fusion as core_rrf
from gravity_core.query.question_date import as_question_date
from gravity_llamaindex.embeddings import GravityEmbedding
from gravity_llamaindex.provider import AnchorProvider, EngineLike, as_provider
from gravity_llamaindex.transform import merge_queries, question_date_of

__all__ = ["DEFAULT_RRF_K", "GravityFusionRetriever", "reciprocal_rank_fusion"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_RRF_K = 60
"""The usual reciprocal-rank constant (Cormack et al. 2009; LlamaIndex and LangChain use it too)."""

DEFAULT_TOP_K = 10


def reciprocal_rank_fusion(
    results: Sequence[Sequence[NodeWithScore]], *, k: int = DEFAULT_RRF_K, top_n: int | None = None
) -> list[NodeWithScore]:
    """Fuse ranked lists: each node scores ``sum(1 / (k + rank))`` over the lists it appears in.

    Store scores are ignored, because their direction and scale differ by backend (Chroma reports
    ``exp(-distance)``, others cosine). Nodes are deduplicated by ``node_id``; ties keep the order in
    which nodes were first met, so the earlier lists (the original question first) win them.

    Args:
        results: one ranked list per search, best first.
        k: the rank constant; larger values flatten the difference between ranks.
        top_n: how many fused nodes to return (all when ``None``).

    Returns:
        New ``NodeWithScore`` objects (the inputs are not modified) with the fused score, best first.
    """
    fused = core_rrf(results, lambda item: item.node.node_id, c=k, top_n=top_n)
    return [NodeWithScore(node=item.node, score=score) for item, score in fused]


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
       one after another in :meth:`retrieve`, concurrently (``asyncio.gather``) in :meth:`aretrieve`.
    4. merges the lists by the :class:`~gravity_core.context_policy.ContextPolicy` (deduplicated
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

    Args:
        retriever: the host's retriever, e.g. ``index.as_retriever(similarity_top_k=10)``.
        engine: a GRAVITY engine, or an :class:`AnchorProvider` shared with the other components.
        similarity_top_k: how many fused nodes are returned.
        embed_model: the model that embeds the queries (default: the wrapped retriever's, when it
            has one, as ``VectorIndexRetriever`` does). Without one, each search gets the bare query
            text and the retriever embeds it itself (needed for keyword retrievers such as BM25).
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

    Example:
        ```python
        retriever = GravityFusionRetriever.from_index(index, engine, similarity_top_k=8)
        query_engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
        ```
    """

    def __init__(
        self,
        retriever: BaseRetriever,
        engine: EngineLike,
        *,
        similarity_top_k: int = DEFAULT_TOP_K,
        embed_model: BaseEmbedding | None = None,
        batch_embed: bool | None = None,
        policy: ContextPolicy = DEFAULT_POLICY,
        question_date: date | datetime | str | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if not isinstance(retriever, BaseRetriever):
            raise ConfigurationError(f"expected a LlamaIndex BaseRetriever, got {type(retriever).__name__}")
        if similarity_top_k < 1:
            raise ConfigurationError(f"similarity_top_k must be >= 1, got {similarity_top_k}")
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self._retriever = retriever
        self._provider = as_provider(engine)
        self._similarity_top_k = similarity_top_k
        found = getattr(retriever, "_embed_model", None)  # VectorIndexRetriever keeps it there
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
        engine: EngineLike,
        *,
        similarity_top_k: int = DEFAULT_TOP_K,
        per_query_top_k: int | None = None,
        embed_model: BaseEmbedding | None = None,
        batch_embed: bool | None = None,
        policy: ContextPolicy = DEFAULT_POLICY,
        question_date: date | datetime | str | None = None,
        **retriever_kwargs: Any,
    ) -> GravityFusionRetriever:
        """Wrap ``index.as_retriever(similarity_top_k=per_query_top_k, **retriever_kwargs)``.

        Args:
            index: the host's index, e.g. a ``VectorStoreIndex`` on Chroma.
            engine: a GRAVITY engine or a shared :class:`AnchorProvider`.
            similarity_top_k: how many fused nodes are returned.
            per_query_top_k: how many nodes each search returns (default: ``similarity_top_k``).
            embed_model: the query embedding model (default: the index's).
            batch_embed: see the class docstring.
            policy: see the class docstring.
            question_date: see the class docstring.
            **retriever_kwargs: passed to ``as_retriever`` (``filters``, ``vector_store_query_mode``...).
        """
        per_query = per_query_top_k or similarity_top_k
        inner = index.as_retriever(similarity_top_k=per_query, **retriever_kwargs)
        return cls(
            inner,
            engine,
            similarity_top_k=similarity_top_k,
            embed_model=embed_model,
            batch_embed=batch_embed,
            policy=policy,
            question_date=question_date,
        )

    @property
    def retriever(self) -> BaseRetriever:
        """The wrapped host retriever."""
        return self._retriever

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
        return {"retriever": self._retriever}

    # -- queries ------------------------------------------------------------------------------

    def _given_queries(self, bundle: QueryBundle) -> list[str] | None:
        """The queries a transform already attached, or ``None`` when the engine must be asked."""
        if bundle.custom_embedding_strs is None:
            return None
        queries = merge_queries([bundle.query_str], list(bundle.custom_embedding_strs))
        return queries if len(queries) > 1 else None

    def _shares_engine_embedder(self) -> bool:
        model = self._embed_model
        return (
            isinstance(model, GravityEmbedding) and model.embedder.name == self._provider.engine.embedder.name
        )

    def _plan(self, bundle: QueryBundle) -> tuple[list[str], dict[str, Embedding]]:
        known: dict[str, Embedding] = {}
        if bundle.embedding is not None:
            known[bundle.query_str] = list(bundle.embedding)
        queries = self._given_queries(bundle)
        if queries is None:
            if self._shares_engine_embedder() and bundle.query_str not in known:
                known.update(self._embed([bundle.query_str]))
            context = self._provider.get(
                bundle.query_str,
                query_embedding=self._engine_vector(bundle, known),
                question_date=self._asked(bundle),
            )
            queries = merge_queries([bundle.query_str], context.expansions)
        known.update(self._stored(queries, known))
        missing = [q for q in queries if q not in known]
        known.update(self._embed(missing))
        return queries, known

    async def _aplan(self, bundle: QueryBundle) -> tuple[list[str], dict[str, Embedding]]:
        known: dict[str, Embedding] = {}
        if bundle.embedding is not None:
            known[bundle.query_str] = list(bundle.embedding)
        queries = self._given_queries(bundle)
        if queries is None:
            if self._shares_engine_embedder() and bundle.query_str not in known:
                known.update(await self._aembed([bundle.query_str]))
            vector = self._engine_vector(bundle, known)
            context = await self._provider.aget(
                bundle.query_str, query_embedding=vector, question_date=self._asked(bundle)
            )
            queries = merge_queries([bundle.query_str], context.expansions)
        known.update(self._stored(queries, known))
        missing = [q for q in queries if q not in known]
        known.update(await self._aembed(missing))
        return queries, known

    def _stored(self, queries: list[str], known: dict[str, Embedding]) -> dict[str, Embedding]:
        """Vectors the build stored for these queries, when the index embeds with the KB's embedder."""
        if not self._shares_engine_embedder():
            return {}
        rest = [q for q in queries if q not in known]
        stored = self._provider.engine.known_expansion_vectors(rest)
        return {q: v.tolist() for q, v in zip(rest, stored, strict=True) if v is not None}

    def _engine_vector(self, bundle: QueryBundle, known: dict[str, Embedding]) -> Embedding | None:
        return known.get(bundle.query_str) if self._shares_engine_embedder() else None

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
        logger.log(level, "%d searches for %r: %s", len(queries), bundle.query_str, queries)

    # -- retrieval ----------------------------------------------------------------------------

    @dispatcher.span
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        queries, known = self._plan(query_bundle)
        self._log(query_bundle, queries)
        results = [self._retriever.retrieve(self._search_bundle(q, known)) for q in queries]
        return self._merge(queries, results)

    @dispatcher.span
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        queries, known = await self._aplan(query_bundle)
        self._log(query_bundle, queries)
        results = await asyncio.gather(
            *(self._retriever.aretrieve(self._search_bundle(q, known)) for q in queries)
        )
        return self._merge(queries, results)

    def _merge(self, queries: list[str], results: Sequence[Sequence[NodeWithScore]]) -> list[NodeWithScore]:
        merged = self._policy.merge(
            queries[0],
            results[0],
            queries[1:],
            results[1:],
            lambda item: item.node.node_id,
            top_n=self._similarity_top_k,
        )
        return [_explained(hit, _host_score(hit, results)) for hit in merged]


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
