"""Runs the python blocks of one README section, as a reader would, in a fresh interpreter."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def section(heading: str) -> str:
    """The README text under ``heading`` (a ``## `` line), up to the next ``## `` heading."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = re.search(rf"^{re.escape(heading)}\s*$", readme, re.M)
    assert start is not None, f"no '{heading}' section in README.md"
    rest = readme[start.end() :]
    end = re.search(r"^## ", rest, re.M)
    return rest[: end.start()] if end else rest


def python_blocks(markdown: str) -> list[str]:
    """The code of the ```python blocks, in order."""
    return [match.group(1) for match in _FENCE.finditer(markdown)]


def run_section(heading: str, workdir: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run the section's blocks in order in ``workdir``, which holds examples/ like the repository root."""
    (workdir / "examples").mkdir(exist_ok=True)
    shutil.copy(ROOT / "examples" / "sample_conversation.jsonl", workdir / "examples")
    script = workdir / "readme_section.py"
    script.write_text("\n\n".join(python_blocks(section(heading))), encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
