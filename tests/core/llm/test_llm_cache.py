"""The on-disk response cache and the caching model wrapper."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel

from gravity_core.llm import CachedModel, ChatModel, Message, ResponseCache, cache_key, call_json
from gravity_core.testing import FakeChatModel

PROMPT: list[Message] = [
    {"role": "system", "content": "You answer in JSON."},
    {"role": "user", "content": "Say hi to Caroline ☀"},
]


class Greeting(BaseModel):
    text: str


def test_put_then_get(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    assert cache.get("m", PROMPT) is None
    cache.put("m", PROMPT, "hello ☀")
    assert cache.get("m", PROMPT) == "hello ☀"
    # A new cache object on the same folder sees the entry: it lives on disk.
    assert ResponseCache(tmp_path / "cache").get("m", PROMPT) == "hello ☀"


def test_key_covers_model_and_every_message(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    cache.put("m", PROMPT, "hello")
    assert cache.get("other-model", PROMPT) is None
    assert cache.get("m", PROMPT[:1]) is None
    assert cache.get("m", [PROMPT[0], {"role": "assistant", "content": PROMPT[1]["content"]}]) is None
    assert cache.get("m", [*PROMPT, {"role": "user", "content": "again"}]) is None
    # Keys other than role and content do not change the request.
    assert cache.get("m", [{**m, "name": "x"} for m in PROMPT]) == "hello"  # type: ignore[typeddict-unknown-key]


def test_entry_file_layout_and_content(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    cache.put("m", PROMPT, "hello")
    key = cache_key("m", PROMPT)
    path = tmp_path / key[:2] / f"{key}.json"
    assert cache.path_for("m", PROMPT) == path
    entry = json.loads(path.read_text(encoding="utf-8"))
    assert entry["model"] == "m"
    assert entry["completion"] == "hello"
    assert len(entry["prompt_sha256"]) == 64
    assert "created" in entry
    # Only the entry itself: the temporary file was renamed into place.
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_cached_model_hit_makes_no_model_call(tmp_path: Path) -> None:
    inner = FakeChatModel(["hello"], model_name="m")
    model = CachedModel(inner, ResponseCache(tmp_path))
    assert isinstance(model, ChatModel)
    assert model.model_name == "m"
    assert model.complete(PROMPT) == "hello"
    assert (model.calls, model.hits) == (1, 0)
    assert model.complete(PROMPT) == "hello"
    assert (model.calls, model.hits) == (1, 1)
    assert len(inner.calls) == 1
    # A fresh wrapper over a model with no answers left still answers from disk.
    again = CachedModel(FakeChatModel([], model_name="m"), ResponseCache(tmp_path))
    assert again.complete(PROMPT) == "hello"
    assert (again.calls, again.hits) == (0, 1)


@pytest.mark.parametrize(
    "content", ["{not json", "[1, 2]", '{"model": "m"}', '{"model": "x", "completion": "hi"}']
)
def test_corrupt_entry_is_a_logged_miss_then_overwritten(
    tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    cache = ResponseCache(tmp_path)
    path = cache.path_for("m", PROMPT)
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="gravity_core.llm.cache"):
        assert cache.get("m", PROMPT) is None
    assert str(path) in caplog.text
    model = CachedModel(FakeChatModel(["fresh"], model_name="m"), cache)
    assert model.complete(PROMPT) == "fresh"
    assert model.calls == 1
    assert cache.get("m", PROMPT) == "fresh"


def test_write_failure_is_logged_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError("disk full")

    cache = ResponseCache(tmp_path)
    monkeypatch.setattr(os, "open", refuse)  # the disk refuses every new file
    with caplog.at_level(logging.WARNING, logger="gravity_core.llm.cache"):
        cache.put("m", PROMPT, "hello")
    assert "disk full" in caplog.text
    assert cache.get("m", PROMPT) is None


def test_concurrent_writers_and_readers_never_see_partial_entries(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    values = [f"answer-{i}-" + "x" * 5000 for i in range(8)]
    seen: list[str | None] = []
    errors: list[BaseException] = []

    def work(value: str) -> None:
        try:
            for _ in range(20):
                cache.put("m", PROMPT, value)
                seen.append(cache.get("m", PROMPT))
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(v,)) for v in values]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(seen) == 160
    assert set(seen) <= set(values)
    assert not list(tmp_path.rglob("*.tmp"))


def test_call_json_through_cache_replays_reasks_without_model_calls(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    first = FakeChatModel(["not json", '{"text": "hi"}'], model_name="m")
    parsed, raw = call_json(first, PROMPT, Greeting, cache=cache)
    assert parsed.text == "hi"
    assert len(first.calls) == 2
    replay = FakeChatModel([], model_name="m")
    parsed_again, raw_again = call_json(replay, PROMPT, Greeting, cache=cache)
    assert (parsed_again, raw_again) == (parsed, raw)
    assert replay.calls == []
