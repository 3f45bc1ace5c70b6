"""SGMem in LlamaIndex: the thin retriever, and GRAVITY + SGMem end to end.

``GravityFusionRetriever(SGMemRetriever(memory), engine)`` wraps SGMem unchanged: the question and
every expansion are separate SGMem searches, embedded once with SGMem's own embedder, fused by
rank; a query engine with GRAVITY's postprocessor puts the anchors and SGMem's chunks in the prompt.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.schema import MetadataMode, QueryBundle  # noqa: E402

from gravity_core.context.policy import ContextPolicy
from gravity_core.embeddings import HashingEmbedder  # noqa: E402
from gravity_core.errors import ConfigurationError  # noqa: E402
from gravity_core.query.engine import GravityEngine  # noqa: E402
from gravity_core.schema import Utterance  # noqa: E402
from gravity_core.sgmem import SGMem  # noqa: E402
from gravity_llamaindex import (  # noqa: E402
    AnchorProvider,
    GravityFusionRetriever,
    GravityNodePostprocessor,
    is_gravity_node,
)
from gravity_llamaindex.sgmem import SGMemRetriever  # noqa: E402
from tests.core.sgmem.test_gravity import QUESTION, engine_for  # noqa: E402
from tests.spies import EmbedderSpy  # noqa: E402


@pytest.fixture(scope="module")
def engine(hashing: HashingEmbedder, sample: list[Utterance]) -> GravityEngine:
    return engine_for(hashing, sample)


def ids(nodes: Sequence[object]) -> list[str]:
    return [n.node.node_id for n in nodes]  # type: ignore[attr-defined]


def test_nodes_carry_granularity_score_and_source_ids(sample_memory: SGMem) -> None:
    retriever = SGMemRetriever(sample_memory, similarity_top_k=3, granularity="session", token_budget=900)
    nodes = retriever.retrieve(QUESTION)
    result = sample_memory.retrieve(QUESTION, granularity="session", max_chunks=3, token_budget=900)
    assert ids(nodes) == [c.id for c in result.chunks]
    for node, chunk in zip(nodes, result.chunks, strict=True):
        assert node.score == pytest.approx(chunk.score)
        assert node.node.metadata["granularity"] == "session"
        assert node.node.metadata["utterance_ids"] == list(chunk.utterance_ids)
        assert node.node.get_content(MetadataMode.LLM) == chunk.text  # metadata stays out of prompts
    with pytest.raises(ConfigurationError):
        SGMemRetriever(sample_memory, similarity_top_k=0)
    with pytest.raises(ConfigurationError):
        SGMemRetriever(sample_memory, granularity="chapter")


async def test_a_bundle_embedding_is_used_when_it_fits(sample_memory: SGMem) -> None:
    retriever = SGMemRetriever(sample_memory, similarity_top_k=3)
    other = "pottery class at Kiln House"
    vector = list(map(float, sample_memory.embed_queries([other])[0]))
    by_vector = retriever.retrieve(QueryBundle(QUESTION, embedding=vector))
    assert ids(by_vector) == ids(retriever.retrieve(other))
    wrong_size = retriever.retrieve(QueryBundle(QUESTION, embedding=[0.1, 0.2]))
    assert ids(wrong_size) == ids(retriever.retrieve(QUESTION))
    assert ids(await retriever.aretrieve(QUESTION)) == ids(retriever.retrieve(QUESTION))


async def test_gravity_fusion_retriever_wraps_sgmem_unchanged(
    engine: GravityEngine, hashing: HashingEmbedder, sample: list[Utterance]
) -> None:
    spy = EmbedderSpy(hashing)
    memory = SGMem(spy)
    memory.add(sample)
    host = SGMemRetriever(memory, similarity_top_k=5, granularity="round")
    policy = ContextPolicy(lead=1, every=2)  # expansions take places early (the shipped policy: after 25)
    fusion = GravityFusionRetriever(host, engine, similarity_top_k=6, policy=policy)
    spy.calls.clear()
    nodes = fusion.retrieve(QUESTION)
    queries = [QUESTION, *engine.query(QUESTION).expansions]
    # Every query was embedded once, by SGMem's own embedder (through the retriever's embed model).
    assert sorted(t for call in spy.calls for t in call) == sorted(dict.fromkeys(queries))
    lists = [host.retrieve(q) for q in dict.fromkeys(queries)]
    unique = list(dict.fromkeys(queries))
    merged = policy.merge(QUESTION, lists[0], unique[1:], lists[1:], lambda n: n.node.node_id, top_n=6)
    assert ids(nodes) == [h.item.node.node_id for h in merged]
    assert all("/r" in node_id for node_id in ids(nodes))
    assert ids(await fusion.aretrieve(QUESTION)) == ids(nodes)
    assert set(ids(nodes)) != set(ids(host.retrieve(QUESTION)))  # the expansions brought in other rounds


async def test_query_engine_puts_anchors_and_sgmem_chunks_in_the_prompt(
    engine: GravityEngine, sample_memory: SGMem
) -> None:
    provider = AnchorProvider(engine)
    query_engine = RetrieverQueryEngine.from_args(
        GravityFusionRetriever(
            SGMemRetriever(sample_memory, similarity_top_k=4), provider, similarity_top_k=4
        ),
        llm=MockLLM(),
        node_postprocessors=[GravityNodePostprocessor(provider)],
    )
    response = query_engine.query(QUESTION)
    prompt = str(response)  # MockLLM answers with the prompt it received
    first, *chunks = response.source_nodes
    assert is_gravity_node(first) and first.node.get_content() in prompt
    assert len(chunks) == 4 and all(n.node.metadata["source"] == "sgmem" for n in chunks)
    for node in chunks:
        assert node.node.get_content(MetadataMode.LLM) in prompt
    again = await query_engine.aquery(QUESTION)
    assert str(again) == prompt
