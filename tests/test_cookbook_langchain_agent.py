"""cookbook/langchain_agent.py runs as written and shows what it says: anchors per turn, a KB that grows."""

from __future__ import annotations

import re
from pathlib import Path

from gravity_core.storage.store import AnchorStore
from tests.test_cookbook import blocks, run_recipe

FACT = "I signed Biscuit up for a puppy agility course at Clifton Downs yesterday."


def test_langchain_agent(tmp_path: Path) -> None:
    out = run_recipe("langchain_agent.py", "--workdir", str(tmp_path / "agent"), cwd=tmp_path)
    assert "Maya's KB: {'turns': 96," in out
    turns = blocks(out, "turn ")
    assert len(turns) == 3
    for turn in turns:
        # Both model calls of the turn (before and after the tool) got the anchors, after Nova's prompt.
        assert (
            "system prompt kept first: True" in turn and "anchors that reached the model (2 calls):" in turn
        )
    anchors = [re.findall(r"^    - (.*)$", turn, re.MULTILINE) for turn in turns]
    assert all(anchors)
    assert any(line.startswith("Harbourside Children's Hospital (organization") for line in anchors[0])
    # What Maya says in turn 2 is new to the KB then, and in the anchors of turn 3, dated by the run's day.
    assert not any("agility" in line for line in anchors[0] + anchors[1])
    assert any(
        "(yesterday, said 10 June 2024) — Maya — signed Biscuit up for a puppy agility course" in line
        for line in anchors[2]
    )
    # The KB grows by each turn's two messages with text; the same engine serves each new version.
    growth = [
        re.search(r"KB after the turn: turns (\d+) \(\+(\d+)\), .*generation (\d+)", turn) for turn in turns
    ]
    assert [(int(g[1]), int(g[2])) for g in growth if g] == [(98, 2), (100, 2), (102, 2)]
    generations = [int(g[3]) for g in growth if g]
    assert generations == sorted(set(generations))
    assert re.search(r"events \d+ \(\+1\)", turns[1])
    stored = AnchorStore(tmp_path / "agent" / "kb").load().kb.utterances
    assert len(stored) == 102
    said = [u for u in stored.values() if u.text == FACT]
    assert len(said) == 1 and said[0].speaker == "Maya" and said[0].session == "maya"
