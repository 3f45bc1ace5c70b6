"""cookbook/llamaindex_agent.py runs as written: the agent's LLM gets GRAVITY's memory block and the
answers of the memory tools it calls."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_cookbook import blocks, run_recipe


@pytest.mark.slow
def test_llamaindex_agent_with_gravity_memory_and_tools(tmp_path: Path) -> None:
    out = run_recipe("llamaindex_agent.py", cwd=tmp_path)
    where, march, pottery = blocks(out, "Q: ")
    for block in (where, march, pottery):
        # Memory: the anchors for the question reached the LLM's system message.
        anchors = re.search(r"memory block in the system message: (\d+) anchors", block)
        assert anchors and int(anchors.group(1)) > 0
    # Tools: each call's answer is what the LLM answered from.
    assert "tool call:   entity_profile(name='Maya')" in where
    assert re.search(r"tool result: - Maya \(person, speaker\) \|", where)
    assert re.search(r"answer: From memory: Maya \(person, speaker\) .*works at: .*Harbourside", where)
    assert "tool call:   timeline(person='Maya', start='2024-03-01', end='2024-03-31')" in march
    results = re.findall(r"tool result: - (.*)", march)
    assert len(results) >= 3 and all(" — Maya" in line for line in results)
    assert (
        "answer: From memory: Wednesday 6 March 2024 (Wednesday, said 9 March 2024) — Maya — signed the lease"
        in march
    )
    assert re.search(r"tool call:   topic_arc\(topic='pottery'\)\n  tool result: - .*pottery", pottery)


@pytest.mark.slow
def test_a_question_of_your_own_goes_through_search_memory(tmp_path: Path) -> None:
    out = run_recipe("llamaindex_agent.py", "--question", "Who is Biscuit?", cwd=tmp_path)
    [block] = blocks(out, "Q: ")
    assert "tool call:   search_memory(query='Who is Biscuit?')" in block
    assert re.search(r"tool result: - .*Biscuit", block)
