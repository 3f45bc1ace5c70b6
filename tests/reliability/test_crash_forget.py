"""Crash safety of a forget: SIGKILLed at every file operation, a forget leaves the KB as it was or
as forgotten, never between; the next write (a forget again, or any build) finishes it, and then no
file holds a byte of the forgotten session.

The forget runs in the fork server of ``test_crash_resume.py`` (``_crash_worker.py``): the KB of
its 5-session build (fused LLM extraction with a fake model answering from the prompt) forgets
session 2, whose turns alone name York.
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from gravity_core.storage.store import AnchorStore
from tests.reliability._build_helpers import stored_state
from tests.reliability.test_crash_resume import Worker, workers  # noqa: F401 (a fixture)

FORGOTTEN = "session_2"
WORDS = ("York", "Session 2 turn")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, workers: list[Worker]) -> Path:  # noqa: F811
    folder = tmp_path_factory.mktemp("built") / "kb"
    code, _, err, _ = workers[0].run(folder, 1)
    assert code == 0, err
    assert holding(folder, "York")
    return folder


def holding(folder: Path, word: str) -> list[str]:
    data = word.encode("utf-8")
    return [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and data in p.read_bytes()]


@pytest.fixture(scope="module")
def forgotten(
    built: Path,
    tmp_path_factory: pytest.TempPathFactory,
    workers: list[Worker],  # noqa: F811
) -> tuple[tuple[dict[str, Any], dict[str, Any]], int]:
    """The uninterrupted forget's KB, and how many file operations it makes."""
    folder = tmp_path_factory.mktemp("forgotten") / "kb"
    shutil.copytree(built, folder)
    code, out, err, _ = workers[0].run(folder, 1, forget=FORGOTTEN)
    assert code == 0, err
    assert all(holding(folder, word) == [] for word in WORDS)
    return stored_state(folder), json.loads(out.strip().splitlines()[-1])["counts"]["io"]


def test_a_forget_killed_at_any_file_operation_is_all_or_nothing_and_finished_by_the_next_write(
    built: Path,
    forgotten: tuple[tuple[dict[str, Any], dict[str, Any]], int],
    workers: list[Worker],  # noqa: F811
    tmp_path: Path,
) -> None:
    after, operations = forgotten
    before = stored_state(built)
    assert operations > 10
    outcomes = {"as it was": 0, "forgotten": 0}
    for n in range(1, operations + 1):
        for torn in (False, True) if n % 3 == 0 else (False,):  # torn writes at every third: time
            folder = tmp_path / f"kb-{n}-{int(torn)}"
            shutil.copytree(built, folder)
            code, _, err, _ = workers[n % 2].run(folder, 1, f"io:{n}", torn, forget=FORGOTTEN)
            assert code == -signal.SIGKILL, err
            now = stored_state(folder)
            assert now in (before, after), f"io:{n} torn={torn}: a KB between the two"
            outcomes["as it was" if now == before else "forgotten"] += 1
            # The user runs the forget again: it forgets, or (done already) names the missing session;
            # either way the writer lock's first act deletes what a killed forget left behind.
            code, _, err, _ = workers[n % 2].run(folder, 1, forget=FORGOTTEN)
            assert code == 0 or "no session 'session_2' in this KB" in err, err
            assert stored_state(folder) == after
            left = {word: holding(folder, word) for word in WORDS}
            assert left == dict.fromkeys(WORDS, []), f"io:{n} torn={torn}: {left}"
            assert len(AnchorStore(folder).generations()) == 1
            shutil.rmtree(folder)
    assert outcomes["as it was"] and outcomes["forgotten"], outcomes
