"""Shared fixtures: the sample conversation's KB, built once per run, and a real Chroma server
(``chroma run``) for tests marked ``server``.

The network is blocked in every test (pytest-socket, ``--disable-socket`` in pyproject.toml); a test
marked ``server`` or ``loopback`` may open sockets, to 127.0.0.1 and ::1 only (``allow_hosts``).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.schema import Utterance
from gravity_core.storage.store import AnchorStore

SAMPLE_CONVERSATION = Path(__file__).resolve().parents[1] / "examples" / "sample_conversation.jsonl"

_HEARTBEAT_TIMEOUT_S = 30.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Let the tests that talk to a local server open sockets (still to loopback only)."""
    for item in items:
        if item.get_closest_marker("server") or item.get_closest_marker("loopback"):
            item.add_marker(pytest.mark.allow_hosts(["127.0.0.1", "::1"]))


_STOP_TIMEOUT_S = 10.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (at the time of the call)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ChromaServer:
    """A running ``chroma run`` subprocess."""

    host: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited within the timeout."""
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=_STOP_TIMEOUT_S)


def _start_chroma_server(folder: Path) -> ChromaServer:
    executable = Path(sys.executable).parent / "chroma"
    if not executable.exists():
        pytest.skip(f"no chroma executable next to {sys.executable} (install the 'chroma' extra)")
    folder.mkdir(parents=True, exist_ok=True)
    host, port, log = "127.0.0.1", free_port(), folder / "chroma.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(executable), "run", "--path", str(folder / "db"), "--port", str(port), "--host", host],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    server = ChromaServer(host=host, port=port, process=process, log=log)
    deadline = time.monotonic() + _HEARTBEAT_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(f"{server.url}/api/v2/heartbeat", timeout=1.0) as response:
                if response.status == 200:
                    return server
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
            pytest.fail(f"chroma server on port {port} did not answer its heartbeat:\n{tail}")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """``(host, port)`` of a Chroma server shared by the whole test session."""
    server = _start_chroma_server(tmp_path_factory.mktemp("chroma-server"))
    try:
        yield server.host, server.port
    finally:
        server.stop()


@pytest.fixture
def start_chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], ChromaServer]]:
    """Start a private Chroma server (for tests that stop it); all are stopped after the test."""
    started: list[ChromaServer] = []

    def start() -> ChromaServer:
        server = _start_chroma_server(tmp_path_factory.mktemp("chroma-private"))
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="session")
def nlp() -> Any:
    """The offline extractor's default spaCy pipeline, loaded once for the session."""
    from gravity_core.text.nlp import load_pipeline

    return load_pipeline()


# -- the sample KB -----------------------------------------------------------------------------
# Built once per run with the offline extractor and the hashing embedder. Read-only in every test:
# a test that adds, forgets or spies wraps these objects or builds its own.


@pytest.fixture(scope="session")
def sample_utterances() -> list[Utterance]:
    """The sample conversation (examples/sample_conversation.jsonl): 96 turns in 5 sessions."""
    return load_conversation(SAMPLE_CONVERSATION)


@pytest.fixture(scope="session")
def sample_kb(sample_utterances: list[Utterance]) -> AnchorBuilder:
    """The builder holding the sample conversation's KB and its vectors, in memory."""
    embedder = HashingEmbedder()
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder)
    builder.add(sample_utterances)
    return builder


@pytest.fixture(scope="session")
def sample_kb_dir(tmp_path_factory: pytest.TempPathFactory, sample_utterances: list[Utterance]) -> Path:
    """A folder holding the sample KB as ``gravity build`` saves it (with the hashing embedder)."""
    folder = tmp_path_factory.mktemp("sample") / "kb"
    embedder = HashingEmbedder()
    AnchorBuilder(OfflineExtractor(embedder), embedder, store=AnchorStore(folder)).add(sample_utterances)
    return folder
