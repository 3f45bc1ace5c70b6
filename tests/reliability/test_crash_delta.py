"""Crash safety of a delta generation: an add whose saves are deltas, SIGKILLed at every file
operation (its links to the base's files included), leaves a KB that loads and holds a prefix of the
conversation, and the next run ends with the KB of an uninterrupted one.

The add runs in the fork server of ``test_crash_resume.py`` (``_crash_worker.py``): a KB of the
first 4 sessions, then the 5-session build with the store's ``delta_share`` at 1 (every save after
the first is a delta, however large), so the add's generations link the 4-session one's files.
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
from tests.reliability.test_crash_resume import Worker, check_consistent_prefix, workers  # noqa: F401

ALWAYS_DELTA = 1.0


@pytest.fixture(scope="module")
def four_sessions(tmp_path_factory: pytest.TempPathFactory, workers: list[Worker]) -> Path:  # noqa: F811
    folder = tmp_path_factory.mktemp("four") / "kb"
    code, _, err, _ = workers[0].run(folder, 1, sessions=4)
    assert code == 0, err
    assert AnchorStore(folder).base_of(AnchorStore(folder).current_generation() or 0) is None
    return folder


@pytest.fixture(scope="module")
def added(
    four_sessions: Path,
    tmp_path_factory: pytest.TempPathFactory,
    workers: list[Worker],  # noqa: F811
) -> tuple[tuple[dict[str, Any], dict[str, Any]], int]:
    """The uninterrupted add's KB, and how many file operations it makes."""
    folder = tmp_path_factory.mktemp("added") / "kb"
    shutil.copytree(four_sessions, folder)
    code, out, err, _ = workers[0].run(folder, 1, delta_share=ALWAYS_DELTA)
    assert code == 0, err
    store = AnchorStore(folder)
    assert store.base_of(store.current_generation() or 0) is not None, "the add saved a delta"
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["ops"].get("os.link", 0) > 0
    return stored_state(folder), summary["counts"]["io"]


def test_an_add_saved_as_deltas_killed_at_any_file_operation_resumes_to_the_uninterrupted_kb(
    four_sessions: Path,
    added: tuple[tuple[dict[str, Any], dict[str, Any]], int],
    workers: list[Worker],  # noqa: F811
    tmp_path: Path,
) -> None:
    after, operations = added
    killed_in: set[str] = set()
    for n in range(1, operations + 1):
        for torn in (False, True) if n % 3 == 0 else (False,):  # torn writes at every third: time
            folder = tmp_path / f"kb-{n}-{int(torn)}"
            shutil.copytree(four_sessions, folder)
            worker = workers[n % 2]
            code, _, err, _ = worker.run(folder, 1, f"io:{n}", torn, delta_share=ALWAYS_DELTA)
            assert code == -signal.SIGKILL, err
            killed_in.add(next(line for line in err.splitlines() if line.startswith("KILL ")).split()[2])
            check_consistent_prefix(folder)
            code, _, err, _ = worker.run(folder, 1, delta_share=ALWAYS_DELTA)
            assert code == 0, err
            assert stored_state(folder) == after, f"io:{n} torn={torn}"
            leftovers = [p.name for p in folder.iterdir() if p.name.startswith(".g")]
            assert not leftovers, leftovers
            shutil.rmtree(folder)
    assert "os.link" in killed_in, killed_in
