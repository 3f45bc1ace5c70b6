"""Runs the python blocks of a Markdown page (README.md or a docs/ page) as a reader would, in a fresh
interpreter.

A block is a ```` ```python ```` fence at the start of a line. The blocks of a page (or of one section of
it) run in order, as one script, in a working folder that holds ``examples/sample_conversation.jsonl`` as
the repository root does. A block that is not meant to run is marked by the HTML comment
``<!-- no-run -->`` alone on the line right before its fence: it is left out here, and so out of
``tests/test_docs_site.py``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = "README.md"
NO_RUN = "<!-- no-run -->"
_HEADING = re.compile(r"^(#{1,6}) ")
_FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)")


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: its opening fence's line (1-based), its language, its code, whether it runs."""

    line: int
    language: str
    code: str
    runs: bool


def read(page: str = README) -> str:
    """The text of ``page``, a path relative to the repository root."""
    return (ROOT / page).read_text(encoding="utf-8")


def _outside_fences(lines: Sequence[str]) -> list[bool]:
    """For each line, whether it is outside every fenced code block (fence lines count as inside)."""
    outside, fence = [], ""
    for line in lines:
        match = _FENCE.match(line)
        if fence:
            outside.append(False)
            if line.strip() == fence:
                fence = ""
        elif match:
            outside.append(False)
            fence = match.group(1)
        else:
            outside.append(True)
    return outside


def section(heading: str | None = None, page: str = README) -> str:
    """The text of ``page`` under ``heading`` (e.g. ``"## Quick start"``) up to the next heading of the same
    or a higher level; the whole page when ``heading`` is None. Lines in code blocks are never headings."""
    text = read(page)
    if heading is None:
        return text
    lines = text.splitlines(keepends=True)
    level = len(heading) - len(heading.lstrip("#"))
    outside = _outside_fences(lines)
    starts = [i for i, line in enumerate(lines) if outside[i] and line.rstrip() == heading.rstrip()]
    assert starts, f"no '{heading}' section in {page}"
    start = starts[0] + 1
    for i in range(start, len(lines)):
        found = _HEADING.match(lines[i])
        if outside[i] and found and len(found.group(1)) <= level:
            return "".join(lines[start:i])
    return "".join(lines[start:])


def code_blocks(markdown: str) -> list[CodeBlock]:
    """Every fenced block whose fence starts a line, in order."""
    lines = markdown.splitlines(keepends=True)
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        fence, language, first = match.group(1), match.group(2), i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i])
            i += 1
        marked = first > 0 and lines[first - 1].strip() == NO_RUN
        blocks.append(CodeBlock(line=first + 1, language=language, code="".join(body), runs=not marked))
        i += 1
    return blocks


def python_blocks(markdown: str) -> list[str]:
    """The code of the ```python blocks meant to run, in order."""
    return [block.code for block in code_blocks(markdown) if block.language == "python" and block.runs]


def prepare_workdir(workdir: Path) -> None:
    """Give ``workdir`` the examples the pages read, as the repository root holds them."""
    (workdir / "examples").mkdir(exist_ok=True)
    shutil.copy(ROOT / "examples" / "sample_conversation.jsonl", workdir / "examples")


def run_script(code: str, workdir: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as a script file in a fresh interpreter, in ``workdir`` (given the examples first)."""
    prepare_workdir(workdir)
    script = workdir / "readme_section.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_section(
    heading: str | None, workdir: Path, timeout: float = 180, page: str = README
) -> subprocess.CompletedProcess[str]:
    """Run the blocks of ``page``'s section under ``heading`` (None: the whole page) in ``workdir``.

    Returns the finished process: its exit status, stdout and stderr.
    """
    return run_script("\n\n".join(python_blocks(section(heading, page))), workdir, timeout)
