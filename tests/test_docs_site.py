"""The documentation site (issue #36): it builds offline with ``--strict``, every ```python block of every
page runs, and README.md stays a front page whose links lead somewhere.

The blocks of a page run in order, as one script in a fresh interpreter whose working folder holds
``examples/`` (as the README's sections always ran, see ``tests/readme_sections.py``); each block is its own
test case, passed once the script got past it. A block not meant to run is marked ``<!-- no-run -->`` on the
line before its fence.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.readme_sections import README, ROOT, code_blocks, python_blocks, read, run_script

DOCS = ROOT / "docs"
PAGES = [README, *sorted(p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md"))]
MAX_README_LINES = 300
PAGE_TIMEOUT = 900

# Run mkdocs with every outgoing connection refused: the build must need no network at all.
_OFFLINE_MKDOCS = """
import socket
import sys


def _refuse(*args, **kwargs):
    raise OSError("the docs build tried to use the network")


socket.socket.connect = _refuse
socket.socket.connect_ex = _refuse
socket.create_connection = _refuse
socket.getaddrinfo = _refuse

from mkdocs.__main__ import cli

sys.argv = ["mkdocs", *sys.argv[1:]]
cli()
"""


def _marker(index: int) -> str:
    return f"<<gravity-docs: block {index} ran>>"


def _script(blocks: list[str]) -> str:
    """The page's blocks in order, each followed by a line that tells on stderr that it ran."""
    parts = []
    for index, block in enumerate(blocks):
        parts.append(block.rstrip("\n"))
        parts.append(f"__import__('sys').stderr.write('\\n{_marker(index)}\\n')")
    return "\n\n".join(parts) + "\n"


def _cases() -> list[tuple[str, int]]:
    return [(page, index) for page in PAGES for index in range(len(python_blocks(read(page))))]


@dataclass(frozen=True)
class PageRun:
    """One run of a page's blocks: how many ran, and what the interpreter printed."""

    ran: int
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def page_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], PageRun]:
    """Runs each page's blocks once (in a fresh interpreter and a fresh folder) and remembers the result."""
    runs: dict[str, PageRun] = {}

    def run(page: str) -> PageRun:
        if page not in runs:
            blocks = python_blocks(read(page))
            workdir = tmp_path_factory.mktemp(re.sub(r"\W+", "-", page))
            try:
                done = run_script(_script(blocks), workdir, timeout=PAGE_TIMEOUT)
                runs[page] = PageRun(
                    ran=sum(_marker(i) in done.stderr for i in range(len(blocks))),
                    returncode=done.returncode,
                    stdout=done.stdout,
                    stderr=done.stderr,
                )
            except subprocess.TimeoutExpired as exc:
                stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
                ran = sum(_marker(i) in stderr for i in range(len(blocks)))
                runs[page] = PageRun(ran, -1, "", f"{stderr}\ntimed out after {PAGE_TIMEOUT} s")
        return runs[page]

    return run


@pytest.mark.parametrize(("page", "index"), _cases(), ids=[f"{p}-block{i + 1}" for p, i in _cases()])
def test_python_block_runs(page: str, index: int, page_run: Callable[[str], PageRun]) -> None:
    blocks = [block for block in code_blocks(read(page)) if block.language == "python" and block.runs]
    result = page_run(page)
    if index < result.ran:
        return
    where = f"{page}, python block {index + 1} (line {blocks[index].line})"
    if index > result.ran:
        first = blocks[result.ran]
        pytest.fail(f"{where} not reached: block {result.ran + 1} (line {first.line}) failed first")
    pytest.fail(f"{where} failed (exit status {result.returncode}):\n{result.stderr[-4000:]}")


def test_every_python_fence_starts_its_line() -> None:
    """An indented ```python fence would be skipped by the runner, so none may exist."""
    for page in PAGES:
        indented = [n for n, line in enumerate(read(page).splitlines(), 1) if re.match(r"\s+```python", line)]
        assert not indented, f"{page}: indented ```python fences at lines {indented}; start them at column 0"


def test_few_blocks_are_marked_no_run() -> None:
    marked = [
        (page, block.line)
        for page in PAGES
        for block in code_blocks(read(page))
        if block.language == "python" and not block.runs
    ]
    assert len(marked) <= 3, marked


def test_site_builds_offline_and_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-c", _OFFLINE_MKDOCS, "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "Structured memory anchors" in index  # README's intro, included
    assert "fonts.googleapis.com" not in index and "fonts.gstatic.com" not in index
    api = (site / "api" / "gravity_core" / "index.html").read_text(encoding="utf-8")
    assert "GravityEngine" in api and "AnchorBuilder" in api  # the reference was generated from the code
    for page in PAGES[1:]:  # every page of docs/ became a page of the site
        name = Path(page).relative_to("docs").with_suffix("")
        built = site / "index.html" if name == Path("index") else site / name / "index.html"
        assert built.exists(), f"{page} was not built ({built})"


def test_readme_is_a_front_page() -> None:
    lines = read(README).splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines (at most {MAX_README_LINES})"


def test_every_page_the_readme_links_exists() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", read(README))
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert any(link.startswith("docs/") for link in local)
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
    linked = {link for link in local if link.startswith("docs/") and link.endswith(".md")}
    guides = {p.relative_to(ROOT).as_posix() for p in (DOCS / "guides").glob("*.md")}
    design = {p.relative_to(ROOT).as_posix() for p in (DOCS / "design").glob("*.md")}
    assert guides | design | {"docs/benchmarks.md"} <= linked, (guides | design) - linked
