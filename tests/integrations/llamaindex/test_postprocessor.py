"""GravityNodePostprocessor: one marked anchor node first, metadata kept out, safe next to rerankers."""

from __future__ import annotations

import pytest
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from gravity_core.context.policy import ContextPolicy
from gravity_core.errors import ConfigurationError
from gravity_core.prompts.memories import memories_within
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.schema import AnchorKind
from gravity_llamaindex import (
    AnchorProvider,
    GravityNodePostprocessor,
    KeepGravityFirst,
    is_gravity_node,
)
from gravity_llamaindex.postprocessor import split_gravity_nodes

from .conftest import QUESTION


def _memories() -> list[NodeWithScore]:
    return [
        NodeWithScore(
            node=TextNode(id_="m1", text="Maya: Biscuit chewed my slippers.", metadata={"id": "m1"}),
            score=0.9,
        ),
        NodeWithScore(
            node=TextNode(id_="m2", text="Jonas: He loves the beach.", metadata={"id": "m2"}), score=0.4
        ),
    ]


class ReverseReranker(BaseNodePostprocessor):
    """Stands in for a reranker: reverses the order and records what it saw."""

    seen: list[str] = []

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        self.seen = [n.node.node_id for n in nodes]
        return list(reversed(nodes))


def test_anchor_node_is_prepended_with_score_one_and_a_marker(
    engine: GravityEngine, context: AnchorContext
) -> None:
    nodes = GravityNodePostprocessor(engine).postprocess_nodes(_memories(), query_str=QUESTION)
    assert [n.node.node_id for n in nodes[1:]] == ["m1", "m2"]
    first = nodes[0]
    assert is_gravity_node(first) and not any(is_gravity_node(n) for n in nodes[1:])
    assert first.score == 1.0
    assert first.node.metadata["gravity"] is True
    assert first.node.metadata["gravity_anchors"] == [f"{a.kind.value}:{a.id}" for a in context.anchors]


def test_anchor_node_metadata_stays_out_of_the_prompt_and_the_embedding(
    engine: GravityEngine, context: AnchorContext
) -> None:
    node = GravityNodePostprocessor(engine).postprocess_nodes([], query_str=QUESTION)[0].node
    assert set(node.excluded_llm_metadata_keys) == set(node.metadata)
    assert set(node.excluded_embed_metadata_keys) == set(node.metadata)
    assert node.get_content(MetadataMode.LLM) == context.text
    assert node.get_content(MetadataMode.EMBED) == context.text


def test_running_twice_keeps_one_anchor_node(engine: GravityEngine) -> None:
    postprocessor = GravityNodePostprocessor(engine)
    once = postprocessor.postprocess_nodes(_memories(), query_str=QUESTION)
    twice = postprocessor.postprocess_nodes(list(reversed(once)), query_str=QUESTION)
    assert [n.node.node_id for n in twice] == [once[0].node.node_id, "m2", "m1"]


def test_nothing_to_inject_lets_the_nodes_pass_unchanged(engine: GravityEngine) -> None:
    provider = AnchorProvider(engine, config=QueryConfig(modules=frozenset({AnchorKind.TOPIC}), k_topic=0))
    nodes = GravityNodePostprocessor(provider).postprocess_nodes(_memories(), query_str=QUESTION)
    assert [n.node.node_id for n in nodes] == ["m1", "m2"]


def test_the_query_is_required(engine: GravityEngine) -> None:
    with pytest.raises(ConfigurationError, match="needs the query"):
        GravityNodePostprocessor(engine).postprocess_nodes(_memories())


async def test_async_gives_the_same_nodes(engine: GravityEngine) -> None:
    postprocessor = GravityNodePostprocessor(engine)
    sync = postprocessor.postprocess_nodes(_memories(), query_str=QUESTION)
    asynchronous = await postprocessor.apostprocess_nodes(_memories(), query_str=QUESTION)
    assert [(n.node.node_id, n.score, n.node.get_content()) for n in asynchronous] == [
        (n.node.node_id, n.score, n.node.get_content()) for n in sync
    ]


def test_placed_last_the_anchor_node_stays_first_after_a_reranker(engine: GravityEngine) -> None:
    nodes = _memories()
    bundle = QueryBundle(QUESTION)
    for postprocessor in (ReverseReranker(), GravityNodePostprocessor(engine)):
        nodes = postprocessor.postprocess_nodes(nodes, query_bundle=bundle)
    assert is_gravity_node(nodes[0]) and [n.node.node_id for n in nodes[1:]] == ["m2", "m1"]


def test_a_reranker_after_it_moves_the_anchor_node_unless_wrapped(engine: GravityEngine) -> None:
    bundle = QueryBundle(QUESTION)
    anchored = GravityNodePostprocessor(engine).postprocess_nodes(_memories(), query_bundle=bundle)
    unshielded = ReverseReranker().postprocess_nodes(anchored, query_bundle=bundle)
    assert not is_gravity_node(unshielded[0])

    reranker = ReverseReranker()
    shielded = KeepGravityFirst(reranker).postprocess_nodes(anchored, query_bundle=bundle)
    assert is_gravity_node(shielded[0]) and [n.node.node_id for n in shielded[1:]] == ["m2", "m1"]
    assert reranker.seen == ["m1", "m2"]  # the reranker never saw the anchor node


async def test_keep_gravity_first_async(engine: GravityEngine) -> None:
    anchored = GravityNodePostprocessor(engine).postprocess_nodes(_memories(), query_str=QUESTION)
    shielded = await KeepGravityFirst(ReverseReranker()).apostprocess_nodes(anchored, query_str=QUESTION)
    assert is_gravity_node(shielded[0]) and [n.node.node_id for n in shielded[1:]] == ["m2", "m1"]


@pytest.mark.parametrize("budget", [300, 900, 1500])
def test_a_total_budget_is_shared_as_the_chain_shares_it(
    engine: GravityEngine, context: AnchorContext, budget: int
) -> None:
    policy = ContextPolicy(anchor_share=0.3, host_reserve=200, max_anchor_tokens=None)
    turns = [
        NodeWithScore(
            node=TextNode(id_=f"t{n}", text=f"Maya: turn {n} " + "words " * (n * 7 % 50)), score=1.0
        )
        for n in range(40)
    ]
    nodes = GravityNodePostprocessor(engine, total_budget=budget, policy=policy).postprocess_nodes(
        turns, query_str=QUESTION
    )
    anchors, memories = split_gravity_nodes(nodes)
    share = policy.share(budget, engine.config.token_budget)
    text, tokens = engine.fit_anchors(context, share.anchors)
    assert [a.node.get_content() for a in anchors] == ([text] if text else [])
    expected = memories_within(
        [t.node.get_content(metadata_mode=MetadataMode.LLM) for t in turns],
        budget - tokens,
        engine.counter.count,
    )
    assert [m.node.node_id for m in memories] == [f"t{n}" for n in expected]
    assert 0 < len(memories) < len(turns)
    shown = [m.node.get_content(metadata_mode=MetadataMode.LLM) for m in memories]
    assert tokens + sum(engine.counter.count(f"{item}\n") for item in shown) <= budget
    with pytest.raises(ConfigurationError, match="total_budget"):
        GravityNodePostprocessor(engine, total_budget=0)


def test_within_a_total_budget_fetched_turns_keep_their_source_place_only_within_the_policys_bounds(
    engine: GravityEngine,
) -> None:
    def node(node_id: str, words: int, slot: str, question_rank: int | None) -> NodeWithScore:
        found_by: list[dict[str, object]] = [
            {"query": "provenance", "index": 1, "text": "event:e1", "rank": 1}
        ]
        if question_rank is not None:
            found_by.insert(0, {"query": "question", "index": 0, "text": QUESTION, "rank": question_rank})
        metadata = {"gravity_slot": slot, "gravity_found_by": found_by}
        return NodeWithScore(node=TextNode(id_=node_id, text="Maya: " + "words " * words, metadata=metadata))

    # As the retriever merges them: source turns in the 2nd and 5th places.
    merged = [
        node("q1", 5, "question", 1),
        node("long_found", 120, "provenance", 3),
        node("q2", 5, "question", 2),
        node("q4", 5, "question", 4),
        node("long_alone", 120, "provenance", None),
        node("short", 5, "provenance", None),
    ]
    budget = 3000

    def kept(policy: ContextPolicy) -> list[str]:
        nodes = GravityNodePostprocessor(engine, total_budget=budget, policy=policy).postprocess_nodes(
            merged, query_str=QUESTION
        )
        return [m.node.node_id for m in split_gravity_nodes(nodes)[1]]

    assert kept(ContextPolicy(max_source_turn_share=1.0, max_sources_share=1.0)) == [
        n.node.node_id for n in merged
    ]
    # A long fetched turn goes back to where the question's search ranked it, or leaves.
    assert kept(ContextPolicy(max_source_turn_share=0.02)) == ["q1", "q2", "long_found", "q4", "short"]
