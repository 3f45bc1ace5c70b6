"""GravityFusionRetriever: one search per query, fusion by reciprocal rank, embedding calls, async."""

from __future__ import annotations

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from gravity_core.build import AnchorBuilder
from gravity_core.context.policy import DEFAULT_POLICY, EXPANDING_POLICY, ContextPolicy
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.schema import Utterance
from gravity_llamaindex import (
    AnchorProvider,
    GravityEmbedding,
    GravityFusionRetriever,
    nodes_from_utterances,
    reciprocal_rank_fusion,
)
from tests.spies import EmbedderSpy

from .conftest import QUESTION, same_vector, vector_of
from .fakes import CountingEmbedding, CountingGravityEmbedding, ScriptedRetriever


def _nodes(*ids: str, score: float = 0.5) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=i, text=i), score=score) for i in ids]


# -- reciprocal rank fusion ---------------------------------------------------------------------


def test_rrf_orders_by_summed_reciprocal_rank_and_ignores_store_scores() -> None:
    lists = [_nodes("a", "b", "c"), _nodes("b", "d"), _nodes("b", "a")]
    lists[0][2].score = 100.0  # a huge store score must not matter
    fused = reciprocal_rank_fusion(lists, c=60)
    assert [n.node.node_id for n in fused] == ["b", "a", "d", "c"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61 + 1 / 61)
    assert fused[-1].score == pytest.approx(1 / 63)


def test_rrf_dedupes_by_node_id_within_and_across_lists() -> None:
    lists = [_nodes("a", "a", "b"), _nodes("b")]
    fused = reciprocal_rank_fusion(lists)
    assert [n.node.node_id for n in fused] == ["b", "a"]
    assert fused[1].score == pytest.approx(1 / 61)  # the repeat inside list 1 is not counted


def test_rrf_ties_keep_the_order_first_met_and_top_n_cuts() -> None:
    lists = [_nodes("x", "y"), _nodes("y", "x"), _nodes("z")]
    assert [n.node.node_id for n in reciprocal_rank_fusion(lists)] == ["x", "y", "z"]
    assert [n.node.node_id for n in reciprocal_rank_fusion(lists, top_n=1)] == ["x"]


def test_rrf_does_not_modify_its_inputs() -> None:
    lists = [_nodes("a", score=0.25)]
    reciprocal_rank_fusion(lists)
    assert lists[0][0].score == 0.25


# -- searches -----------------------------------------------------------------------------------


def test_question_and_each_expansion_run_as_separate_searches_with_their_own_vectors(
    engine: GravityEngine, context: AnchorContext, hashing: HashingEmbedder
) -> None:
    host = ScriptedRetriever()
    retriever = GravityFusionRetriever(
        host, engine, embed_model=GravityEmbedding(hashing), policy=EXPANDING_POLICY
    )
    retriever.retrieve(QUESTION)
    expected = [QUESTION, *context.expansions]
    assert [b.query_str for b in host.bundles] == expected
    for bundle in host.bundles:
        assert bundle.custom_embedding_strs is None  # nothing for the host to average
        assert same_vector(bundle.embedding, vector_of(hashing, bundle.query_str))


def test_the_question_leads_and_each_node_says_which_searches_found_it(
    engine: GravityEngine, context: AnchorContext
) -> None:
    nodes = GravityFusionRetriever(
        ScriptedRetriever(), engine, similarity_top_k=3, policy=EXPANDING_POLICY
    ).retrieve(QUESTION)
    # The paper's expansions: the question's own hits first; an expansion's best hit ("shared") is
    # already placed, so nothing is added.
    assert [n.node.node_id for n in nodes] == ["shared", f"only:{QUESTION}"]
    shared = nodes[0]
    assert shared.score == 0.5  # the host's score for the question; the fused score is in metadata
    assert shared.node.metadata["gravity_score"] == pytest.approx((1 + len(context.expansions)) / 61)
    found = shared.node.metadata["gravity_found_by"]
    assert [f["text"] for f in found] == [QUESTION, *context.expansions]
    assert shared.node.metadata["gravity_slot"] == "question"
    # Why it is there is not shown to the LLM.
    assert "gravity_found_by" not in shared.node.get_content(metadata_mode=MetadataMode.LLM)
    # The shipped policy searches the question only: the same nodes, found by the question alone.
    shipped = GravityFusionRetriever(ScriptedRetriever(), engine, similarity_top_k=3).retrieve(QUESTION)
    assert [n.node.node_id for n in shipped] == ["shared", f"only:{QUESTION}"]
    assert [f["text"] for f in shipped[0].node.metadata["gravity_found_by"]] == [QUESTION]
    assert shipped[0].node.metadata["gravity_score"] == pytest.approx(1 / 61)


def test_expansions_take_the_policys_places(engine: GravityEngine, context: AnchorContext) -> None:
    policy = ContextPolicy(lead=1, every=1, depth=2)
    retriever = GravityFusionRetriever(ScriptedRetriever(), engine, similarity_top_k=3, policy=policy)
    nodes = retriever.retrieve(QUESTION)
    first, second = context.expansions[:2]
    assert [n.node.node_id for n in nodes] == ["shared", f"only:{first}", f"only:{second}"]
    assert [n.node.metadata["gravity_slot"] for n in nodes] == ["question", "expansion", "expansion"]


def test_without_an_embedding_model_the_host_embeds_the_bare_query(engine: GravityEngine) -> None:
    host = ScriptedRetriever()
    GravityFusionRetriever(host, engine).retrieve(QUESTION)
    assert host.bundles and all(
        b.embedding is None and b.embedding_strs == [b.query_str] for b in host.bundles
    )


def test_expansions_from_the_transform_are_used_without_asking_the_engine(
    engine: GravityEngine, engine_calls: list[str]
) -> None:
    host = ScriptedRetriever()
    bundle = QueryBundle(
        QUESTION, custom_embedding_strs=[QUESTION, "Biscuit the dog", "biscuit THE dog", "Theo"]
    )
    GravityFusionRetriever(host, engine, policy=EXPANDING_POLICY).retrieve(bundle)
    assert [b.query_str for b in host.bundles] == [QUESTION, "Biscuit the dog", "Theo"]
    assert engine_calls == []
    # The shipped policy places no expansion, a transform's neither: the question is searched alone.
    host = ScriptedRetriever()
    GravityFusionRetriever(host, engine).retrieve(bundle)
    assert [b.query_str for b in host.bundles] == [QUESTION]
    assert engine_calls == []


def test_a_bundle_holding_only_the_question_asks_the_engine(
    engine: GravityEngine, context: AnchorContext, engine_calls: list[str]
) -> None:
    host = ScriptedRetriever()
    GravityFusionRetriever(host, engine, policy=EXPANDING_POLICY).retrieve(
        QueryBundle(QUESTION, custom_embedding_strs=[QUESTION])
    )
    assert engine_calls == [QUESTION]
    assert len(host.bundles) == 1 + len(context.expansions)


def test_a_precomputed_question_embedding_is_reused(engine: GravityEngine, hashing: HashingEmbedder) -> None:
    host = ScriptedRetriever()
    model = CountingEmbedding()
    given = [0.5] * hashing.dim
    GravityFusionRetriever(host, engine, embed_model=model).retrieve(QueryBundle(QUESTION, embedding=given))
    assert host.bundles[0].embedding == given
    assert model.counts["query"] == len(host.bundles) - 1


# -- embedding calls ----------------------------------------------------------------------------


def test_kb_embedder_embeds_the_question_first_shares_it_with_the_engine_then_batches_expansions(
    engine: GravityEngine, context: AnchorContext, hashing: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[object] = []
    real = engine.query

    def spy(question: str, **kwargs: object) -> AnchorContext:
        received.append(kwargs.get("query_embedding"))
        return real(question, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "query", spy)
    model = CountingGravityEmbedding(hashing)
    GravityFusionRetriever(ScriptedRetriever(), engine, embed_model=model, policy=EXPANDING_POLICY).retrieve(
        QUESTION
    )
    assert model.counts == {"query": 1, "batch": 1}  # the question, then all expansions in one batch
    assert len(received) == 1 and same_vector(received[0], vector_of(hashing, QUESTION))  # type: ignore[arg-type]


def test_other_models_get_one_query_embedding_per_query(
    engine: GravityEngine, context: AnchorContext
) -> None:
    model = CountingEmbedding()
    GravityFusionRetriever(ScriptedRetriever(), engine, embed_model=model, policy=EXPANDING_POLICY).retrieve(
        QUESTION
    )
    assert model.counts == {"query": 1 + len(context.expansions), "batch": 0}


def test_batch_embed_makes_one_text_batch_for_all_queries(
    engine: GravityEngine, context: AnchorContext
) -> None:
    model = CountingEmbedding(embed_batch_size=64)
    GravityFusionRetriever(ScriptedRetriever(), engine, embed_model=model, batch_embed=True).retrieve(
        QUESTION
    )
    assert model.counts == {"query": 0, "batch": 1}


def test_the_index_model_given_to_from_index_embeds_the_queries_in_two_requests(
    engine: GravityEngine, utterances: list[Utterance], hashing: HashingEmbedder
) -> None:
    model = CountingGravityEmbedding(hashing)
    index = VectorStoreIndex(nodes_from_utterances(utterances[:10]), embed_model=model)
    model.counts.update(query=0, batch=0)
    retriever = GravityFusionRetriever.from_index(
        index, engine, similarity_top_k=4, per_query_top_k=2, embed_model=model, policy=EXPANDING_POLICY
    )
    nodes = retriever.retrieve(QUESTION)
    assert model.counts == {"query": 1, "batch": 1}
    assert len(nodes) == 4
    assert retriever.retriever.similarity_top_k == 2  # type: ignore[attr-defined]


def test_without_a_model_each_search_embeds_its_own_query(
    engine: GravityEngine, utterances: list[Utterance], hashing: HashingEmbedder
) -> None:
    """LlamaIndex keeps an index's model private: without embed_model= the host embeds each query."""
    model = CountingGravityEmbedding(hashing)
    index = VectorStoreIndex(nodes_from_utterances(utterances[:10]), embed_model=model)
    model.counts.update(query=0, batch=0)
    policy = ContextPolicy(lead=1, every=2, depth=2)  # every expansion is searched
    retriever = GravityFusionRetriever.from_index(index, engine, similarity_top_k=4, policy=policy)
    retriever.retrieve(QUESTION)
    searched = 1 + len(engine.query(QUESTION).expansions)
    assert model.counts == {"query": searched, "batch": 0}


# -- async --------------------------------------------------------------------------------------


async def test_async_runs_all_searches_concurrently_and_agrees_with_sync(
    engine: GravityEngine, context: AnchorContext, hashing: HashingEmbedder
) -> None:
    provider = AnchorProvider(engine)
    host = ScriptedRetriever(delay=0.05)
    retriever = GravityFusionRetriever(
        host, provider, embed_model=GravityEmbedding(hashing), policy=EXPANDING_POLICY
    )
    fused_async = await retriever.aretrieve(QUESTION)
    assert host.max_in_flight == 1 + len(context.expansions)
    assert sorted(b.query_str for b in host.bundles) == sorted([QUESTION, *context.expansions])
    fused_sync = retriever.retrieve(QUESTION)
    assert [(n.node.node_id, n.score) for n in fused_async] == [(n.node.node_id, n.score) for n in fused_sync]


async def test_async_embeds_like_sync(
    engine: GravityEngine, context: AnchorContext, hashing: HashingEmbedder
) -> None:
    shared = CountingGravityEmbedding(hashing)
    await GravityFusionRetriever(
        ScriptedRetriever(), engine, embed_model=shared, policy=EXPANDING_POLICY
    ).aretrieve(QUESTION)
    assert shared.counts == {"query": 1, "batch": 1}
    other = CountingEmbedding()
    await GravityFusionRetriever(
        ScriptedRetriever(), engine, embed_model=other, policy=EXPANDING_POLICY
    ).aretrieve(QUESTION)
    assert other.counts == {"query": 1 + len(context.expansions), "batch": 0}


async def test_the_default_policy_neither_embeds_nor_searches_the_expansions(
    engine: GravityEngine,
    context: AnchorContext,
    hashing: HashingEmbedder,
    utterances: list[Utterance],
    engine_calls: list[str],
) -> None:
    """The shipped policy: GRAVITY still makes the expansions (it is asked once per question), but
    only the question is embedded and searched, sync and async, at the default top k and beyond
    the policy's lead, whatever the model."""
    assert DEFAULT_POLICY.every == 0 and context.expansions
    for top_k in (None, DEFAULT_POLICY.lead + 5):
        sized = {} if top_k is None else {"similarity_top_k": top_k}
        models: list[tuple[CountingEmbedding | CountingGravityEmbedding, bool | None, dict[str, int]]] = [
            (CountingGravityEmbedding(hashing), None, {"query": 1, "batch": 0}),  # shared with the engine
            (CountingEmbedding(), None, {"query": 1, "batch": 0}),
            (CountingEmbedding(), True, {"query": 0, "batch": 1}),
        ]
        for model, batch, embedded in models:
            host = ScriptedRetriever()
            retriever = GravityFusionRetriever(host, engine, embed_model=model, batch_embed=batch, **sized)
            engine_calls.clear()
            retriever.retrieve(QUESTION)
            assert [b.query_str for b in host.bundles] == [QUESTION]
            assert model.counts == embedded and engine_calls == [QUESTION]
            host.bundles.clear()
            model.counts.update(query=0, batch=0)
            await retriever.aretrieve(QUESTION)
            assert [b.query_str for b in host.bundles] == [QUESTION]
            assert model.counts["query"] == embedded["query"]  # (the fakes do not count async batches)
    # Over an index (fetching fewer nodes per search than are returned), sync and async.
    model = CountingGravityEmbedding(hashing)
    index = VectorStoreIndex(nodes_from_utterances(utterances[:10]), embed_model=model)
    retriever = GravityFusionRetriever.from_index(index, engine, per_query_top_k=2, embed_model=model)
    model.counts.update(query=0, batch=0)
    retriever.retrieve(QUESTION)
    await retriever.aretrieve(QUESTION)
    assert model.counts == {"query": 2, "batch": 0}


# -- arguments ----------------------------------------------------------------------------------


def test_bad_arguments_raise_configuration_errors(engine: GravityEngine) -> None:
    with pytest.raises(ConfigurationError, match="similarity_top_k"):
        GravityFusionRetriever(ScriptedRetriever(), engine, similarity_top_k=0)
    with pytest.raises(ConfigurationError, match="BaseRetriever"):
        GravityFusionRetriever("not a retriever", engine)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="GravityEngine"):
        GravityFusionRetriever(ScriptedRetriever(), "not an engine")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="constant must be >= 0"):
        reciprocal_rank_fusion([], c=-1)


async def test_expansion_vectors_stored_by_the_build_are_not_embedded_again(
    built: AnchorBuilder, hashing: HashingEmbedder
) -> None:
    engine = GravityEngine.from_builder(built)  # carries the build's expansion vectors
    expansions = engine.query(QUESTION).expansions
    known = engine.known_expansion_vectors(expansions)
    missing = [text for text, vector in zip(expansions, known, strict=True) if vector is None]
    assert len(missing) < len(expansions)

    for run in ("sync", "async"):
        spy = EmbedderSpy(hashing)  # same name as the KB's embedder, so it counts as shared
        host = ScriptedRetriever()
        retriever = GravityFusionRetriever(
            host, engine, embed_model=GravityEmbedding(spy), policy=EXPANDING_POLICY
        )
        if run == "sync":
            retriever.retrieve(QUESTION)
        else:
            await retriever.aretrieve(QUESTION)
        # the question, then only the expansions the build did not store
        assert spy.calls == [[QUESTION], *([missing] if missing else [])]
        for bundle in host.bundles:
            assert same_vector(bundle.embedding, vector_of(hashing, bundle.query_str))


def test_an_index_on_the_model_the_kb_was_built_with_embeds_the_question_once(
    utterances: list[Utterance],
) -> None:
    """A KB built with LlamaIndexEmbedder(model), queried through an index on that same model: the
    question's vector is the engine's too (one rule for both integrations: shares_vectors)."""
    from gravity_core.extract.offline import OfflineExtractor
    from gravity_llamaindex import LlamaIndexEmbedder

    model = CountingEmbedding()
    embedder = LlamaIndexEmbedder(model)
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder)
    builder.add(utterances)
    engine = GravityEngine.from_builder(builder)
    expansions = engine.query(QUESTION).expansions
    missing = [
        e for e, v in zip(expansions, engine.known_expansion_vectors(expansions), strict=True) if v is None
    ]
    before = dict(model.counts)
    GravityFusionRetriever(ScriptedRetriever(), engine, embed_model=model, policy=EXPANDING_POLICY).retrieve(
        QUESTION
    )
    # The host's model embeds the question once and the engine reuses that vector (no batch of its
    # own); the expansions the build stored are not embedded again.
    assert model.counts["batch"] == before["batch"]
    assert model.counts["query"] - before["query"] == 1 + len(missing)
