"""The MCP server in process (``mcp.Client(server)``): tools, validation, remember, start-up errors."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from mcp import Client

from gravity_core.build.builder import BuildReport
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.serving.memory_tools import MemoryTools
from gravity_core.storage.store import AnchorStore
from gravity_mcp import SingleKB, UserRoot, make_server
from tests.mcp.checks import call_ok, check_one_kb, check_users, expect_error

PARROT = {
    "speaker": "Maya",
    "content": "I adopted a parrot called Kiwi today.",
    "timestamp": "2024-06-01T10:00:00Z",
}


def utterance_count(kb_dir: Path) -> int:
    return len(AnchorStore(kb_dir).load().kb.utterances)


async def test_the_tools_over_one_kb_answer_as_memory_tools_and_refuse_bad_calls(kb_dir: Path) -> None:
    async with Client(make_server(SingleKB(kb_dir))) as client:
        await check_one_kb(client, kb_dir, remember=False)


async def test_the_tools_over_a_users_root_take_a_checked_user_id(users_root: Path) -> None:
    async with Client(make_server(UserRoot(users_root, embedder=HashingEmbedder()))) as client:
        await check_users(client, users_root)


async def test_the_tools_say_whether_they_write_and_the_server_says_how_to_use_them(users_root: Path) -> None:
    async with Client(
        make_server(UserRoot(users_root, embedder=HashingEmbedder()), allow_remember=True)
    ) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        instructions = client.instructions or ""
        server = client.server_info
    assert set(tools) == {"search_memory", "entity_profile", "timeline", "topic_arc", "kb_stats", "remember"}
    for name, tool in tools.items():
        assert tool.annotations is not None and tool.annotations.read_only_hint is (name != "remember")
        assert tool.description and tool.input_schema["required"][0] == "user_id"
    assert "search_memory" in instructions and "user_id" in instructions and "remember" in instructions
    assert server is not None and server.name == "gravity"


async def test_remembered_messages_reach_the_live_engine_and_the_folder(kb_dir: Path) -> None:
    before = utterance_count(kb_dir)
    async with Client(make_server(SingleKB(kb_dir), allow_remember=True)) as client:
        assert "No entity profile named 'Kiwi'" in await call_ok(client, "entity_profile", {"name": "Kiwi"})
        said = await call_ok(client, "remember", {"messages": [PARROT]})
        assert said == "Remembered 1 new message(s); 0 already in memory."
        profile = await call_ok(client, "entity_profile", {"name": "Kiwi"})
        assert "Kiwi (pet)" in profile and "parrot" in profile
        # The same message again is kept once.
        again = await call_ok(client, "remember", {"messages": [PARROT]})
        assert again == "Remembered 0 new message(s); 1 already in memory."
        assert f"{before + 1} utterances" in await call_ok(client, "kb_stats", {})
    kept = AnchorStore(kb_dir).load().kb.utterances
    assert len(kept) == before + 1
    parrot = [u for u in kept.values() if "parrot" in u.text]
    assert [(u.speaker, u.session, u.timestamp) for u in parrot] == [
        ("Maya", "mcp", datetime(2024, 6, 1, 10, tzinfo=UTC))
    ]


async def test_a_message_without_a_time_is_remembered_at_the_servers_clock(kb_dir: Path) -> None:
    clock = datetime(2024, 6, 9, 8, 30, tzinfo=UTC)
    server = make_server(SingleKB(kb_dir), allow_remember=True, clock=lambda: clock)
    async with Client(server) as client:
        await call_ok(
            client, "remember", {"messages": [{"role": "assistant", "content": "Noted: Kiwi likes grapes."}]}
        )
    (turn,) = [u for u in AnchorStore(kb_dir).load().kb.utterances.values() if "grapes" in u.text]
    assert (turn.speaker, turn.timestamp) == ("Assistant", clock)


async def test_bad_messages_are_tool_errors_and_change_nothing(kb_dir: Path) -> None:
    before = utterance_count(kb_dir)
    async with Client(make_server(SingleKB(kb_dir), allow_remember=True)) as client:
        await expect_error(client, "remember", {}, "messages", "Field required")
        await expect_error(client, "remember", {"messages": []}, "messages", "at least 1 item")
        await expect_error(client, "remember", {"messages": "hello"}, "messages", "valid list")
        await expect_error(client, "remember", {"messages": [{"text": "hi"}]}, "content", "Field required")
        await expect_error(client, "remember", {"messages": [{"content": 3}]}, "content", "valid string")
        await expect_error(
            client,
            "remember",
            {"messages": [{"content": "hi", "timestamp": "soonish"}]},
            "messages[0]",
            'message["timestamp"]',
            "cannot read 'soonish' as a timestamp",
        )
        await expect_error(
            client,
            "remember",
            {"messages": [{"role": "system", "content": "You are a pirate."}]},
            "no message to remember",
        )
        await expect_error(
            client,
            "remember",
            {"messages": [{"content": "hi", "id": "session_1:1"}]},
            "session_1:1",
            "differs from the utterance with this id already in the KB",
        )
        assert f"{before} utterances" in await call_ok(client, "kb_stats", {})
    assert utterance_count(kb_dir) == before


async def test_remembering_for_users_keeps_each_users_kb_apart(users_root: Path) -> None:
    async with Client(
        make_server(UserRoot(users_root, embedder=HashingEmbedder()), allow_remember=True)
    ) as client:
        ana_before = await call_ok(client, "kb_stats", {"user_id": "ana"})
        await expect_error(client, "kb_stats", {"user_id": "cara"}, "user 'cara' has no memory here")
        said = await call_ok(client, "remember", {"user_id": "cara", "messages": [PARROT]})
        assert said == "Remembered 1 new message(s); 0 already in memory."
        assert "1 utterances in 1 sessions" in await call_ok(client, "kb_stats", {"user_id": "cara"})
        assert "Kiwi" in await call_ok(client, "entity_profile", {"user_id": "cara", "name": "Kiwi"})
        assert "No entity profile named 'Kiwi'" in await call_ok(
            client, "entity_profile", {"user_id": "ana", "name": "Kiwi"}
        )
        assert await call_ok(client, "kb_stats", {"user_id": "ana"}) == ana_before
        for bad in ("../cara", "x/y"):
            await expect_error(
                client, "remember", {"user_id": bad, "messages": [PARROT]}, "cannot name a folder"
            )
    assert sorted(p.name for p in users_root.iterdir()) == ["ana", "ben", "cara"]


async def test_dates_are_read_as_iso_days_and_a_blank_optional_argument_is_not_given(kb_dir: Path) -> None:
    tools = MemoryTools(GravityEngine.from_dir(kb_dir))
    async with Client(make_server(SingleKB(kb_dir))) as client:
        blank = await call_ok(client, "timeline", {"person": " ", "start": "", "end": "", "limit": 2})
        assert blank == await call_ok(client, "timeline", {"limit": 2}) == tools.timeline(limit=2)
        march = await call_ok(client, "timeline", {"start": "2024-03-01", "end": "2024-03-31"})
        assert march == tools.timeline(start=date(2024, 3, 1), end=date(2024, 3, 31))
        asked = "What did Maya do last week?"
        dated = await call_ok(client, "search_memory", {"query": asked, "question_date": "2024-03-10"})
        assert dated == tools.search(asked, question_date=date(2024, 3, 10))
        undated = await call_ok(client, "search_memory", {"query": asked, "question_date": " "})
        assert undated == tools.search(asked)


class CrashingOnce:
    """A memory source whose first call crashes with an error that is not GRAVITY's."""

    def __init__(self, inner: SingleKB) -> None:
        self.inner = inner
        self.per_user = False
        self.crashed = False

    def memory(self, user_id: str | None) -> MemoryTools:
        if not self.crashed:
            self.crashed = True
            raise RuntimeError("secret detail: /srv/private/path")
        return self.inner.memory(user_id)

    def remember(self, user_id: str | None, utterances: Sequence[Utterance]) -> BuildReport:
        return self.inner.remember(user_id, utterances)


async def test_an_unexpected_failure_is_a_tool_error_without_its_details_and_the_server_goes_on(
    kb_dir: Path,
) -> None:
    async with Client(make_server(CrashingOnce(SingleKB(kb_dir)))) as client:
        message = await expect_error(client, "kb_stats", {}, "Error executing tool kb_stats")
        assert "secret" not in message and "/srv/private" not in message
        assert "utterances" in await call_ok(client, "kb_stats", {})


def test_start_up_refuses_a_missing_folder_and_a_folder_without_a_kb(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="there is no such folder"):
        SingleKB(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigurationError, match="holds no KB"):
        SingleKB(tmp_path / "empty")
    with pytest.raises(ConfigurationError, match="there is no such folder"):
        UserRoot(tmp_path / "no-root")


def test_without_the_mcp_package_making_a_server_names_the_extra(kb_dir: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['mcp'] = None\n"
        "import gravity_mcp\n"  # importing the package needs no mcp
        "from gravity_core.errors import MissingDependencyError\n"
        "try:\n"
        f"    gravity_mcp.make_server(gravity_mcp.SingleKB({str(kb_dir)!r}))\n"
        "except MissingDependencyError as exc:\n"
        "    print('MISSING', exc.package, exc.extra, exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "MISSING mcp mcp" in done.stdout and "pip install 'gravity-memory[mcp]'" in done.stdout


async def test_the_token_budget_bounds_every_answer(kb_dir: Path) -> None:
    source = SingleKB(kb_dir, token_budget=120)
    tools = MemoryTools(GravityEngine.from_dir(kb_dir), token_budget=120)
    count = source.engine.counter.count
    async with Client(make_server(source)) as client:
        searched = await call_ok(client, "search_memory", {"query": "Where does Maya work now?"})
        dated = await call_ok(client, "timeline", {"person": "Maya"})
    assert searched == tools.search("Where does Maya work now?") and count(searched) <= 120
    assert dated == tools.timeline("Maya") and count(dated) <= 120
    assert len(dated) < len(
        MemoryTools(GravityEngine.from_dir(kb_dir)).timeline("Maya")
    )  # the default is 800
