"""The SGMem guide (docs/guides/sgmem.md) runs as written, offline, in a fresh interpreter."""

from __future__ import annotations

import re
from pathlib import Path

from tests.readme_sections import python_blocks, run_section, section

PAGE = "docs/guides/sgmem.md"
HEADING = "# SGMem: a sentence-graph host memory"


def test_the_sgmem_section_runs_offline(tmp_path: Path) -> None:
    assert len(python_blocks(section(HEADING, PAGE))) >= 6
    run = run_section(HEADING, tmp_path, page=PAGE)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "'sessions': 6" in out and "'turns': 96" in out
    assert re.search(r"^\d\.\d{3} session_\d/r\d+ \(", out, re.M)  # ranked rounds with their turns
    assert "Biscuit" in out and "# Conversation excerpts" in out
    assert "('fact', 'Maya has worked at Northwind General for eight years.')" in out
    assert "['When did Maya adopt Biscuit?']" in out  # the shipped policy searches the question alone
    assert re.search(r"^session_\d/r\d+ round \['session_", out, re.M)  # LangChain documents
    assert re.search(r"^session_\d:\d+ \['session_", out, re.M)  # LlamaIndex nodes
    assert (tmp_path / "sgmem-sample" / "manifest.json").exists()
    # The plain-vs-walked example: the walk changes the top five, and the guide shows what it prints.
    plain = re.search(r"^plain: +(\[.*\])$", out, re.M)
    walked = re.search(r"^walked: +(\[.*\])$", out, re.M)
    assert plain and walked and plain.group(1) != walked.group(1)
    assert re.search(r"'session_\d+:\d+', [12]\)", walked.group(1))  # a turn reached by the graph walk
    shown = re.search(r"^```text\n(plain: .*?)^```", section(HEADING, PAGE), re.M | re.S)
    assert shown and shown.group(1).splitlines() == [plain.group(0), walked.group(0)]
