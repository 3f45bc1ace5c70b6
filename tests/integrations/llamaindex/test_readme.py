"""The LlamaIndex guide (docs/guides/llamaindex.md) runs as written, offline, in a fresh process."""

from __future__ import annotations

from pathlib import Path

from tests.readme_sections import python_blocks, run_section, section

PAGE = "docs/guides/llamaindex.md"
HEADING = "# LlamaIndex"


def test_section_is_found_and_has_code() -> None:
    blocks = python_blocks(section(HEADING, PAGE))
    assert len(blocks) >= 5
    assert "GravityFusionRetriever" in "\n".join(blocks)


def test_python_blocks_run_in_order(tmp_path: Path) -> None:
    result = run_section(HEADING, tmp_path, page=PAGE)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "<gravity_anchors>" in out and "Query: Where did Maya move to?" in out
    assert "<gravity>" in out
    assert "2 turns added" in out
    assert "When did Jonas ship the game? [(" in out
    assert (tmp_path / "kb-sample").is_dir() and (tmp_path / "kb-chat-li").is_dir()
    assert not (tmp_path / "kb-chat").exists()  # the LangChain guide's folder: running both mixes nothing
