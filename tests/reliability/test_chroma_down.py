"""A Chroma server that is down, comes up late, or goes away mid-run.

- Nothing listening: opening the anchor index, the SGMem store or a plain client (for langchain-chroma
  or LlamaIndex) retries with backoff, then raises a ProviderError naming the URL and the attempts.
- A server that comes up while the client retries is simply used.
- A server killed mid-sync or mid-query: a ProviderError naming the URL; the KB folder on disk is
  untouched, the SGMem folder stays at its last saved generation, and the next sync against a
  restarted server completes the collections (a cut sync never passes for a complete one).
- ``gravity query --chroma-server`` with nothing listening exits 1 with one line naming the URL.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gravity_core.cli import main
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError, ProviderError
from gravity_core.loaders import load_conversation
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import ChromaAnchorIndex
from gravity_core.schema import AnchorKind
from gravity_core.sgmem import ChromaSGMemStore, SGMem
from gravity_core.storage.chroma_clients import ChromaRetry, is_transient, server_client
from gravity_core.storage.store import AnchorStore
from tests.conftest import free_port

chromadb = pytest.importorskip("chromadb")

pytestmark = pytest.mark.loopback  # Chroma servers, and ports nothing listens on, at 127.0.0.1
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_conversation.jsonl"
FAST = ChromaRetry(attempts=3, initial_delay=0.05, max_delay=0.1)
PATIENT = ChromaRetry(attempts=60, initial_delay=0.1, max_delay=0.25)  # ~15 s for a server to start


@pytest.fixture(scope="module")
def hashing() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture(scope="module")
def kb_dir(sample_kb_dir: Path) -> Path:
    return sample_kb_dir  # read-only here: the tests check that its files do not change


def digest_tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[[Path, int], subprocess.Popen[bytes]]]:
    """Start ``chroma run`` on a given folder and port without waiting for it; stopped after the test."""
    started: list[subprocess.Popen[bytes]] = []
    executable = Path(sys.executable).parent / "chroma"
    if not executable.exists():
        pytest.skip("no chroma executable (install the 'chroma' extra)")

    def start(folder: Path, port: int) -> subprocess.Popen[bytes]:
        log = (tmp_path / f"chroma-{port}.log").open("wb")
        process = subprocess.Popen(
            [str(executable), "run", "--path", str(folder), "--port", str(port), "--host", "127.0.0.1"],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        started.append(process)
        return process

    try:
        yield start
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


# ----- nothing listening ------------------------------------------------------------------------------

OPENERS: dict[str, Callable[[int], object]] = {
    "anchor index": lambda port: ChromaAnchorIndex.server("127.0.0.1", port, "kb", retry=FAST),
    "sgmem store": lambda port: ChromaSGMemStore.server("127.0.0.1", port, "mem", retry=FAST),
    "client for langchain-chroma": lambda port: server_client(
        "127.0.0.1", port, "langchain-chroma", retry=FAST
    ),
}


@pytest.mark.parametrize("opener", sorted(OPENERS))
def test_nothing_listening_is_retried_then_named(opener: str, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    with (
        caplog.at_level(logging.INFO, logger="gravity_core.storage.chroma_clients"),
        pytest.raises(ProviderError, match=re.escape(url)) as error,
    ):
        OPENERS[opener](port)
    elapsed = time.monotonic() - started
    assert "after 3 attempts" in str(error.value) and "chroma run" in str(error.value)
    assert error.value.provider == "chroma"
    retries = [r for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retries) == FAST.attempts - 1
    assert elapsed >= 0.05 + 0.1  # the two backoff waits


@pytest.mark.parametrize(("host", "port"), [("", 8000), ("127.0.0.1", 0), ("127.0.0.1", 70000)])
def test_a_bad_address_is_the_callers_mistake(host: str, port: int) -> None:
    with pytest.raises(ConfigurationError):
        ChromaAnchorIndex.server(host, port, "kb", retry=FAST)


def test_retry_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError):
        ChromaRetry(attempts=0)
    with pytest.raises(ConfigurationError):
        ChromaRetry(initial_delay=-1)


def test_only_unreachable_servers_count_as_transient() -> None:
    import httpx
    from chromadb.errors import NotFoundError

    request = httpx.Request("GET", "http://127.0.0.1:1/api")
    refused = httpx.ConnectError("[Errno 111] Connection refused", request=request)
    chained = ValueError("Could not connect to a Chroma server. Are you sure it is running?")
    chained.__context__ = refused  # how chromadb.HttpClient() reports a refused connection

    def status(code: int) -> httpx.HTTPStatusError:
        return httpx.HTTPStatusError("x", request=request, response=httpx.Response(code, request=request))

    assert is_transient(refused) and is_transient(chained)
    assert is_transient(httpx.ReadTimeout("slow", request=request)) and is_transient(ConnectionResetError())
    assert is_transient(status(503)) and is_transient(status(502))
    assert not is_transient(status(400)) and not is_transient(NotFoundError("no such collection"))
    assert not is_transient(ValueError("bad request"))


# ----- a server that comes up late --------------------------------------------------------------------


@pytest.mark.server
def test_a_server_that_comes_up_during_the_retries_is_used(
    spawn: Callable[[Path, int], subprocess.Popen[bytes]],
    tmp_path: Path,
    kb_dir: Path,
    hashing: HashingEmbedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    spawn(tmp_path / "db", port)  # not up yet: the first requests are refused
    with caplog.at_level(logging.INFO, logger="gravity_core.storage.chroma_clients"):
        index = ChromaAnchorIndex.server("127.0.0.1", port, "late", retry=PATIENT)
    assert any("retrying" in r.getMessage() for r in caplog.records)
    engine = GravityEngine.from_dir(kb_dir, embedder=hashing, index=index)
    assert engine.query("Where does Maya work now?").anchors


# ----- a server that goes away mid-run ----------------------------------------------------------------


def assert_complete(index: ChromaAnchorIndex, kb_dir: Path) -> None:
    """Every anchor is in its collection, and each anchor's own vector finds it first."""
    vectors = AnchorStore(kb_dir).load().vectors
    for kind in AnchorKind:
        rows = vectors.get(kind)
        assert index.count(kind) == len(rows.ids), kind
        for row in range(0, len(rows.ids), max(1, len(rows.ids) // 5)):
            assert index.top(kind, rows.matrix[row], 1)[0][0] == rows.ids[row]


@pytest.mark.server
def test_server_killed_mid_sync_leaves_no_partial_kb_or_index(
    start_chroma_server: Callable[[], Any],
    spawn: Callable[[Path, int], subprocess.Popen[bytes]],
    kb_dir: Path,
    hashing: HashingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chromadb.api.models.Collection import Collection

    server = start_chroma_server()
    before = digest_tree(kb_dir)
    upserts = 0
    real_upsert = Collection.upsert

    def upsert_then_die(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal upserts
        upserts += 1
        if upserts == 3:  # the server goes away in the middle of the sync
            server.process.kill()
            server.process.wait(timeout=10)
        return real_upsert(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "upsert", upsert_then_die)
    index = ChromaAnchorIndex.server(server.host, server.port, "killed", retry=FAST)
    with pytest.raises(ProviderError, match=re.escape(server.url)) as error:
        index.sync(AnchorStore(kb_dir).load().vectors, batch_size=5)
    assert "after 3 attempts" in str(error.value) and "upsert" in str(error.value)
    assert upserts == 2 + FAST.attempts  # the failed batch was sent again before giving up
    monkeypatch.setattr(Collection, "upsert", real_upsert)
    assert digest_tree(kb_dir) == before  # the KB on disk is untouched

    # The same database, served again: the cut sync is not taken for a complete one.
    port = free_port()
    spawn(server.log.parent / "db", port)
    reopened = ChromaAnchorIndex.server("127.0.0.1", port, "killed", retry=PATIENT)
    report = reopened.sync(AnchorStore(kb_dir).load().vectors)
    assert report.upserted > 0
    assert reopened.sync(AnchorStore(kb_dir).load().vectors).writes == 0
    assert_complete(reopened, kb_dir)
    assert digest_tree(kb_dir) == before


@pytest.mark.server
def test_server_killed_between_queries(
    start_chroma_server: Callable[[], Any], kb_dir: Path, hashing: HashingEmbedder
) -> None:
    server = start_chroma_server()
    before = digest_tree(kb_dir)
    index = ChromaAnchorIndex.server(server.host, server.port, "queries", retry=FAST)
    engine = GravityEngine.from_dir(kb_dir, embedder=hashing, index=index)
    assert engine.query("Where does Maya work now?").anchors
    server.process.kill()
    server.process.wait(timeout=10)
    started = time.monotonic()
    with pytest.raises(ProviderError, match=re.escape(server.url)) as error:
        engine.query("What happened with Biscuit?")
    assert "after 3 attempts" in str(error.value)
    assert time.monotonic() - started < 5
    assert digest_tree(kb_dir) == before
    # The KB itself still answers with the in-process index.
    assert GravityEngine.from_dir(kb_dir, embedder=hashing).query("What happened with Biscuit?").anchors


@pytest.mark.server
def test_sgmem_keeps_its_last_saved_generation_when_the_server_dies(
    start_chroma_server: Callable[[], Any], hashing: HashingEmbedder, tmp_path: Path
) -> None:
    turns = load_conversation(SAMPLE)
    server = start_chroma_server()
    folder = tmp_path / "sg"
    memory = SGMem(hashing, store=ChromaSGMemStore.server(server.host, server.port, "sg", retry=FAST))
    memory.add(turns[:40])
    generation = memory.save(folder)
    saved = memory.stats()
    manifest = (folder / "manifest.json").read_bytes()
    server.process.kill()
    server.process.wait(timeout=10)
    with pytest.raises(ProviderError, match=re.escape(server.url)):
        memory.add(turns[40:])
    # As `gravity sgmem build` does, nothing is saved after a failed add: the folder stays as it was.
    assert (folder / "manifest.json").read_bytes() == manifest
    assert json.loads(manifest)["generation"] == generation
    assert SGMem.load(folder, hashing).stats() == saved


def test_cli_query_with_nothing_listening_fails_with_one_line(
    kb_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    argv = ["query", str(kb_dir), "Where does Maya work now?", "--chroma-server", f"127.0.0.1:{port}"]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("gravity: error: chroma: cannot connect to the Chroma server at ")
    assert f"http://127.0.0.1:{port} after 4 attempts" in lines[0]
