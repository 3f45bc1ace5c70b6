"""The layers of gravity_core, and its independence from the frameworks, are checked by
import-linter's contracts in ``pyproject.toml`` (the same run as ``make lint``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_import_contract_is_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 kept, 0 broken" in done.stdout


def test_gravity_core_has_at_most_six_top_level_modules() -> None:
    modules = sorted(p.name for p in (REPO / "gravity_core").glob("*.py"))
    assert len(modules) <= 6, modules
