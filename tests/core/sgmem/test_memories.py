"""Generated memories: made per session by a chat model, indexed beside the sentences, refreshed, cached."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.llm.base import Message
from gravity_core.llm.cache import ResponseCache
from gravity_core.prompts.sgmem import SessionMemories, build_session_memory_messages
from gravity_core.schema import Utterance
from gravity_core.sgmem import MemoryKind, RetrievalConfig, SGMem
from gravity_core.testing import FakeChatModel, RecordedModel

SESSION_1 = json.dumps(
    {
        "summary": "Jonas and Maya catch up after New Year; Maya plans to apply for a job in Bristol.",
        "facts": [
            {
                "text": "Maya has worked at Northwind General as a nurse for eight years.",
                "sources": ["[session_1:4]"],
            },
            {
                "text": "Jonas signed up for the Avon Valley half marathon.",
                "sources": ["session_1:9", "session_9:1"],
            },
            {"text": "  ", "sources": []},
        ],
        "insights": [{"text": "Maya finds pottery calming.", "sources": "session_1:14"}],
    }
)
SESSION_2 = json.dumps(
    {
        "summary": "Maya had her interview at Harbourside; Jonas's knee hurts after his first 10k.",
        "facts": [{"text": "Carol Hughes is the ward manager at Harbourside.", "sources": ["session_2:3"]}],
        "insights": [],
    }
)
SESSION_2_LONGER = json.dumps(
    {
        "summary": "Maya's interview went well and she wants a dog if she moves.",
        "facts": [
            {"text": "Maya wants to adopt a dog if she moves to Bristol.", "sources": ["session_2:13"]}
        ],
        "insights": [],
    }
)


def recorded(session_2: str = SESSION_2) -> RecordedModel:
    return RecordedModel(
        {
            ("SessionMemories", "--- session session_1 ---"): SESSION_1,
            ("SessionMemories", "--- session session_2 ---"): session_2,
        }
    )


def test_the_prompt_shows_the_session_and_the_schema(sample: list[Utterance]) -> None:
    messages = build_session_memory_messages(sample[:3])
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert "[session_1:1]" in user and "Jonas" in user
    assert json.dumps(SessionMemories.model_json_schema(), ensure_ascii=False) in user


def test_memories_are_made_per_session_and_cite_only_that_session(
    hashing: HashingEmbedder, sample: list[Utterance]
) -> None:
    model = recorded()
    memory = SGMem(hashing, memory_model=model)
    report = memory.add(sample[:31])  # sessions 1 and 2
    assert len(model.calls) == 2 and report.memories == 6 and report.failed_sessions == ()
    by_id = {m.id: m for m in memory.memories}
    assert sorted(by_id) == [
        "session_1:fact:1",
        "session_1:fact:2",
        "session_1:insight:1",
        "session_1:summary",
        "session_2:fact:1",
        "session_2:summary",
    ]
    assert by_id["session_1:fact:1"].utterance_ids == ("session_1:4",)
    assert by_id["session_1:fact:2"].utterance_ids == ("session_1:9",)  # the id of another session is dropped
    assert by_id["session_1:insight:1"].kind is MemoryKind.INSIGHT
    assert by_id["session_1:summary"].utterance_ids == tuple(u.id for u in sample[:16])
    assert memory.state.vectors["memory"].shape == (6, hashing.dim)


def test_matching_memories_come_with_the_chunks_within_their_share(
    hashing: HashingEmbedder, sample: list[Utterance]
) -> None:
    memory = SGMem(hashing, memory_model=recorded())
    memory.add(sample[:31])
    result = memory.retrieve("Who is the ward manager at Harbourside?", token_budget=400)
    assert result.memories and result.memories[0].id == "session_2:fact:1"
    assert result.memories[0].score >= memory.config.memory_min_score
    assert sum(m.tokens for m in result.memories) <= 400 * memory.config.memory_share
    assert result.tokens == sum(m.tokens for m in result.memories) + sum(c.tokens for c in result.chunks)
    assert result.tokens <= 400
    assert result.text.startswith("# Memories\n- (fact, session_2) Carol Hughes")
    assert "# Conversation excerpts" in result.text
    none = memory.retrieve("Who is the ward manager at Harbourside?", config=RetrievalConfig(top_memories=0))
    assert none.memories == []
    strict = memory.retrieve("Who is the ward manager?", config=RetrievalConfig(memory_min_score=0.99))
    assert strict.memories == []


def test_a_session_that_grows_gets_new_memories_others_are_not_asked_again(
    hashing: HashingEmbedder, sample: list[Utterance]
) -> None:
    def answer(messages: Sequence[Message]) -> str:
        prompt = messages[-1]["content"]
        if "--- session session_1 ---" in prompt:
            return SESSION_1
        return SESSION_2_LONGER if "[session_2:15]" in prompt else SESSION_2

    model = FakeChatModel(answer)
    memory = SGMem(hashing, memory_model=model)
    memory.add(sample[:25])  # session 2 up to session_2:9
    assert "session_2:fact:1" in {m.id for m in memory.memories}
    memory.add(sample[25:31])  # the rest of session 2
    assert len(model.calls) == 3
    texts = {m.id: m.text for m in memory.memories}
    assert texts["session_2:fact:1"] == "Maya wants to adopt a dog if she moves to Bristol."
    assert len(memory.memories) == len(texts) == memory.state.vectors["memory"].shape[0]


def test_a_failing_model_leaves_the_session_stale_until_refresh(
    hashing: HashingEmbedder, sample: list[Utterance]
) -> None:
    answers = {"n": 0}

    def flaky(messages: Sequence[Message]) -> str:
        answers["n"] += 1
        return "no JSON here" if answers["n"] <= 3 else SESSION_1

    memory = SGMem(hashing, memory_model=FakeChatModel(flaky))
    report = memory.add(sample[:16])
    assert report.failed_sessions == ("session_1",) and memory.memories == []
    assert memory.retrieve("Maya nurse").chunks  # the raw units are indexed all the same
    made, failed = memory.refresh_memories()
    assert (made, failed) == (4, [])
    assert memory.refresh_memories() == (0, [])  # nothing changed since
    with pytest.raises(ConfigurationError):
        SGMem(hashing).refresh_memories()


def test_the_response_cache_replays_a_build(
    hashing: HashingEmbedder, sample: list[Utterance], tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path / "cache")
    first = SGMem(hashing, memory_model=recorded(), memory_cache=cache)
    first.add(sample[:31])
    silent = FakeChatModel([], model_name="recorded")  # fails if asked anything
    second = SGMem(hashing, memory_model=silent, memory_cache=cache)
    second.add(sample[:31])
    assert [m.to_json() for m in second.memories] == [m.to_json() for m in first.memories]
    assert silent.calls == []
