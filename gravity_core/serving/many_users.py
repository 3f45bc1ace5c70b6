"""Building the KBs of many users (one conversation each) as independent tasks on any executor.

:func:`build_users` hands chunks of users to a :class:`concurrent.futures.Executor`: a
``ProcessPoolExecutor`` on one machine, or Dask distributed on a cluster
(``dask.distributed.Client(address).get_executor()``; the KB root must then be a folder every
worker sees). Each task loads the embedder and spaCy once and builds its users' KBs under
``<root>/<user id>/`` as :class:`~gravity_core.serving.users.UserKBs` does (offline extractor, parses and
answers kept in the user's folder). One bad conversation does not stop the rest: each user gets a
:class:`UserBuildResult`, with the error if it failed.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gravity_core.build.builder import DEFAULT_BATCH_SIZE, anchor_counts
from gravity_core.errors import ConfigurationError, GravityError, InputDataError
from gravity_core.schema import Utterance

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "ManyUsersSettings",
    "UserBuildResult",
    "UserConversation",
    "build_users",
    "conversations_in",
    "peak_rss_mb",
]

logger = logging.getLogger(__name__)

#: Users per task by default: a task loads spaCy and the embedder (about 300 MB) once for all its
#: users, so small users want large tasks; a worker that dies fails its task's users.
DEFAULT_CHUNK_SIZE = 16

#: ``progress(users_done, users_total)``, called in the submitting process as results arrive.
UsersProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class UserConversation:
    """One user's conversation, loaded by the worker that builds it.

    It is given as the utterances, a conversation file
    (:func:`~gravity_core.loaders.load_conversation`), or utterance records to check (as
    ``gravity build`` reads them; ``origin`` names them in errors).

    ``problem`` marks an input that names no usable conversation (it is reported, not built).
    """

    user_id: str
    utterances: tuple[Utterance, ...] = ()
    path: str | None = None
    records: tuple[Any, ...] | None = None
    origin: str = ""
    problem: str | None = None

    def load(self) -> list[Utterance]:
        """The utterances.

        Raises:
            InputDataError: the file or a record is malformed.
        """
        if self.path is not None:
            from gravity_core.loaders import load_conversation

            return load_conversation(self.path)
        if self.records is not None:
            from gravity_core.loaders._common import Document
            from gravity_core.loaders.utterances import utterances_from_document

            return utterances_from_document(Document(path=self.origin, value=list(self.records)))
        return list(self.utterances)


@dataclass(frozen=True)
class ManyUsersSettings:
    """How every task builds (sent to the workers, so plain values only).

    Args:
        embedder: the anchor embedder, as ``gravity build --embedder`` takes it (``minilm``,
            ``hashing[:DIM]``).
        batch_size: utterances per extractor call.
        chunk_size: users per task: each task loads the embedder and spaCy once for its users.
        threads_per_worker: the embedder's threads in each task (``None``: one per core). With
            several workers on one machine, its cores divided among them: a worker's MiniLM
            already uses every core, and more threads than cores only compete.
    """

    embedder: str = "minilm"
    batch_size: int = DEFAULT_BATCH_SIZE
    chunk_size: int = DEFAULT_CHUNK_SIZE
    threads_per_worker: int | None = None

    def __post_init__(self) -> None:
        threads = 1 if self.threads_per_worker is None else self.threads_per_worker
        if self.batch_size < 1 or self.chunk_size < 1 or threads < 1:
            raise ConfigurationError(
                "batch_size, chunk_size and threads_per_worker must be at least 1, got "
                f"{self.batch_size}, {self.chunk_size} and {self.threads_per_worker}"
            )

    @classmethod
    def for_workers(
        cls,
        users: int,
        workers: int,
        *,
        local: bool,
        embedder: str = "minilm",
        batch_size: int = DEFAULT_BATCH_SIZE,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> ManyUsersSettings:
        """The settings ``gravity build-users`` uses for ``users`` users on ``workers`` workers.

        Chunks are no larger than the users per worker, and ``local`` workers, sharing this machine,
        divide its cores among them.
        """
        workers = max(workers, 1)
        return cls(
            embedder=embedder,
            batch_size=batch_size,
            chunk_size=max(1, min(chunk_size, -(-users // workers))),
            threads_per_worker=max(1, (os.cpu_count() or 1) // workers) if local else None,
        )


@dataclass
class UserBuildResult:
    """What the build of one user's KB did, or why it failed."""

    user_id: str
    added: int = 0
    skipped: int = 0
    anchors: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0  # the task's first user also pays for loading spaCy and the embedder
    worker: str = ""  # host:pid of the process that built it
    worker_peak_rss_mb: float = 0.0  # that process's peak resident memory once it was done
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the user's KB was built."""
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``gravity build-users --report``)."""
        return asdict(self)


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB (0 where the platform does not say).

    Read from ``VmHWM`` where /proc has it: Linux keeps ``ru_maxrss`` across ``exec``, so a spawned
    worker's ``ru_maxrss`` is at least what its parent held when it forked.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB elsewhere


def build_users(
    conversations: Iterable[UserConversation],
    root: str | os.PathLike[str],
    *,
    executor: Executor | None = None,
    settings: ManyUsersSettings | None = None,
    progress: UsersProgress | None = None,
) -> list[UserBuildResult]:
    """Build (or extend) each user's KB under ``root``; one result per user, in input order.

    Args:
        conversations: the users' conversations; a user id may appear once.
        root: the folder of the users' KB folders (as :class:`~gravity_core.serving.users.UserKBs`).
        executor: runs the tasks; ``None`` runs them one after another in this process.
        settings: embedder, batch size and users per task.
        progress: called with (users done, users in all) as results arrive.

    A user whose id cannot name a folder, who appears twice, whose id differs only by case from
    an id earlier in the input or from a user's under ``root`` (``Alice``, ``alice``: one folder
    on macOS and Windows), whose conversation does not load or whose build fails gets a result
    with ``error`` set; so do the users of a task whose worker died. The others are built all
    the same.
    """
    settings = settings or ManyUsersSettings()
    users = list(conversations)
    results: dict[int, UserBuildResult] = {}
    runnable: list[tuple[int, UserConversation]] = []
    seen: dict[str, str] = {}  # casefolded id -> the id as first given
    for position, user in enumerate(users):
        problem = user.problem or _id_problem(user.user_id, seen)
        if problem is None:
            runnable.append((position, user))
        else:
            results[position] = UserBuildResult(user_id=str(user.user_id), error=problem)
    chunks = [runnable[i : i + settings.chunk_size] for i in range(0, len(runnable), settings.chunk_size)]
    done = len(results)
    if progress:
        progress(done, len(users))

    def users_of(chunk: list[tuple[int, UserConversation]]) -> list[UserConversation]:
        return [user for _, user in chunk]

    outcomes: Iterator[tuple[list[tuple[int, UserConversation]], list[UserBuildResult]]]
    if executor is None:
        outcomes = ((chunk, _build_chunk(str(root), settings, users_of(chunk))) for chunk in chunks)
    else:
        futures = {
            executor.submit(_build_chunk, str(root), settings, users_of(chunk)): chunk for chunk in chunks
        }
        outcomes = ((futures[f], _chunk_results(f, futures[f])) for f in as_completed(futures))
    for chunk, chunk_results in outcomes:
        for (position, user), result in zip(chunk, chunk_results, strict=True):
            results[position] = result
            if not result.ok:
                logger.info("user %s failed: %s", user.user_id, result.error)
        done += len(chunk)
        if progress:
            progress(done, len(users))
    return [results[position] for position in range(len(users))]


def _id_problem(user_id: object, seen: dict[str, str]) -> str | None:
    """Why the input's id cannot be built (``seen``: the ids before it, by their casefold), or ``None``."""
    from gravity_core.serving.users import case_twin_problem, check_user_id

    try:
        checked = check_user_id(user_id)
    except ConfigurationError as exc:
        return str(exc)
    earlier = seen.get(checked.casefold())
    if earlier == checked:
        return f"user {checked!r} appears more than once in the input; give each user one conversation"
    if earlier is not None:
        return case_twin_problem(checked, earlier, "earlier in the input")
    seen[checked.casefold()] = checked
    return None


def _chunk_results(
    future: Future[list[UserBuildResult]], chunk: Sequence[tuple[int, UserConversation]]
) -> list[UserBuildResult]:
    """The task's results, or an error for each of its users when the task itself failed."""
    try:
        return future.result()
    except Exception as exc:  # the worker died or the task could not run: its users failed
        message = f"the task building this user failed: {type(exc).__name__}: {exc}"
        return [UserBuildResult(user_id=user.user_id, error=message) for _, user in chunk]


def _build_chunk(
    root: str, settings: ManyUsersSettings, chunk: list[UserConversation]
) -> list[UserBuildResult]:
    """One task: build each user's KB in turn, in the worker (the embedder and spaCy loaded once)."""
    from gravity_core.providers import load_embedder
    from gravity_core.serving.users import UserKBs

    embedder = load_embedder(settings.embedder, threads=settings.threads_per_worker)
    users = UserKBs(root, embedder=embedder, batch_size=settings.batch_size)
    worker = f"{socket.gethostname()}:{os.getpid()}"
    results = []
    for conversation in chunk:
        start = time.perf_counter()
        result = UserBuildResult(user_id=conversation.user_id, worker=worker)
        try:
            builder = users.builder(conversation.user_id)
            try:
                report = builder.add(conversation.load())
            except BaseException:
                users.drop_if_empty(conversation.user_id)  # a new user's folder, made for nothing
                raise
        except GravityError as exc:
            result.error = str(exc)
        except Exception as exc:  # one user's failure must not stop the others; the log has the trace
            logger.exception("user %s: build failed", conversation.user_id)
            result.error = f"{type(exc).__name__}: {exc}"
        else:
            result.added, result.skipped = report.added, report.skipped
            result.anchors = anchor_counts(builder.kb)
        result.seconds = round(time.perf_counter() - start, 3)
        result.worker_peak_rss_mb = round(peak_rss_mb(), 1)
        results.append(result)
        logger.info("user %s: %s", conversation.user_id, result.error or f"+{result.added} utterances")
    return results


def conversations_in(source: str | os.PathLike[str]) -> list[UserConversation]:
    """The users' conversations a folder or a JSON Lines file holds.

    - A folder: every ``*.json`` / ``*.jsonl`` file in it is one user's conversation, the file's
      name without its suffix the user id (read by the worker).
    - A ``.jsonl`` file: one user per line, ``{"user_id": "...", "utterances": [utterance
      records]}`` (records as ``gravity build`` reads them; the worker checks them). A line that
      is no such object becomes a conversation with a ``problem`` (reported, not built).

    Raises:
        InputDataError: the file is unreadable or not JSON Lines (its line named).
        ConfigurationError: ``source`` is neither a folder nor a file.
    """
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl"))
        return [UserConversation(user_id=p.stem, path=str(p)) for p in files]
    if not path.is_file():
        raise ConfigurationError(f"{source}: no such folder or file of conversations")
    from gravity_core.loaders._common import Where, read_document

    document = read_document(path)
    out = []
    for name, item in document.items():
        where = Where(document.path, name)
        try:
            record = where.mapping(item, "a user's conversation")
            user_id = where.require(record, "user_id", str, nonempty=True)
            records = where.require(record, "utterances", list)
        except InputDataError as exc:
            out.append(UserConversation(user_id=name, problem=str(exc)))
            continue
        origin = f"{document.path} {name}, user {user_id}"
        out.append(UserConversation(user_id=user_id, records=tuple(records), origin=origin))
    return out
