"""Crash safety: a build SIGKILLed at many points and restarted ends with the KB of an uninterrupted one.

The build runs in a subprocess (``tests/reliability/_crash_worker.py``: 10 batches with a fake model
that answers from the prompt alone, one batch re-asked once, one failing then recovered by
``retry_failed``, one failing for good). The worker kills itself at the N-th model request or the
N-th file operation of the store and the response cache (optionally after writing half of the
file: a torn write); the slow campaign also kills it from outside at random times. After every
kill the KB on disk must load and hold a prefix of the conversation; after the restarts it must
equal the uninterrupted build: same utterances, anchors, build log (but the wall-clock time a
batch failed) and vectors, no duplicates, no leftover staging folders.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gravity_core.storage.store import MANIFEST, WRITER_LOCK, AnchorStore
from tests.reliability._build_helpers import comparable, conversation, vectors_by_id
from tests.reliability._crash_worker import SESSIONS, TURNS

REPO = Path(__file__).resolve().parents[2]
ORDER = [u.id for u in conversation(sessions=SESSIONS, turns=TURNS)]
CHECKPOINTS = (1, 2, 5)


class Worker:
    """A fork server (``_crash_worker.py --serve``): one build per request, no interpreter start each."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRAVITY_")}
        env["OPENBLAS_NUM_THREADS"] = "1"  # no BLAS threads in a process that forks
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability._crash_worker", "--serve"],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(
        self,
        folder: Path,
        checkpoint: int,
        kill: str = "",
        torn: bool = False,
        kill_after: float | None = None,
        journal_only: bool = False,
        forget: str | None = None,
        sessions: int | None = None,
        delta_share: float | None = None,
    ) -> tuple[int, str, str, float]:
        """One build (or a forget of session ``forget``): its exit code (``-9`` when SIGKILLed),
        stdout, stderr and duration."""
        assert self.process.stdin is not None and self.process.stdout is not None
        request: dict[str, Any] = {
            "folder": str(folder),
            "checkpoint": checkpoint,
            "kill": kill,
            "torn": torn,
            "journal_only": journal_only,
            "forget": forget,
            "sessions": sessions,
            "delta_share": delta_share,
        }
        if kill_after is not None:
            request["kill_after"] = kill_after
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        return answer["code"], answer["out"], answer["err"], answer["seconds"]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def workers() -> Iterator[list[Worker]]:
    """Two fork servers, one per core."""
    started = [Worker(), Worker()]
    try:
        yield started
    finally:
        for worker in started:
            worker.close()


@dataclass
class Reference:
    """The uninterrupted build's KB, and how many events of each kind its runs count."""

    kb: dict[str, Any]
    vectors: dict[str, Any]
    seconds: float
    counts: dict[int, Counter[str]] = field(default_factory=dict)  # checkpoint -> per kind and op

    def add_run(self, worker: Worker, folder: Path, checkpoint: int) -> None:
        """An uninterrupted build with another checkpoint interval must end with the same KB."""
        code, out, err, _ = worker.run(folder, checkpoint)
        assert code == 0, err
        assert comparable(AnchorStore(folder).load().kb) == self.kb
        assert vectors_by_id(folder) == self.vectors
        summary = json.loads(out.strip().splitlines()[-1])
        self.counts[checkpoint] = Counter(summary["counts"]) + Counter(summary["ops"])


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, workers: list[Worker]) -> Reference:
    """The uninterrupted build, checkpointing every batch."""
    folder = tmp_path_factory.mktemp("reference")
    code, out, err, seconds = workers[0].run(folder, 1)
    assert code == 0, err
    kb = AnchorStore(folder).load().kb
    assert [f.utterance_ids[0] for f in kb.build.failed_batches] == ["S3:1"], "S2 recovered, S3 logged"
    events = list(kb.events.values())
    assert len({(e.what, tuple(e.sources)) for e in events}) == len(events), "no duplicate events"
    ref = Reference(kb=comparable(kb), vectors=vectors_by_id(folder), seconds=seconds)
    summary = json.loads(out.strip().splitlines()[-1])
    ref.counts[1] = Counter(summary["counts"]) + Counter(summary["ops"])
    return ref


def check_consistent_prefix(folder: Path) -> None:
    """After a kill: no KB yet, or one that loads and holds the conversation's first turns."""
    store = AnchorStore(folder)
    if not store.exists():
        return
    ids = list(store.load().kb.utterances)
    assert ids == ORDER[: len(ids)]


def check_final(folder: Path, ref: Reference) -> None:
    assert comparable(AnchorStore(folder).load().kb) == ref.kb
    assert vectors_by_id(folder) == ref.vectors
    leftovers = [p.name for p in folder.iterdir() if p.name.startswith(".") and p.name != WRITER_LOCK]
    assert not leftovers, leftovers
    # The current generation and the one before it, and the full generation a delta among them follows.
    store = AnchorStore(folder)
    kept = store.generations()
    bases = {base for g in kept if (base := store.base_of(g)) is not None}
    assert 1 <= len(kept) <= 2 + len(bases) and bases <= set(kept)
    assert store.current_generation() == kept[-1]
    assert (folder / MANIFEST).is_file()


def crash_and_resume(
    worker: Worker,
    folder: Path,
    checkpoint: int,
    plans: list[tuple[str, bool]],
    ref: Reference,
    journal_only: bool = False,
) -> list[str]:
    """Run with each kill plan in turn (stopping early if a run completes), then until done.

    ``journal_only``: the killed runs checkpoint to the journal only (no generation before the end).
    """
    kills: list[str] = []
    for plan, torn in plans:
        code, _, err, _ = worker.run(folder, checkpoint, plan, torn, journal_only=journal_only)
        if code != -signal.SIGKILL:
            assert code == 0, err
            break
        kills.append(next(line for line in err.splitlines() if line.startswith("KILL ")))
        check_consistent_prefix(folder)
    code, _, err, _ = worker.run(folder, checkpoint)
    assert code == 0, err
    check_final(folder, ref)
    return kills


@pytest.mark.parametrize(
    ("plans", "journal_only"),
    [
        ([("model:4", False)], False),  # mid-extraction, before the first checkpoint completes
        ([("io:60", True)], False),  # a torn write during a save
        ([("io:25", False), ("model:6", False), ("io:200", True)], False),  # three kills in a row
        ([("os.write:9", True)], True),  # a torn journal record
        ([("os.write:7", False), ("model:2", False), ("os.fsync:3", False)], True),  # journal replays
    ],
    ids=["model", "torn-write", "three-kills", "torn-journal-record", "journal-resumes"],
)
def test_killed_build_resumes_to_the_uninterrupted_kb(
    tmp_path: Path, workers: list[Worker], reference: Reference, plans: Any, journal_only: bool
) -> None:
    kills = crash_and_resume(workers[0], tmp_path / "kb", 1, plans, reference, journal_only)
    assert len(kills) == len(plans)


CAMPAIGN_TRIALS = 60
OUTSIDE_TRIALS = 16


@pytest.mark.slow
def test_kill_campaign(tmp_path: Path, workers: list[Worker], reference: Reference) -> None:
    """Many random kill points, from inside (model requests, file operations, torn writes) and outside.

    A third of the kills pick an operation type first (so rare ones such as pruning are hit too),
    the others any model request or file operation; checkpoints every 1, 2 and 5 batches.
    """
    for checkpoint in CHECKPOINTS[1:]:
        reference.add_run(workers[0], tmp_path / f"reference-{checkpoint}", checkpoint)
    rng = random.Random(20261130)
    ops = sorted(k for k in reference.counts[1] if k not in ("model", "io"))
    trials: list[tuple[int, list[tuple[str, bool]]]] = []
    for n in range(CAMPAIGN_TRIALS):
        checkpoint = CHECKPOINTS[n % len(CHECKPOINTS)]
        counts = reference.counts[checkpoint]
        plans = []
        for _ in range(rng.randint(1, 3)):
            draw = rng.random()
            kind = rng.choice(ops) if draw < 0.33 else "model" if draw < 0.55 else "io"
            if counts[kind]:
                plans.append((f"{kind}:{rng.randint(1, counts[kind])}", rng.random() < 0.5))
        trials.append((checkpoint, plans))

    free: queue.Queue[Worker] = queue.Queue()
    for worker in workers:
        free.put(worker)

    def trial(n: int) -> list[str]:
        checkpoint, plans = trials[n]
        worker = free.get()
        try:
            # Every fourth trial checkpoints to the journal only: kills in appends, long replays.
            return crash_and_resume(worker, tmp_path / f"t{n}", checkpoint, plans, reference, n % 4 == 3)
        finally:
            free.put(worker)

    def outside(n: int) -> int:
        """Up to three SIGKILLs from the server at random times, then a run to the end."""
        folder, kills, draw = tmp_path / f"o{n}", 0, random.Random(n)
        checkpoint = CHECKPOINTS[n % len(CHECKPOINTS)]
        worker = free.get()
        try:
            for _ in range(3):
                delay = draw.uniform(0.05, 0.7) * reference.seconds
                code, _, err, _ = worker.run(folder, checkpoint, kill_after=delay)
                if code == 0:
                    break
                assert code == -signal.SIGKILL, err
                kills += 1
                check_consistent_prefix(folder)
            code, _, err, _ = worker.run(folder, checkpoint)
            assert code == 0, err
        finally:
            free.put(worker)
        check_final(folder, reference)
        return kills

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        inside = [k for kills in pool.map(trial, range(len(trials))) for k in kills]
        from_outside = sum(pool.map(outside, range(OUTSIDE_TRIALS)))
    hit = Counter(line.split()[2] + (" (torn)" if line.endswith("torn") else "") for line in inside)
    print(  # noqa: T201 - the campaign's figures, shown with -s
        f"\nkill campaign: {len(inside)} kill points inside the build "
        f"({sum(1 for k in inside if k.startswith('KILL model'))} during a model request) "
        f"+ {from_outside} from outside, {CAMPAIGN_TRIALS + OUTSIDE_TRIALS} builds, all ended with "
        f"the uninterrupted KB ({time.monotonic() - start:.1f} s); "
        f"kills by operation: {dict(sorted(hit.items()))}"
    )
    assert len(inside) >= 60 and from_outside >= 10
    assert {op for op in ops} <= {k.removesuffix(" (torn)") for k in hit}, "every operation type was hit"
    assert hit["json.dump (torn)"] and hit["os.write (torn)"]
