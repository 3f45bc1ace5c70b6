"""GRAVITY on top of SGMem, end to end in gravity_core: expansions searched in SGMem, anchors in context."""

from __future__ import annotations

import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.context.policy import DEFAULT_POLICY, EXPANDING_POLICY, ContextPolicy
from gravity_core.embeddings import HashingEmbedder, MiniLMEmbedder
from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.prompts.injection import PRIORITY_INSTRUCTION
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import NumpyAnchorIndex
from gravity_core.schema import Utterance
from gravity_core.sgmem import RetrievalConfig, SGMem, SGMemWithGravity
from tests.spies import EmbedderSpy

QUESTION = "Where does Maya work now, and what happened with Biscuit?"


def engine_for(embedder: Embedder, utterances: list[Utterance]) -> GravityEngine:
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder)
    builder.add(utterances)
    return GravityEngine(builder.kb, NumpyAnchorIndex.from_vectors(builder.vectors), embedder)


@pytest.fixture(scope="module")
def engine(hashing: HashingEmbedder, sample: list[Utterance]) -> GravityEngine:
    return engine_for(hashing, sample)


def spied_memory(hashing: HashingEmbedder, sample: list[Utterance]) -> tuple[SGMem, EmbedderSpy]:
    """SGMem over the sample through an embedder that records its calls (the build's forgotten)."""
    spy = EmbedderSpy(hashing)
    memory = SGMem(spy)
    memory.add(sample)
    spy.calls.clear()
    return memory, spy


def test_expansions_are_searched_in_sgmem_and_anchors_lead_the_context(
    engine: GravityEngine, hashing: HashingEmbedder, sample: list[Utterance]
) -> None:
    memory, spy = spied_memory(hashing, sample)
    policy = ContextPolicy(lead=1, every=2)  # expansions take places early (EXPANDING_POLICY: after 25)
    both = SGMemWithGravity(memory, engine, policy=policy)
    result = both.retrieve(QUESTION, token_budget=500, granularity="round")
    expansions = engine.query(QUESTION).expansions
    assert expansions  # the sample KB gives this question several expansions
    assert result.queries == [QUESTION, *dict.fromkeys(e for e in expansions if e != QUESTION)]
    assert spy.calls == [result.queries]  # every query embedded by SGMem in one call
    # The chunks are SGMem's own fusion of those queries.
    fused = memory.retrieve_fused(result.queries, token_budget=500, granularity="round", policy=policy)
    assert [c.id for c in result.memory.chunks] == [c.id for c in fused.chunks]
    assert result.memory.tokens <= 500 and all(c.granularity.value == "round" for c in result.memory.chunks)
    # An expansion brings in a round the question alone does not rank as high.
    alone = memory.retrieve(QUESTION, token_budget=500, granularity="round")
    assert [c.id for c in result.memory.chunks] != [c.id for c in alone.chunks]
    assert result.anchors.anchors and result.anchors.text.startswith(PRIORITY_INSTRUCTION)
    assert result.text.startswith(result.anchors.text)
    assert result.text.endswith(result.memory.text)
    assert result.tokens == result.anchors.tokens + result.memory.tokens
    data = result.to_dict()
    assert data["results"] and data["anchors"]["anchors"] and data["queries"] == result.queries


def test_the_shipped_policy_neither_embeds_nor_searches_the_expansions(
    engine: GravityEngine, hashing: HashingEmbedder, sample: list[Utterance]
) -> None:
    memory, spy = spied_memory(hashing, sample)
    result = SGMemWithGravity(memory, engine).retrieve(QUESTION, token_budget=500, granularity="round")
    assert DEFAULT_POLICY.every == 0 and engine.query(QUESTION).expansions  # made, not searched
    assert result.queries == [QUESTION] and spy.calls == [[QUESTION]]
    alone = memory.retrieve(QUESTION, token_budget=500, granularity="round")
    assert [c.id for c in result.memory.chunks] == [c.id for c in alone.chunks]
    assert result.anchors.expansions and result.anchors.text.startswith(PRIORITY_INSTRUCTION)
    expanding = SGMemWithGravity(memory, engine, policy=EXPANDING_POLICY)
    assert len(expanding.retrieve(QUESTION, token_budget=500, granularity="round").queries) > 1


def test_without_expansions_it_is_sgmem_alone(engine: GravityEngine, sample_memory: SGMem) -> None:
    both = SGMemWithGravity(sample_memory, engine, max_expansions=0)
    result = both.retrieve(QUESTION, token_budget=400)
    alone = sample_memory.retrieve(QUESTION, token_budget=400)
    assert result.queries == [QUESTION]
    assert [c.id for c in result.memory.chunks] == [c.id for c in alone.chunks]
    with pytest.raises(ConfigurationError):
        SGMemWithGravity(sample_memory, engine, max_expansions=-1)


async def test_async_matches_sync(engine: GravityEngine, sample_memory: SGMem) -> None:
    both = SGMemWithGravity(sample_memory, engine)
    sync = both.retrieve(QUESTION, config=RetrievalConfig(token_budget=300))
    asynchronous = await both.aretrieve(QUESTION, config=RetrievalConfig(token_budget=300))
    assert asynchronous.to_dict() == sync.to_dict()


def test_with_minilm_a_question_finds_turns_that_share_no_word_with_it(sample: list[Utterance]) -> None:
    embedder = MiniLMEmbedder()
    memory = SGMem(embedder)
    memory.add(sample)
    question = "What pet did Maya get?"  # the conversation says "dog", "terrier", "Biscuit"
    alone = memory.retrieve(question, token_budget=200)
    assert any("Biscuit" in c.text or "dog" in c.text for c in alone.chunks[:2])
    result = SGMemWithGravity(memory, engine_for(embedder, sample)).retrieve(question, token_budget=300)
    assert "Biscuit" in result.anchors.text
    assert any("Biscuit" in c.text for c in result.memory.chunks)


def test_one_total_budget_is_shared_by_the_context_policy(
    engine: GravityEngine, sample_memory: SGMem
) -> None:
    policy = ContextPolicy(lead=1, every=2, anchor_share=0.25, host_reserve=400, min_anchor_tokens=150)
    both = SGMemWithGravity(sample_memory, engine, policy=policy)

    shared = both.retrieve(QUESTION, total_budget=1500, granularity="round")
    assert 0 < shared.anchors.tokens <= policy.anchor_tokens(1500)
    assert shared.tokens <= 1500
    fused = sample_memory.retrieve_fused(
        shared.queries, token_budget=1500 - shared.anchors.tokens, granularity="round", policy=policy
    )
    assert [c.id for c in shared.memory.chunks] == [c.id for c in fused.chunks]

    # 800 leaves the anchors 100 tokens, below their minimum: SGMem's own retrieval of the question.
    small = both.retrieve(QUESTION, total_budget=800, granularity="round")
    alone = sample_memory.retrieve(QUESTION, token_budget=800, granularity="round")
    assert small.anchors.tokens == 0 and small.anchors.text == "" and small.queries == [QUESTION]
    assert [c.id for c in small.memory.chunks] == [c.id for c in alone.chunks]

    with pytest.raises(ConfigurationError, match="not both"):
        both.retrieve(QUESTION, token_budget=500, total_budget=1500)
    with pytest.raises(ConfigurationError, match="total_budget"):
        both.retrieve(QUESTION, total_budget=0)
