"""Benchmark 9: building many users' KBs with 1, 2 and 4 worker processes, and on Dask.

Synthetic users (one conversation each, ``synthetic_conversation``) are built into fresh roots by
:func:`gravity_core.serving.many_users.build_users`, as ``gravity build-users`` does:

- ``pool-N``: a spawned ``ProcessPoolExecutor`` of N workers with ``gravity build-users``'s settings
  (``ManyUsersSettings.for_workers``: tasks of at most 16 users, each loading the models once, and
  the cores divided among the workers' embedders); the time includes starting the pool;
- ``dask-2``: the same through ``Client(LocalCluster(2 workers, 127.0.0.1)).get_executor()``, with
  ``--scheduler``'s settings (each worker's embedder keeps one thread per core: the cluster's
  machines are not this one); the cluster's start is not timed (a cluster outlives one job).

It reports each side's throughput against one worker's, the peak resident memory of a worker, and
whether every side built the same KBs as one worker.
"""

from __future__ import annotations

import logging
import multiprocessing
import shutil
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from functools import partial
from pathlib import Path

from benchmarks.common import BenchSettings, Result, ratio, timed
from benchmarks.conversation import synthetic_conversation
from benchmarks.workspace import Workspace
from gravity_core.serving.many_users import ManyUsersSettings, UserBuildResult, UserConversation, build_users
from gravity_core.storage.store import AnchorStore

__all__ = ["run"]

logger = logging.getLogger(__name__)


def run(settings: BenchSettings, workspace: Workspace) -> Result:
    """Build the synthetic users with each worker count (and Dask); one result."""
    result = Result(
        name="many_users",
        title="9. Many users' KBs: throughput with 1, 2 and 4 worker processes, and on Dask",
        sides={
            f"pool-{n}": f"build_users on a spawned ProcessPoolExecutor of {n} worker(s), pool start included"
            for n in settings.many_workers
        }
        | {"dask-2": "build_users on a 2-worker Dask LocalCluster (127.0.0.1; cluster start not timed)"},
    )
    users = [
        UserConversation(f"user-{i}", tuple(synthetic_conversation(settings.many_user_turns, seed=i)))
        for i in range(settings.many_users)
    ]
    root = workspace.root / "many_users"
    shutil.rmtree(root, ignore_errors=True)
    runs: dict[str, tuple[list[UserBuildResult], float]] = {}
    for workers in settings.many_workers:
        build = _build(users, root / f"pool-{workers}", settings.embedder, workers)
        runs[f"pool-{workers}"] = timed(partial(_pooled, workers, build))
    dask = _dask_run(users, root / "dask-2", settings.embedder)
    if dask is not None:
        runs["dask-2"] = dask
    first = f"pool-{settings.many_workers[0]}"
    reference = _kbs(root / first, users)
    figures: dict[str, dict[str, object]] = {}
    for side, (results, seconds) in runs.items():
        failed = [r.user_id for r in results if not r.ok]
        figures[side] = {
            "seconds": round(seconds, 2),
            "users_per_second": round(len(users) / seconds, 3),
            "worker_processes": len({r.worker for r in results}),
            "peak_rss_mb_per_worker": max((r.worker_peak_rss_mb for r in results), default=0.0),
            "failed": failed,
            "same_kbs_as_" + first: _kbs(root / side, users) == reference,
        }
    base = runs[first][1]
    for side, (_, seconds) in runs.items():
        if side != first:
            result.ratios.append(ratio(f"throughput {side} / {first}", base / seconds, None))
    result.ratios.append(
        ratio(
            "peak RSS per worker (MB)",
            max(float(f["peak_rss_mb_per_worker"]) for f in figures.values()),  # type: ignore[arg-type]
            None,
            note="the largest over the sides; VmHWM of each worker once its users were built",
        )
    )
    result.figures = {
        "users": len(users),
        "utterances_per_user": settings.many_user_turns,
        "embedder": settings.embedder,
        "sides": figures,
    }
    return result


def _build(
    users: list[UserConversation], root: Path, embedder: str, workers: int, *, local: bool = True
) -> Callable[[Executor], list[UserBuildResult]]:
    """What ``gravity build-users`` runs on ``workers`` workers (its chunks and threads)."""
    settings = ManyUsersSettings.for_workers(len(users), workers, local=local, embedder=embedder)
    return lambda executor: build_users(users, root, executor=executor, settings=settings)


def _pooled(workers: int, build: Callable[[Executor], list[UserBuildResult]]) -> list[UserBuildResult]:
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return build(pool)


def _dask_run(
    users: list[UserConversation], root: Path, embedder: str
) -> tuple[list[UserBuildResult], float] | None:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        logger.warning(
            "dask distributed is not installed: no dask-2 side (pip install 'gravity-memory[dask]')"
        )
        return None
    build = _build(users, root, embedder, 2, local=False)  # as with --scheduler: threads not divided
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        executor = client.get_executor()
        return timed(lambda: build(executor))


def _kbs(root: Path, users: list[UserConversation]) -> list[dict[str, object]]:
    return [
        AnchorStore(root / u.user_id).load().kb.to_dict() if (root / u.user_id).is_dir() else {}
        for u in users
    ]
