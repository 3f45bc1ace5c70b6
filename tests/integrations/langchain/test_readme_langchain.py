"""The LangChain guide (docs/guides/langchain.md) runs as written, offline, in a fresh interpreter."""

from __future__ import annotations

import re
from pathlib import Path

from tests.readme_sections import python_blocks, run_section, section

PAGE = "docs/guides/langchain.md"
HEADING = "# LangChain"


def test_the_langchain_section_runs_offline(tmp_path: Path) -> None:
    assert len(python_blocks(section(HEADING, PAGE))) >= 5
    run = run_section(HEADING, tmp_path, page=PAGE)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "Maya is a charge nurse at Harbourside in Bristol." in out  # the chains answered
    assert re.search(r"^session_\d+:\d+ ", out, re.M)  # the retriever printed host documents
    assert re.search(r"\('(entity|event|topic)', '[^']+', -?\d", out)  # the anchors event was seen
    assert "biscuit" in out.lower() and "maya" in out.lower()  # entities of the KB built from messages
    assert (tmp_path / "kb-sample" / "manifest.json").exists()
    assert (tmp_path / "kb-chat" / "manifest.json").exists()
