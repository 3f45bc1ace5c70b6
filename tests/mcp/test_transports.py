"""The server as a client meets it: a spawned process over stdio and streamable HTTP (the SDK clients)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import IO

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from gravity_core.storage.store import AnchorStore
from tests.conftest import free_port
from tests.mcp.checks import call_ok, check_one_kb, check_users, expect_error

TIMEOUT_S = 120
PARROT = {
    "speaker": "Maya",
    "content": "I adopted a parrot called Kiwi today.",
    "timestamp": "2024-06-01T10:00:00Z",
}


@asynccontextmanager
async def stdio_session(command: list[str], errlog: IO[str]) -> AsyncIterator[ClientSession]:
    """An initialized client session with the server ``command`` starts (its stderr to ``errlog``).

    The server gets this process's environment (the SDK passes only a few variables by default).
    """
    parameters = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with (
        stdio_client(parameters, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def server_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "gravity_mcp", *args]


async def test_over_stdio_the_tools_answer_and_bad_calls_are_tool_errors(
    kb_dir: Path, tmp_path: Path
) -> None:
    with (tmp_path / "stderr.log").open("w") as errlog, anyio.fail_after(TIMEOUT_S):
        async with stdio_session(server_command(str(kb_dir)), errlog) as session:
            await check_one_kb(session, kb_dir, remember=False)


async def test_over_stdio_a_users_root_takes_checked_user_ids(users_root: Path, tmp_path: Path) -> None:
    command = server_command("--users", str(users_root), "--embedder", "hashing")
    with (tmp_path / "stderr.log").open("w") as errlog, anyio.fail_after(TIMEOUT_S):
        async with stdio_session(command, errlog) as session:
            await check_users(session, users_root)


async def test_over_stdio_remember_writes_the_kb_the_server_then_answers_from(
    kb_dir: Path, tmp_path: Path
) -> None:
    before = len(AnchorStore(kb_dir).load().kb.utterances)
    with (tmp_path / "stderr.log").open("w") as errlog, anyio.fail_after(TIMEOUT_S):
        async with stdio_session(server_command(str(kb_dir), "--allow-remember"), errlog) as session:
            await check_one_kb(session, kb_dir, remember=True)
            assert "1 new message(s)" in await call_ok(session, "remember", {"messages": [PARROT]})
            assert "Kiwi (pet)" in await call_ok(session, "entity_profile", {"name": "Kiwi"})
            await expect_error(
                session, "remember", {"messages": [{"content": "hi", "timestamp": "?"}]}, "messages[0]"
            )
            assert f"{before + 1} utterances" in await call_ok(session, "kb_stats", {})
    assert len(AnchorStore(kb_dir).load().kb.utterances) == before + 1


async def test_the_gravity_command_serves_over_stdio(kb_dir: Path, tmp_path: Path) -> None:
    """``gravity mcp KB_DIR``: needs the ``gravity.commands`` entry point installed (``pip install -e .``)."""
    gravity = str(Path(sys.executable).parent / "gravity")
    with (tmp_path / "stderr.log").open("w") as errlog, anyio.fail_after(TIMEOUT_S):
        async with stdio_session([gravity, "mcp", str(kb_dir)], errlog) as session:
            await check_one_kb(session, kb_dir, remember=False)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{missing}"], "there is no such folder"),
        (["{empty}"], "holds no KB"),
        (["--users", "{missing}"], "there is no such folder"),
        ([], "give KB_DIR (one KB) or --users ROOT"),
        (["{kb}", "--port", "9"], "--host and --port go with --transport http"),
    ],
)
def test_a_server_that_cannot_start_says_why_on_stderr_and_exits_1(
    args: list[str], message: str, kb_dir: Path, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    paths = {"missing": tmp_path / "missing", "empty": tmp_path / "empty", "kb": kb_dir}
    done = subprocess.run(
        server_command(*(arg.format(**paths) for arg in args)),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("gravity: error: ") and message in done.stderr


@contextmanager
def http_server(kb_dir: Path, log: Path) -> Iterator[str]:
    """``python -m gravity_mcp KB --transport http`` on a free loopback port; its URL once it listens."""
    port = free_port()
    with log.open("w") as out:
        process = subprocess.Popen(
            server_command(str(kb_dir), "--transport", "http", "--port", str(port), "--allow-remember"),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the MCP server did not listen on {port}:\n{log.read_text()[-3000:]}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


@pytest.mark.loopback
async def test_over_streamable_http_the_tools_answer_and_bad_calls_are_tool_errors(
    kb_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    with http_server(kb_dir, log) as url:
        with anyio.fail_after(TIMEOUT_S):
            async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                await check_one_kb(session, kb_dir, remember=True)
                assert "1 new message(s)" in await call_ok(session, "remember", {"messages": [PARROT]})
                assert "Kiwi (pet)" in await call_ok(session, "entity_profile", {"name": "Kiwi"})
        # A second client of the same server sees what the first remembered.
        with anyio.fail_after(TIMEOUT_S):
            async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                assert "Kiwi (pet)" in await call_ok(session, "entity_profile", {"name": "Kiwi"})
    assert f"serving GRAVITY's memory tools at {url}" in log.read_text()
