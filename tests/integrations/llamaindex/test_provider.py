"""AnchorProvider: one engine answer per question, shared by the components."""

from __future__ import annotations

from datetime import date

import pytest

from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_llamaindex import AnchorProvider
from gravity_llamaindex.provider import as_provider

from .conftest import QUESTION

OTHER = "Where does Jonas work?"


def test_repeated_questions_are_answered_from_the_cache(
    engine: GravityEngine, context: AnchorContext, engine_calls: list[str]
) -> None:
    provider = AnchorProvider(engine)
    assert provider.cached(QUESTION) is None
    first = provider.get(QUESTION)
    assert provider.get(QUESTION) is first and provider.cached(QUESTION) is first
    assert first.text == context.text
    assert engine_calls == [QUESTION]
    provider.clear()
    provider.get(QUESTION)
    assert engine_calls == [QUESTION, QUESTION]


async def test_async_shares_the_cache(engine: GravityEngine, engine_calls: list[str]) -> None:
    provider = AnchorProvider(engine)
    first = await provider.aget(QUESTION)
    assert provider.get(QUESTION) is first and await provider.aget(QUESTION) is first
    assert engine_calls == [QUESTION]


def test_the_least_recently_used_question_is_forgotten(
    engine: GravityEngine, engine_calls: list[str]
) -> None:
    provider = AnchorProvider(engine, cache_size=2)
    for question in (QUESTION, OTHER, QUESTION, "Who is Lena?", QUESTION, OTHER):
        provider.get(question)
    assert engine_calls == [QUESTION, OTHER, "Who is Lena?", OTHER]


def test_cache_size_zero_always_asks_the_engine(engine: GravityEngine, engine_calls: list[str]) -> None:
    provider = AnchorProvider(engine, cache_size=0)
    provider.get(QUESTION)
    provider.get(QUESTION)
    assert engine_calls == [QUESTION, QUESTION]


def test_config_and_question_date_reach_the_engine(
    engine: GravityEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, object]] = []
    real = engine.query

    def spy(question: str, **kwargs: object) -> AnchorContext:
        seen.append(kwargs)
        return real(question, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(engine, "query", spy)
    config = QueryConfig(expand=False)
    context = AnchorProvider(engine, config=config, question_date=date(2024, 6, 30)).get(QUESTION)
    assert seen[0]["config"] is config and seen[0]["question_date"] == date(2024, 6, 30)
    assert context.expansions == []


def test_bad_arguments(engine: GravityEngine) -> None:
    with pytest.raises(ConfigurationError, match="cache_size"):
        AnchorProvider(engine, cache_size=-1)
    provider = AnchorProvider(engine)
    assert as_provider(provider) is provider
    assert as_provider(engine).engine is engine
