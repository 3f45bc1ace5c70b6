"""The README's LangChain section runs as written, offline.

The section is read from README.md once it has been pasted there (heading ``## LangChain``), else from
docs/readme_langchain.md. Its python blocks run in order, in one fresh interpreter, in a temporary
folder holding the sample conversation (as the repository root does).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## LangChain"


def section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    text = (
        readme
        if re.search(rf"^{HEADING}\s*$", readme, re.M)
        else (ROOT / "docs" / "readme_langchain.md").read_text(encoding="utf-8")
    )
    start = re.search(rf"^{HEADING}\s*$", text, re.M)
    assert start is not None, "no LangChain section"
    rest = text[start.end() :]
    end = re.search(r"^## ", rest, re.M)
    return rest[: end.start()] if end else rest


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, re.M | re.S)


def test_the_langchain_section_runs_offline(tmp_path: Path) -> None:
    blocks = python_blocks(section())
    assert len(blocks) >= 5
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "sample_conversation.jsonl", tmp_path / "examples")
    script = tmp_path / "readme_langchain.py"
    script.write_text("\n\n".join(blocks), encoding="utf-8")

    run = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )

    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "Maya is a charge nurse at Harbourside in Bristol." in out  # the chains answered
    assert re.search(r"^session_\d+:\d+ ", out, re.M)  # the retriever printed host documents
    assert re.search(r"\('(entity|event|topic)', '[^']+', -?\d", out)  # the anchors event was seen
    assert "biscuit" in out.lower() and "maya" in out.lower()  # entities of the KB built from messages
    assert (tmp_path / "kb-sample" / "manifest.json").exists()
    assert (tmp_path / "kb-chat" / "manifest.json").exists()
