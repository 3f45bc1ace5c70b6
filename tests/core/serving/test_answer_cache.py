"""AnswerCache and UserAnswerCaches: one engine query per question, kept per KB version and per user."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.schema import Utterance
from gravity_core.serving.answer_cache import AnswerCache, UserAnswerCaches
from gravity_core.serving.users import UserKBs
from tests.spies import count_queries


@pytest.fixture
def utterances(sample_utterances: list[Utterance]) -> list[Utterance]:
    return sample_utterances


@pytest.fixture
def engine(sample_kb: AnchorBuilder) -> GravityEngine:
    return GravityEngine.from_builder(sample_kb)


@pytest.fixture
def question() -> str:
    return "Where does Maya work now, and what happened with Biscuit?"


# -- the shared query cache --------------------------------------------------------------------


def test_cache_runs_one_query_for_concurrent_callers(
    engine: GravityEngine, question: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_queries(engine, monkeypatch, delay=0.1)
    cache = AnswerCache(engine)
    results: list[Any] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get(question))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [question]
    assert len(results) == 4
    assert all(r is results[0] for r in results)


async def test_cache_async_and_config_keys(
    engine: GravityEngine, question: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_queries(engine, monkeypatch)
    cache = AnswerCache(engine)
    first, second = await asyncio.gather(cache.aget(question), cache.aget(question))
    assert first is second
    assert cache.get(question, config=engine.config) is first  # None means the engine's config
    other = cache.get(question, config=QueryConfig(expand=False))
    assert other.expansions == []
    assert calls == [question, question]


def test_cache_keeps_the_most_recent_results(engine: GravityEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_queries(engine, monkeypatch)
    cache = AnswerCache(engine, maxsize=2)
    for q in ("Maya", "Jonas", "Maya", "Biscuit", "Jonas"):
        cache.get(q)
    # Maya is refreshed by its second use, so Biscuit evicts Jonas, which must then be recomputed.
    assert calls == ["Maya", "Jonas", "Biscuit", "Jonas"]
    assert len(cache) == 2
    cache.clear()
    assert len(cache) == 0


def test_cache_does_not_keep_failures(engine: GravityEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = AnswerCache(engine)
    attempts: list[str] = []
    original = engine.query

    def flaky(question: str, **kwargs: Any) -> Any:
        attempts.append(question)
        if len(attempts) == 1:
            raise RuntimeError("boom")
        return original(question, **kwargs)

    monkeypatch.setattr(engine, "query", flaky)
    with pytest.raises(RuntimeError, match="boom"):
        cache.get("Maya")
    assert cache.get("Maya").question == "Maya"
    assert attempts == ["Maya", "Maya"]
    with pytest.raises(ConfigurationError):
        AnswerCache(engine, maxsize=-1)


def test_a_cache_of_size_zero_keeps_nothing_but_still_shares_a_running_query(
    engine: GravityEngine, question: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_queries(engine, monkeypatch, delay=0.1)
    heard: list[AnchorContext] = []
    cache = AnswerCache(engine, maxsize=0, on_answer=heard.append)
    results: list[AnchorContext] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get(question))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [question] and all(r is results[0] for r in results)
    assert cache.cached(question) is None and len(cache) == 0
    again = cache.get(question)
    assert calls == [question, question] and again is not results[0]
    assert heard == [results[0], again]  # the listener hears each computed answer once


def test_each_user_gets_a_cache_of_their_engine_and_the_listener_hears_who_asked(
    tmp_path: Path, utterances: list[Utterance]
) -> None:
    users = UserKBs(tmp_path / "kbs", embedder=HashingEmbedder())
    users.add("u1", utterances[:20])
    users.add("u2", utterances[20:])
    heard: list[tuple[str, str]] = []
    caches = UserAnswerCaches(users, on_answer=lambda user, context: heard.append((user, context.question)))
    one, two = caches.for_user("u1"), caches.for_user("u2")
    assert one.engine is users.engine("u1") and two.engine is users.engine("u2")
    assert caches.for_user("u1") is one  # kept while the user's engine is the same
    answer = one.get("Who is Maya?")
    assert one.get("Who is Maya?") is answer and two.cached("Who is Maya?") is None
    assert heard == [("u1", "Who is Maya?")]
    nobody = caches.for_user("u3")  # no KB: an empty engine made anew for each query, not kept
    assert caches.for_user("u3") is not nobody
    users.delete("u1")
    assert caches.for_user("u1") is not one  # a deleted user's answers are never served again
    with pytest.raises(ConfigurationError, match="user id"):
        caches.for_user("../x")
    with pytest.raises(ConfigurationError, match="maxsize"):
        UserAnswerCaches(users, maxsize=-1)
