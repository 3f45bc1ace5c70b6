"""The README's LlamaIndex section runs as written, offline, in a fresh process."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## LlamaIndex"
_FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def section_text() -> str:
    """The section in README.md once it is pasted there, else the draft in docs/."""
    for path in (ROOT / "README.md", ROOT / "docs" / "readme_llamaindex.md"):
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        start = text.find(f"\n{HEADING}\n") + 1 if not text.startswith(f"{HEADING}\n") else 0
        if text.startswith(f"{HEADING}\n") or start > 0:
            end = text.find("\n## ", start + len(HEADING))
            return text[start : end if end >= 0 else len(text)]
    raise AssertionError(f"no '{HEADING}' section in README.md or docs/readme_llamaindex.md")


def python_blocks(markdown: str) -> list[str]:
    return [match.group(1) for match in _FENCE.finditer(markdown)]


def test_section_is_found_and_has_code() -> None:
    blocks = python_blocks(section_text())
    assert len(blocks) >= 5
    assert "GravityFusionRetriever" in "\n".join(blocks)


def test_python_blocks_run_in_order(tmp_path: Path) -> None:
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "sample_conversation.jsonl", tmp_path / "examples")
    script = tmp_path / "readme_llamaindex.py"
    script.write_text("\n\n".join(python_blocks(section_text())), encoding="utf-8")
    try:
        result = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=180
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the README's LlamaIndex code did not finish in 180 s")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "<gravity_anchors>" in out and "Query: Where did Maya move to?" in out
    assert "<gravity>" in out
    assert "2 turns added" in out
    assert "When did Jonas ship the game? [(" in out
    assert (tmp_path / "kb-sample").is_dir() and (tmp_path / "kb-chat").is_dir()
