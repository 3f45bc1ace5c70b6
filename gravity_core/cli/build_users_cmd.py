"""``gravity build-users INPUT ROOT``: build many users' KBs (one conversation each) in parallel.

Each user's KB goes to ``ROOT/<user id>/`` (as :class:`~gravity_core.serving.users.UserKBs` keeps them),
built with the offline extractor by a process pool on this machine (``--workers``) or by a Dask
cluster (``--scheduler``). A user whose conversation or build fails is listed with the reason; the
others are built all the same, and the exit code is 1.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gravity_core.build.builder import DEFAULT_BATCH_SIZE
from gravity_core.cli.build_cmd import _progress_bar
from gravity_core.errors import ConfigurationError, MissingDependencyError
from gravity_core.serving.many_users import (
    DEFAULT_CHUNK_SIZE,
    ManyUsersSettings,
    UserBuildResult,
    build_users,
    conversations_in,
)
from gravity_core.storage.files import write_json_atomic

__all__ = ["build_users_cmd"]


@contextmanager
def _executor(workers: int | None, scheduler: str | None) -> Iterator[tuple[Executor, int]]:
    """A process pool of ``workers``, or a Dask client's executor, with the number of workers.

    The pool's processes are spawned: no model state is forked.
    """
    if scheduler is None:
        count = workers or os.cpu_count() or 1
        with ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context("spawn")) as pool:
            yield pool, count
        return
    if workers is not None:
        raise ConfigurationError("--workers is for the local process pool; a Dask cluster has its own")
    try:
        from distributed import Client
    except ImportError as exc:
        raise MissingDependencyError("distributed", "dask", "Building on Dask (--scheduler)") from exc
    with Client(scheduler) as client:
        yield client.get_executor(), max(1, len(client.scheduler_info().get("workers", {})))


def build_users_cmd(
    input_path: Annotated[
        Path,
        typer.Argument(
            metavar="INPUT",
            help="A folder of conversation files (one user each, the file name without suffix the user id), "
            'or a JSON Lines file of {"user_id": ..., "utterances": [...]} lines.',
        ),
    ],
    root: Annotated[Path, typer.Argument(metavar="ROOT", help="Folder of the users' KB folders.")],
    workers: Annotated[
        int | None,
        typer.Option(min=1, metavar="N", help="Processes of the local pool (default: one per core)."),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="A Dask scheduler (tcp://host:8786) to run the builds on; its workers must see ROOT.",
        ),
    ] = None,
    embedder: Annotated[str, typer.Option(help="minilm (offline default) or hashing[:DIM].")] = "minilm",
    batch_size: Annotated[
        int, typer.Option(min=1, help="Utterances per extractor call.")
    ] = DEFAULT_BATCH_SIZE,
    chunk_size: Annotated[
        int, typer.Option(min=1, metavar="N", help="Users per task (each task loads the models once).")
    ] = DEFAULT_CHUNK_SIZE,
    report: Annotated[
        Path | None, typer.Option(metavar="FILE", help="Write every user's result here as JSON.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Build (or extend) the KBs of many users, each in its own folder under ROOT, in parallel."""
    console = Console(stderr=True, quiet=quiet)
    conversations = conversations_in(input_path)
    if not conversations:
        raise ConfigurationError(f"{input_path}: no conversation (*.json, *.jsonl) to build")
    with _executor(workers, scheduler) as (executor, count), _progress_bar(console, "users") as show:
        settings = ManyUsersSettings.for_workers(
            len(conversations),
            count,
            local=scheduler is None,
            embedder=embedder,
            batch_size=batch_size,
            chunk_size=chunk_size,
        )
        results = build_users(
            conversations, root, executor=executor, settings=settings, progress=show("building")
        )
    if report is not None:
        write_json_atomic(report, [r.to_dict() for r in results], indent=2)
    _summary(console, root, results)
    if any(not r.ok for r in results):
        raise typer.Exit(code=1)


def _summary(console: Console, root: Path, results: list[UserBuildResult]) -> None:
    built = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]
    workers = {r.worker for r in built}
    peak = max((r.worker_peak_rss_mb for r in built), default=0.0)
    console.print(
        f"{root}: {len(built)} user(s) built (+{sum(r.added for r in built)} utterances) by "
        f"{len(workers)} worker process(es), peak {peak:.0f} MB per worker; {len(failed)} failed",
        soft_wrap=True,
    )
    for result in failed:
        # An id with a newline or another control character is shown quoted: one line per user.
        shown = result.user_id if result.user_id.isprintable() else repr(result.user_id)
        console.print(f"  {shown}: {result.error}", soft_wrap=True, markup=False, highlight=False)
