"""The SGMem README section runs as written, offline, in a fresh interpreter."""

from __future__ import annotations

import re
from pathlib import Path

from tests.readme_sections import python_blocks, run_section, section

HEADING = "## SGMem: a sentence-graph host memory"


def test_the_sgmem_section_runs_offline(tmp_path: Path) -> None:
    assert len(python_blocks(section(HEADING))) >= 6
    run = run_section(HEADING, tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "'sessions': 6" in out and "'turns': 96" in out
    assert re.search(r"^\d\.\d{3} session_\d/r\d+ \(", out, re.M)  # ranked rounds with their turns
    assert "Biscuit" in out and "# Conversation excerpts" in out
    assert "('fact', 'Maya has worked at Northwind General for eight years.')" in out
    assert "['When did Maya adopt Biscuit?'," in out  # the question led the fused queries
    assert re.search(r"^session_\d/r\d+ round \['session_", out, re.M)  # LangChain documents
    assert re.search(r"^session_\d:\d+ \['session_", out, re.M)  # LlamaIndex nodes
    assert (tmp_path / "sgmem-sample" / "manifest.json").exists()
