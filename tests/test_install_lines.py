"""The README's install lines work as written (issue #16): extras that exist, hints that match, a wheel.

GRAVITY is not on PyPI, so a fresh environment installs it from the clone (``pip install -e '.[...]'``)
or from a wheel built here; ``pip install 'gravity-memory[EXTRA]'`` then adds an extra to it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import gravity_core
from gravity_core.errors import MissingDependencyError
from tests.readme_sections import section

REPO = Path(__file__).resolve().parents[1]
QUICK_START = "## Quick start"


def _install_lines() -> list[str]:
    blocks = re.findall(r"^```bash\n(.*?)^```", section(QUICK_START), re.M | re.S)
    return [line for block in blocks for line in block.splitlines() if line.startswith("pip ")]


def _extras() -> set[str]:
    with open(REPO / "pyproject.toml", "rb") as handle:
        return set(tomllib.load(handle)["project"]["optional-dependencies"])


def test_every_extra_the_readme_installs_exists() -> None:
    lines = _install_lines()
    assert any(
        line.startswith("pip install -e '.[") for line in lines
    )  # from the clone, as a fresh machine must
    named = {
        extra for line in lines for group in re.findall(r"\[([\w,]+)\]", line) for extra in group.split(",")
    }
    assert named and named <= _extras(), named - _extras()
    listed = set(re.findall(r"`(\w+)`", section(QUICK_START).split("They are ", 1)[1].split(":", 1)[0]))
    assert listed == _extras() - {"dev"}, listed ^ (_extras() - {"dev"})


def test_the_missing_dependency_hint_is_the_readmes() -> None:
    hint = str(MissingDependencyError("onnxruntime", "local", "The offline MiniLM embedder"))
    quoted = " ".join(section(QUICK_START).split())
    assert f"`{hint}`" in quoted
    assert "pip install 'gravity-memory[local]'" in hint and "pip install -e '.[local]'" in hint


def test_the_wheel_the_readme_names_builds_from_the_clone(tmp_path: Path) -> None:
    build = next(line for line in _install_lines() if line.startswith("pip wheel"))
    wheel = re.search(r"dist/(gravity_memory-[\w.]+-py3-none-any\.whl)", build)
    assert (
        wheel is not None and wheel.group(1) == f"gravity_memory-{gravity_core.__version__}-py3-none-any.whl"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(REPO), "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if (
        result.returncode != 0
        and "hatchling" in result.stderr
        and "No matching distribution" in result.stderr
    ):
        pytest.skip("no package index to take hatchling from")
    assert result.returncode == 0, result.stderr[-2000:]
    assert [p.name for p in tmp_path.iterdir()] == [wheel.group(1)]
