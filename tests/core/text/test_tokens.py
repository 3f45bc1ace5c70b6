"""Offline token counting: exact cl100k counts from local, hash-verified vocabularies, no network."""

from __future__ import annotations

import gzip
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from gravity_core.errors import ConfigurationError, MissingDependencyError
from gravity_core.text import tokens
from gravity_core.text.tokens import BpeSource, TokenCounter, bpe_sources

# Ids and counts produced by tiktoken's own get_encoding("cl100k_base") (vocabulary from its
# official URL, hash-checked); "hello world" -> [15339, 1917] is also what tiktoken documents.
KNOWN = [
    ("hello world", [15339, 1917]),
    ("Hello, world!", [9906, 11, 1917, 0]),
    (
        "GRAVITY anchors: 7 May 2023 — Caroline",
        [48075, 53, 3414, 56539, 25, 220, 22, 3297, 220, 2366, 18, 2001, 54491],
    ),
    ("<|endoftext|>", [27, 91, 8862, 728, 428, 91, 29]),
    ("日本語のテキスト 🎉", [9080, 22656, 45918, 252, 16144, 57933, 62903, 71634, 11410, 236, 231]),
    ("   \n\n  indented", [35033, 220, 1280, 16243]),
    ("antidisestablishmentarianism", [519, 85342, 34500, 479, 8997, 2191]),
]


class NetworkUsed(AssertionError):
    pass


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Any socket connection or DNS look-up fails; tiktoken's cache points at an empty folder."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NetworkUsed(f"network access attempted: {args[1:]!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    yield cache


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter()


@pytest.fixture(scope="module")
def plain_vocabulary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled vocabulary, uncompressed, as a plain .tiktoken file."""
    bundled = resources.files("gravity_core").joinpath("data", "cl100k_base.tiktoken.gz").read_bytes()
    path = tmp_path_factory.mktemp("bpe") / "cl100k_base.tiktoken"
    path.write_bytes(gzip.decompress(bundled))
    return path


def test_the_guard_really_blocks_the_network(no_network: Path) -> None:
    with pytest.raises(NetworkUsed):
        socket.create_connection(("203.0.113.1", 443), timeout=0.1)


def test_counts_and_ids_match_tiktoken_without_any_network(no_network: Path) -> None:
    fresh = TokenCounter()
    for text, ids in KNOWN:
        assert fresh.encode(text) == ids, text
        assert fresh.count(text) == len(ids), text
    assert fresh.count("hello world") == 2
    assert fresh.count("") == 0
    assert list(no_network.iterdir()) == []  # nothing copied into tiktoken's cache either


def test_special_token_strings_count_as_plain_text(counter: TokenCounter) -> None:
    assert counter.count("<|endoftext|>") == 7
    assert counter.count("a <|endofprompt|> b") > 1


def test_vocabulary_is_loaded_lazily_once_per_instance_across_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    real = tokens._load_encoding

    def slow_load(*args: Any) -> Any:
        calls.append("load")
        time.sleep(0.05)
        return real(*args)

    monkeypatch.setattr(tokens, "_load_encoding", slow_load)
    fresh = TokenCounter()
    assert calls == []  # construction does no work
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(fresh.count("hello world"))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [2] * 8
    assert calls == ["load"]
    fresh.count("again")
    assert calls == ["load"]


def test_truncate_keeps_a_prefix_within_the_limit(counter: TokenCounter) -> None:
    text = "one two three four five"
    assert counter.truncate(text, 2) == "one two"
    assert counter.truncate(text, 100) == text
    assert counter.truncate(text, 0) == ""
    with pytest.raises(ConfigurationError):
        counter.truncate(text, -1)


def test_truncate_never_splits_a_character(counter: TokenCounter) -> None:
    text = "日本語のテキスト 🎉 and more"
    for limit in range(counter.count(text)):
        cut = counter.truncate(text, limit)
        assert text.startswith(cut)
        assert "\ufffd" not in cut
        assert counter.count(cut) <= limit


def test_explicit_bpe_file_plain_or_gzipped(plain_vocabulary: Path, no_network: Path) -> None:
    assert TokenCounter(bpe_file=plain_vocabulary).count("Hello, world!") == 4
    gz = no_network.parent / "copy.tiktoken.gz"
    gz.write_bytes(gzip.compress(plain_vocabulary.read_bytes()))
    assert TokenCounter(bpe_file=gz).count("Hello, world!") == 4


def test_explicit_bpe_file_that_is_wrong_or_missing_is_a_configuration_error(tmp_path: Path) -> None:
    tampered = tmp_path / "tampered.tiktoken"
    tampered.write_bytes(b"aGVsbG8= 0\n")
    with pytest.raises(ConfigurationError, match="sha256"):
        TokenCounter(bpe_file=tampered).count("x")
    with pytest.raises(ConfigurationError, match="missing"):
        TokenCounter(bpe_file=tmp_path / "nope.tiktoken").count("x")


def test_a_source_with_the_wrong_hash_is_skipped_for_the_next(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, plain_vocabulary: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = tmp_path / "bad"
    bad.write_bytes(plain_vocabulary.read_bytes().replace(b" 0\n", b" 1\n", 1))
    sources = [BpeSource("tiktoken-cache", bad), BpeSource("bundled", plain_vocabulary)]
    monkeypatch.setattr(tokens, "bpe_sources", lambda name: sources)
    with caplog.at_level(logging.WARNING, logger="gravity_core.text.tokens"):
        assert TokenCounter().count("hello world") == 2
    assert "sha256" in caplog.text and str(bad) in caplog.text


def test_no_source_at_all_says_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = [BpeSource("bundled", tmp_path / "gone.tiktoken.gz")]
    monkeypatch.setattr(tokens, "bpe_sources", lambda name: missing)
    with pytest.raises(ConfigurationError, match="reinstall gravity-memory") as info:
        TokenCounter().count("x")
    assert "gone.tiktoken.gz" in str(info.value)
    with pytest.raises(MissingDependencyError, match=r"gravity-memory\[llamaindex\]"):
        TokenCounter("o200k_base").count("x")


def test_unknown_encoding_is_rejected_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="cl100k_base"):
        TokenCounter("p50k_base")


def test_sources_bundled_first_then_llama_index_then_tiktoken_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/somewhere")
    sources = bpe_sources("cl100k_base")
    origins = [s.origin for s in sources]
    assert origins[0] == "bundled" and origins[-1] == "tiktoken-cache"
    assert set(origins) <= {"bundled", "llama-index-core", "tiktoken-cache"}
    assert sources[0].location.is_file()
    # tiktoken names a cached download by the SHA-1 of its URL
    assert str(sources[-1].location) == "/somewhere/9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
    assert "bundled" not in [s.origin for s in bpe_sources("o200k_base")]


def test_llama_index_copy_is_located_without_importing_llama_index() -> None:
    script = (
        "import sys\n"
        "from gravity_core.text.tokens import bpe_sources\n"
        "found = [s for s in bpe_sources('cl100k_base') if s.origin == 'llama-index-core']\n"
        "print(bool(found) and found[0].location.is_file(), 'llama_index' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    found, imported = out.stdout.split()
    assert imported == "False"
    if found != "True":
        pytest.skip("llama-index-core is not installed")


def test_o200k_from_llama_index_when_installed(no_network: Path) -> None:
    if not any(s.origin == "llama-index-core" and s.location.is_file() for s in bpe_sources("o200k_base")):
        pytest.skip("llama-index-core is not installed")
    o200k = TokenCounter("o200k_base")
    assert o200k.count("hello world") == 2
    assert o200k.count("日本語のテキスト 🎉") == 8  # differs from cl100k's 11
