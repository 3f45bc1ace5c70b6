"""cookbook/mcp_client.py: an MCP client starts ``gravity mcp`` over stdio, lists the tools and calls each."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_cookbook import SAMPLE, run_recipe, session_sizes

TOOLS = {
    "search_memory": "read-only",
    "entity_profile": "read-only",
    "timeline": "read-only",
    "topic_arc": "read-only",
    "kb_stats": "read-only",
    "remember": "writes",
}


def stats(block: str) -> tuple[int, int]:
    found = re.search(r"(\d+) utterances in (\d+) sessions", block)
    assert found, block
    return int(found.group(1)), int(found.group(2))


@pytest.mark.slow
def test_an_mcp_client_lists_and_calls_every_tool(tmp_path: Path) -> None:
    out = run_recipe("mcp_client.py", cwd=tmp_path)
    turns = len(SAMPLE.read_text(encoding="utf-8").splitlines())
    assert f"built the sample KB: {turns} turns" in out
    assert re.search(r"connected to MCP server 'gravity' \d+\.\d+", out)
    assert f"{len(TOOLS)} tools:" in out
    for name, kind in TOOLS.items():
        assert re.search(rf"^  {name}\(.*\) \[{kind}\]: \w", out, re.MULTILINE), name

    # One block per call: "name({...})", then its result indented.
    calls = [block for block in out.split("\n\n") if re.match(r"\w+\(\{.*\}\)", block)]
    assert [block.split("(")[0] for block in calls] == [
        "kb_stats",
        "search_memory",
        "entity_profile",
        "timeline",
        "topic_arc",
        "remember",
        "entity_profile",
        "timeline",
        "kb_stats",
    ]
    by_call = {block.splitlines()[0]: block for block in calls}
    first_stats, last_stats = calls[0], calls[-1]
    sessions = len(session_sizes())
    assert stats(first_stats) == (turns, sessions)
    assert "Biscuit (pet)" in by_call["entity_profile({'name': 'Biscuit'})"]
    assert "<entity_profiles>" in calls[1] and "Harbourside" in calls[1]
    timeline = calls[3]
    events = [line for line in timeline.splitlines() if line.strip().startswith("- ")]
    assert 1 <= len(events) <= 5
    assert all("Maya" in e and re.search(r"(March|April) 2024", e) for e in events)
    assert "<topic_summaries>" in calls[4] and "pottery" in calls[4]
    # remember: the new message is in the KB at the next call.
    assert "Remembered 1 new message(s); 0 already in memory." in out
    assert re.search(r"Kiwi \(pet\) \| species: parrot", by_call["entity_profile({'name': 'Kiwi'})"])
    assert stats(last_stats) == (turns + 1, sessions + 1)  # the message's own session_7
    # The one malformed call is a tool error the model can read, and the calls after it still work.
    errors = re.findall(r"^(\w+)\((.*)\) -> TOOL ERROR$", out, re.MULTILINE)
    assert errors == [("timeline", "{'start': '15 June'}")]
    assert "start must be a date written YYYY-MM-DD, got '15 June'" in out
