"""The forgetting guide (docs/guides/forgetting.md) runs as written, offline, in a fresh interpreter."""

from __future__ import annotations

import re
from pathlib import Path

from gravity_core.storage.store import AnchorStore
from tests.readme_sections import python_blocks, run_section, section

PAGE = "docs/guides/forgetting.md"
HEADING = "# Forgetting, and one KB per user"


def test_the_forgetting_section_runs_offline(tmp_path: Path) -> None:
    assert len(python_blocks(section(HEADING, PAGE))) == 4
    run = run_section(HEADING, tmp_path, page=PAGE)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    forgot = re.search(r"^forgot (\d+), (\d+) remain; events (\d+) -> (\d+)$", out, re.M)
    assert forgot is not None, out
    assert int(forgot.group(1)) + int(forgot.group(2)) == 96 and int(forgot.group(4)) < int(forgot.group(3))
    kb = AnchorStore(tmp_path / "kb-forget").load().kb
    assert "session_2" not in kb.sessions() and len(kb.utterances) == int(forgot.group(2))
    assert AnchorStore(tmp_path / "kb-forget").generations() == [
        AnchorStore(tmp_path / "kb-forget").current_generation()
    ]
    assert "<gravity_anchors>" in out and "Jonas" in out  # u-17's anchors
    assert out.splitlines()[-4:-2] == ["True", "[]"]  # u-42 got none; u-17's folder was deleted
    # Back for the frameworks: the LangChain retriever's documents and the LlamaIndex fusion
    # retriever's nodes are all u-17's.
    assert out.splitlines()[-2:] == ["4 {'u-17'}", "4 {'u-17'}"]
