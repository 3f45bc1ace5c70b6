"""What every transport must show: the tools listed, answering as MemoryTools does, bad calls refused.

The same checks run on an in-process client (``mcp.Client(server)``), a stdio session and a
streamable HTTP session: each has ``list_tools()`` and ``call_tool(name, arguments)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gravity_core.embeddings import HashingEmbedder
from gravity_core.query.engine import GravityEngine
from gravity_core.serving.memory_tools import MemoryTools, UserMemoryTools
from gravity_core.serving.users import UserKBs

READ_ONLY = {"search_memory", "entity_profile", "timeline", "topic_arc", "kb_stats"}

#: One call of each read-only tool, with the MemoryTools call that must give the same text.
CALLS: list[tuple[str, dict[str, Any], Any]] = [
    (
        "search_memory",
        {"query": "Where does Maya work now?"},
        lambda t: t.search("Where does Maya work now?"),
    ),
    ("entity_profile", {"name": "biscuit"}, lambda t: t.profile("biscuit")),
    ("timeline", {"person": "Maya", "limit": 3}, lambda t: t.timeline("Maya", limit=3)),
    ("topic_arc", {"topic": "Hamburg Marathon"}, lambda t: t.topic_arc("Hamburg Marathon")),
    ("kb_stats", {}, lambda t: t.stats()),
]


def text_of(result: Any) -> str:
    """The text of a tool result's content blocks."""
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def tool_names(client: Any) -> set[str]:
    return {tool.name for tool in (await client.list_tools()).tools}


async def call_ok(client: Any, name: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, f"{name}({arguments}) failed: {text_of(result)}"
    return text_of(result)


async def expect_error(client: Any, name: str, arguments: dict[str, Any], *fragments: str) -> str:
    """The call is a tool error naming every fragment; the next call still works."""
    result = await client.call_tool(name, arguments)
    message = text_of(result)
    assert result.is_error, f"{name}({arguments}) did not fail: {message[:300]}"
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


async def check_one_kb(client: Any, kb_dir: Path, *, remember: bool) -> None:
    """The tools over one KB: listed, answering as MemoryTools over the same folder, bad calls refused."""
    assert await tool_names(client) == READ_ONLY | ({"remember"} if remember else set())
    tools = MemoryTools(GravityEngine.from_dir(kb_dir))
    for name, arguments, expected in CALLS:
        assert await call_ok(client, name, arguments) == expected(tools)
    assert "Biscuit (pet)" in await call_ok(client, "entity_profile", {"name": "Biscuit"})
    stats = await call_ok(client, "kb_stats", {})
    assert f"{len(tools.engine.records.utterances)} utterances" in stats

    await expect_error(client, "search_memory", {}, "query", "Field required")
    await expect_error(client, "entity_profile", {"name": 5}, "name", "valid string")
    await expect_error(client, "timeline", {"start": "March 1"}, "start must be a date written YYYY-MM-DD")
    await expect_error(client, "timeline", {"start": "2024-05-01", "end": "2024-03-01"}, "after end")
    await expect_error(client, "timeline", {"limit": 0}, "limit")
    await expect_error(client, "search_memory", {"query": "   "}, "query must not be empty")
    await expect_error(client, "forget_everything", {}, "forget_everything")
    if not remember:
        await expect_error(client, "remember", {"messages": [{"content": "hi"}]}, "remember")
    # After every refusal the server still answers.
    assert await call_ok(client, "kb_stats", {}) == stats


async def check_users(client: Any, root: Path) -> None:
    """The tools over a users root: every call names its user, who sees only their own KB."""
    assert await tool_names(client) == READ_ONLY
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert all("user_id" in tool.input_schema["required"] for tool in listed.values())
    per_user = UserMemoryTools(UserKBs(root, embedder=HashingEmbedder()))
    for user in ("ana", "ben"):
        tools = per_user.for_user(user)
        for name, arguments, expected in CALLS:
            assert await call_ok(client, name, {"user_id": user, **arguments}) == expected(tools)
    # Someone only ben's conversations name has a profile for ben and none for ana.
    names = {
        user: {e.name for e in per_user.for_user(user).engine.records.entities.values()}
        for user in ("ana", "ben")
    }
    only_bens = sorted(names["ben"] - names["ana"])[0]
    ben = await call_ok(client, "entity_profile", {"user_id": "ben", "name": only_bens})
    ana = await call_ok(client, "entity_profile", {"user_id": "ana", "name": only_bens})
    assert f"- {only_bens} (" in ben and ana.startswith(f"No entity profile named '{only_bens}'")

    for bad in ("../ben", "ana/../ben", "a/b", ".hidden", ""):
        await expect_error(client, "kb_stats", {"user_id": bad}, "cannot name a folder")
    await expect_error(client, "kb_stats", {"user_id": "nobody"}, "user 'nobody' has no memory here")
    await expect_error(client, "search_memory", {"query": "Biscuit"}, "user_id", "Field required")
    await expect_error(client, "kb_stats", {"user_id": 7}, "user_id", "valid string")
    assert "utterances" in await call_ok(client, "kb_stats", {"user_id": "ana"})
