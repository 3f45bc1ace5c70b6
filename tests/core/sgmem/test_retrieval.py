"""Retrieval: each granularity, the token budget and excerpts, fusion, the unit baseline, settings."""

from __future__ import annotations

import pytest

from gravity_core.context.policy import ContextPolicy
from gravity_core.errors import ConfigurationError
from gravity_core.schema import Utterance
from gravity_core.sgmem import ChunkGranularity, RetrievalConfig, SGMem
from gravity_core.text.tokens import TokenCounter

QUESTION = "When did Maya adopt Biscuit the dog?"


@pytest.mark.parametrize("granularity", list(ChunkGranularity))
def test_each_granularity_returns_whole_chunks_of_that_kind(
    sample_memory: SGMem, sample: list[Utterance], granularity: ChunkGranularity
) -> None:
    result = sample_memory.retrieve(QUESTION, granularity=granularity, token_budget=3000)
    units = sample_memory.units
    assert result.chunks and result.granularity is granularity
    by_id = {u.id: u for u in sample}
    for chunk in result.chunks:
        assert chunk.granularity is granularity
        if granularity is ChunkGranularity.TURN:
            expected = [chunk.id]
        elif granularity is ChunkGranularity.ROUND:
            assert chunk.id.startswith(f"{chunk.session}/r")
            index = units.round_index(chunk.id)
            assert index is not None
            expected = [units.turns[t].id for t in units.rounds[index].turns]
        else:
            expected = [u.id for u in sample if u.session == chunk.id]
        if not chunk.truncated:
            assert list(chunk.utterance_ids) == expected
        assert all(by_id[u].session == chunk.session for u in chunk.utterance_ids)
        # One line per turn: "[id] (day) speaker: text".
        lines = chunk.text.split("\n")
        assert [line.split("]")[0][1:] for line in lines] == list(chunk.utterance_ids)
        assert all(sid.split("#")[0] in chunk.utterance_ids for sid in chunk.sentence_ids)
    # Reached chunks (seed or graph) come first, then the fill; scores fall within each group.
    hops = [c.hop for c in result.chunks]
    reached = [c.score for c in result.chunks if c.hop is not None]
    filled = [c.score for c in result.chunks if c.hop is None]
    assert hops[: len(reached)] == [h for h in hops if h is not None]
    assert reached == sorted(reached, reverse=True) and filled == sorted(filled, reverse=True)
    assert hops[0] == 0
    assert len({c.id for c in result.chunks}) == len(result.chunks)


def test_the_dog_turns_rank_first(sample_memory: SGMem) -> None:
    result = sample_memory.retrieve(QUESTION, granularity="turn", max_chunks=5)
    texts = " ".join(c.text for c in result.chunks)
    assert "Biscuit" in texts


def test_budget_is_respected_and_used(sample_memory: SGMem) -> None:
    counter = TokenCounter()
    for budget in (60, 250, 900):
        result = sample_memory.retrieve(QUESTION, token_budget=budget)
        assert result.tokens <= budget
        assert result.tokens == sum(counter.count(c.text) for c in result.chunks)
        assert all(c.tokens == counter.count(c.text) for c in result.chunks)
        assert result.tokens > budget - 60  # filled up to about one turn short
    small = sample_memory.retrieve(QUESTION, token_budget=60)
    large = sample_memory.retrieve(QUESTION, token_budget=900)
    assert small.chunks[0].id == large.chunks[0].id
    assert {c.id for c in small.chunks} <= {c.id for c in large.chunks}


def test_a_session_larger_than_the_budget_is_cut_around_its_best_turn(sample_memory: SGMem) -> None:
    whole = sample_memory.retrieve(QUESTION, granularity="session", token_budget=None, max_chunks=1)
    best = whole.chunks[0]
    assert not best.truncated and best.tokens > 300
    cut = sample_memory.retrieve(QUESTION, granularity="session", token_budget=300)
    first = cut.chunks[0]
    assert first.id == best.id and first.truncated and first.tokens <= 300
    assert set(first.utterance_ids) < set(best.utterance_ids)
    hit_turn = best.sentence_ids[0].split("#")[0]
    assert hit_turn in first.utterance_ids
    positions = [best.utterance_ids.index(u) for u in first.utterance_ids]
    assert positions == list(range(positions[0], positions[0] + len(positions)))  # a contiguous window


def test_min_excerpt_tokens_skips_rather_than_cutting(sample_memory: SGMem) -> None:
    config = RetrievalConfig(granularity=ChunkGranularity.SESSION, token_budget=100, min_excerpt_tokens=101)
    assert sample_memory.retrieve(QUESTION, config=config).chunks == []


def test_hops_zero_is_plain_sentence_search(sample_memory: SGMem) -> None:
    plain = RetrievalConfig(hops=0, token_budget=None, max_chunks=3, chunk_weight=0.0)
    result = sample_memory.retrieve(QUESTION, config=plain)
    assert all(c.hop in (0, None) for c in result.chunks)
    vector = sample_memory.embed_queries([QUESTION])[0]
    own = sample_memory.state.vectors["sentence"] @ vector
    best_sentence = int(own.argmax())
    assert result.chunks[0].sentence_ids[0] == sample_memory.units.sentences[best_sentence].id


def test_fused_retrieval_follows_the_context_policy(sample_memory: SGMem) -> None:
    queries = ["Biscuit the dog", "pottery class at Kiln House", "marathon training"]
    deep = RetrievalConfig(token_budget=None, max_chunks=300)
    lists = [[c.id for c in sample_memory.retrieve(q, config=deep).chunks] for q in queries]
    policy = ContextPolicy(lead=2, every=2, depth=1)
    expected = [h.item for h in policy.merge(queries[0], lists[0], queries[1:], lists[1:], key=str, top_n=8)]
    fused = sample_memory.retrieve_fused(queries, config=deep, max_chunks=8, policy=policy)
    assert [c.id for c in fused.chunks] == expected
    assert [c.id for c in fused.chunks[:2]] == lists[0][:2]  # the question's lead is untouched
    for other in lists[1:]:  # another query's best hit moves up from where the question put it
        assert expected.index(other[0]) <= lists[0].index(other[0])
    assert fused.queries == queries and fused.question == queries[0]
    # The shipped policy gives the other queries no place among the question's first 25 chunks.
    shipped = sample_memory.retrieve_fused(queries, config=deep, max_chunks=8)
    assert [c.id for c in shipped.chunks] == lists[0][:8]
    single = sample_memory.retrieve_fused(queries[:1], config=deep, max_chunks=3)
    assert [c.id for c in single.chunks] == lists[0][:3]
    with pytest.raises(ConfigurationError):
        sample_memory.retrieve_fused([])


def test_unit_baseline_ranks_chunks_by_their_own_vector(sample_memory: SGMem) -> None:
    result = sample_memory.retrieve_units(QUESTION, granularity="round", token_budget=400)
    vector = sample_memory.embed_queries([QUESTION])[0]
    scores = sample_memory.state.vectors["round"] @ vector
    assert result.chunks[0].id == sample_memory.units.rounds[int(scores.argmax())].id
    assert result.tokens <= 400 and result.memories == []


def test_settings_are_checked_and_overridden(sample_memory: SGMem) -> None:
    with pytest.raises(ConfigurationError, match="unknown granularity"):
        sample_memory.retrieve(QUESTION, granularity="paragraph")
    with pytest.raises(ConfigurationError, match="invalid retrieval settings"):
        sample_memory.retrieve(QUESTION, token_budget=-3)
    with pytest.raises(ConfigurationError, match="dimensions"):
        sample_memory.retrieve(QUESTION, query_embedding=[0.1, 0.2])
    cfg = sample_memory.resolve_config(granularity="round", hops=2, max_chunks=3)
    assert (cfg.granularity, cfg.hops, cfg.max_chunks) == (ChunkGranularity.ROUND, 2, 3)
    assert len(sample_memory.retrieve(QUESTION, config=cfg).chunks) == 3


def test_a_given_query_embedding_is_used(sample_memory: SGMem) -> None:
    vector = sample_memory.embed_queries(["pottery class at Kiln House"])[0]
    by_vector = sample_memory.retrieve(QUESTION, query_embedding=vector * 3.0, max_chunks=3)
    by_text = sample_memory.retrieve("pottery class at Kiln House", max_chunks=3)
    assert [c.id for c in by_vector.chunks] == [c.id for c in by_text.chunks]
    assert by_vector.question == QUESTION


async def test_async_retrieve_matches_sync(sample_memory: SGMem) -> None:
    sync = sample_memory.retrieve(QUESTION, granularity="round")
    asynchronous = await sample_memory.aretrieve(QUESTION, granularity="round")
    assert asynchronous.to_dict() == sync.to_dict()


def test_result_json_shape(sample_memory: SGMem) -> None:
    data = sample_memory.retrieve(QUESTION, token_budget=200).to_dict()
    assert set(data) >= {"question", "granularity", "results", "memories", "tokens"}
    first = data["results"][0]
    assert set(first) >= {"text", "granularity", "score", "utterance_ids", "id"}
