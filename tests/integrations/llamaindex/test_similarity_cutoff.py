"""A similarity cutoff after GravityFusionRetriever cuts where it cuts the host's own results (#16).

The fusion retriever used to give each node its reciprocal-rank score (0.016-0.16), so
``SimilarityPostprocessor(similarity_cutoff=0.5)`` dropped every memory. A node now keeps the host's
score (the question's, in the question's places); the fused score stays in ``gravity_score``.
"""

from __future__ import annotations

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.schema import TextNode

from gravity_core.context.policy import ContextPolicy
from gravity_core.embeddings import HashingEmbedder
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.schema import Utterance
from gravity_llamaindex import GravityEmbedding, GravityFusionRetriever

from .conftest import QUESTION
from .fakes import ScriptedRetriever

EARLY = ContextPolicy(lead=1, every=2, depth=2)  # question, question, expansion, expansion, ...


def test_a_half_cutoff_keeps_the_hosts_good_hits(engine: GravityEngine, context: AnchorContext) -> None:
    # The scripted host scores "shared" 0.5 and "only:<query>" 0.9 for every query.
    nodes = GravityFusionRetriever(ScriptedRetriever(), engine, similarity_top_k=4, policy=EARLY).retrieve(
        QUESTION
    )
    kept = SimilarityPostprocessor(similarity_cutoff=0.5).postprocess_nodes(nodes)
    assert [n.node.node_id for n in kept] == [n.node.node_id for n in nodes] and len(kept) == 4
    assert {n.node.node_id: n.score for n in nodes} == {
        "shared": 0.5,
        f"only:{QUESTION}": 0.9,
        f"only:{context.expansions[0]}": 0.9,  # an expansion's hit: the host's score for that expansion
        f"only:{context.expansions[1]}": 0.9,
    }
    assert [
        n.node.node_id for n in SimilarityPostprocessor(similarity_cutoff=0.6).postprocess_nodes(nodes)
    ] == [n.node.node_id for n in nodes if n.node.node_id != "shared"]


def test_the_fused_score_and_the_searches_stay_in_the_metadata(
    engine: GravityEngine, context: AnchorContext
) -> None:
    nodes = GravityFusionRetriever(ScriptedRetriever(), engine, similarity_top_k=4, policy=EARLY).retrieve(
        QUESTION
    )
    shared = next(n for n in nodes if n.node.node_id == "shared")
    assert shared.node.metadata["gravity_score"] == pytest.approx((1 + len(context.expansions)) / 61)
    assert shared.node.metadata["gravity_slot"] == "question"
    assert [f["text"] for f in shared.node.metadata["gravity_found_by"]] == [QUESTION, *context.expansions]
    added = nodes[2]
    assert added.node.metadata["gravity_slot"] == "expansion"
    assert added.node.metadata["gravity_score"] == pytest.approx(1 / 62)


def test_on_a_vector_index_the_question_places_carry_the_plain_retrievers_scores(
    engine: GravityEngine, utterances: list[Utterance], hashing: HashingEmbedder
) -> None:
    nodes = [TextNode(id_=u.id, text=f"{u.speaker}: {u.text}") for u in utterances]
    index = VectorStoreIndex(nodes, embed_model=GravityEmbedding(hashing))
    plain = {n.node.node_id: n.score for n in index.as_retriever(similarity_top_k=12).retrieve(QUESTION)}
    fused = GravityFusionRetriever.from_index(index, engine, similarity_top_k=12, policy=EARLY).retrieve(
        QUESTION
    )
    question_places = [n for n in fused if n.node.metadata["gravity_slot"] == "question"]
    assert question_places and all(n.score == pytest.approx(plain[n.node.node_id]) for n in question_places)
    assert any(n.node.metadata["gravity_slot"] == "expansion" for n in fused)

    cutoff = sorted(plain.values())[len(plain) // 2]
    kept = SimilarityPostprocessor(similarity_cutoff=cutoff).postprocess_nodes(fused)
    # Every node the host itself would keep at this cutoff, among the question's places, is kept.
    assert {n.node.node_id for n in question_places if plain[n.node.node_id] >= cutoff} <= {
        n.node.node_id for n in kept
    }
    assert kept and all(n.score is not None and n.score >= cutoff for n in kept)
