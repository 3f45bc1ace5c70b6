"""Opening Chroma clients the one way GRAVITY does: telemetry off, retries, failures as GravityErrors.

chromadb is an optional dependency (extra ``chroma``); it is imported only here, when asked for.

A Chroma server that does not answer (connection refused or reset, a timeout, HTTP 429/502/503/504)
is retried a bounded number of times with exponential backoff (:class:`ChromaRetry`; the loop is
`tenacity <https://tenacity.readthedocs.io>`_'s); then the caller raises a
:class:`~gravity_core.errors.ProviderError` naming the server's URL. Other failures (a bad request,
a missing collection) are not retried.

Chroma keeps what was deleted: its log (table ``embeddings_queue`` of ``chroma.sqlite3``) holds
every written id and float32 vector until the collection's HNSW index is persisted, SQLite keeps
deleted rows in free pages, the HNSW files keep deleted vectors, and a deleted collection's HNSW
folder stays (chroma-core/chroma#5259). :func:`compact_chroma_folder` removes the last two kinds of
leftover from a folder once the rows are gone from the collections. One leak is beyond reach: hnswlib
writes an index's files at full capacity from uninitialised memory (chroma-core/chroma#7688), so the
unused slots of any HNSW file may hold bytes the writing process once had in memory.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from gravity_core.errors import (
    AnchorStoreError,
    ConfigurationError,
    GravityError,
    MissingDependencyError,
    ProviderError,
)

__all__ = [
    "ChromaEndpoint",
    "ChromaRetry",
    "compact_chroma_folder",
    "is_transient",
    "persistent_client",
    "require_chromadb",
    "server_client",
    "server_url",
]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

# HTTP statuses a proxy or an overloaded server answers while it is (re)starting.
_TRANSIENT_STATUS = frozenset({429, 502, 503, 504})


def require_chromadb(purpose: str) -> Any:
    """The ``chromadb`` module, or MissingDependencyError naming the ``chroma`` extra."""
    try:
        import chromadb
    except ImportError as exc:
        raise MissingDependencyError("chromadb", "chroma", purpose) from exc
    return chromadb


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) says the server is unreachable for now.

    True for transport failures (``httpx.TransportError``: refused, reset, timed out; the built-in
    ``ConnectionError`` and ``TimeoutError``) and for HTTP 429, 502, 503 and 504.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionError | TimeoutError):
            return True
        names = {cls.__name__ for cls in type(current).__mro__}
        if "TransportError" in names and type(current).__module__.startswith("httpx"):
            return True
        if "HTTPStatusError" in names:
            status = getattr(getattr(current, "response", None), "status_code", None)
            if status in _TRANSIENT_STATUS:
                return True
        current = current.__cause__ or current.__context__
    return False


@dataclass(frozen=True)
class ChromaRetry:
    """How often, and how patiently, a Chroma server that does not answer is asked again.

    The n-th retry waits ``min(max_delay, initial_delay * 2 ** (n - 1))`` seconds: with the defaults
    0.25, 0.5 and 1 s, so a server that is down is reported after about 1.75 s, and one that
    restarts within that time is not noticed.

    Attributes:
        attempts: requests in all, the first included (1: no retry).
        initial_delay: seconds before the first retry.
        max_delay: the longest single wait, in seconds.

    Raises:
        ConfigurationError: ``attempts`` below 1 or a negative delay.
    """

    attempts: int = 4
    initial_delay: float = 0.25
    max_delay: float = 2.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigurationError(f"ChromaRetry.attempts must be >= 1, got {self.attempts}")
        if self.initial_delay < 0 or self.max_delay < 0:
            raise ConfigurationError(
                f"ChromaRetry delays must be >= 0, got {self.initial_delay} and {self.max_delay}"
            )

    def call(self, function: Callable[[], _T], *, what: str) -> _T:
        """``function()``, asked again after a transient failure; the last failure is re-raised.

        Args:
            function: the request.
            what: what it does and where, for the log line of each retry.
        """

        def log(state: RetryCallState) -> None:
            failure = state.outcome.exception() if state.outcome else None
            wait = state.next_action.sleep if state.next_action else 0.0
            # INFO, not WARNING: the final error names the attempts, and the CLI prints one line.
            logger.info(
                "chroma: %s failed (attempt %d of %d: %s); retrying in %.2fs",
                what,
                state.attempt_number,
                self.attempts,
                type(failure).__name__,
                wait,
            )

        retrying = Retrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=self.initial_delay, max=self.max_delay),
            retry=retry_if_exception(is_transient),
            before_sleep=log,
            reraise=True,
        )
        return retrying(function)


def _settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False)


def persistent_client(path: str | Path, purpose: str) -> Any:
    """An embedded Chroma database in the folder ``path``.

    Raises:
        AnchorStoreError: the database cannot be opened (the message names the folder).
    """
    chromadb = require_chromadb(purpose)
    try:
        return chromadb.PersistentClient(path=str(path), settings=_settings())
    except Exception as exc:
        raise AnchorStoreError(f"cannot open the Chroma database: {exc}", path=str(path)) from exc


def server_url(host: str, port: int, *, ssl: bool = False) -> str:
    """``http://host:port`` (``https`` with ``ssl``), as GRAVITY's messages name a server."""
    return f"{'https' if ssl else 'http'}://{host}:{port}"


def server_client(
    host: str, port: int, purpose: str, *, ssl: bool = False, retry: ChromaRetry | None = None
) -> Any:
    """A client of the Chroma server (``chroma run``) at ``host:port``, asked until it answers.

    Args:
        host: the server's host name or address.
        port: its port.
        purpose: what the client is for, named by a missing-dependency error.
        ssl: connect with HTTPS.
        retry: how a server that does not answer is retried (default :class:`ChromaRetry`).

    Raises:
        ConfigurationError: ``host`` is empty or ``port`` is not a TCP port.
        ProviderError: the server did not answer after the retries; the message names the URL.
    """
    if not host or not host.strip():
        raise ConfigurationError("the Chroma server host must not be empty")
    if not 0 < port < 65536:
        raise ConfigurationError(f"the Chroma server port must be in 1-65535, got {port}")
    chromadb = require_chromadb(purpose)
    policy = retry or ChromaRetry()
    url = server_url(host, port, ssl=ssl)
    try:
        return policy.call(
            lambda: chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=_settings()),
            what=f"connecting to {url}",
        )
    except Exception as exc:
        tries = f" after {policy.attempts} attempts" if is_transient(exc) and policy.attempts > 1 else ""
        raise ProviderError(
            f"cannot connect to the Chroma server at {url}{tries} (is `chroma run` up?): {exc}",
            provider="chroma",
        ) from exc


@dataclass(frozen=True)
class ChromaEndpoint:
    """Where a Chroma client points, and how requests to it are retried and reported.

    A server is retried while it does not answer (:class:`ChromaRetry`); a local database is not.
    Failures become a :class:`~gravity_core.errors.ProviderError` naming the server's URL, or an
    :class:`~gravity_core.errors.AnchorStoreError` naming the database folder.

    Attributes:
        url: the server's URL; "" for a local database.
        path: the database folder, or "in-memory"; "" for a server.
        retry: how a server that does not answer is retried.
    """

    url: str
    path: str
    retry: ChromaRetry

    @classmethod
    def of(cls, client: Any, retry: ChromaRetry | None = None) -> ChromaEndpoint:
        """The endpoint of a ``chromadb`` client (HTTP, persistent or ephemeral)."""
        settings = client.get_settings()
        policy = retry or ChromaRetry()
        if str(settings.chroma_api_impl).endswith("FastAPI"):
            url = server_url(
                str(settings.chroma_server_host),
                int(settings.chroma_server_http_port or 0),
                ssl=bool(settings.chroma_server_ssl_enabled),
            )
            return cls(url, "", policy)
        return cls("", str(settings.persist_directory) if settings.is_persistent else "in-memory", policy)

    @property
    def where(self) -> str:
        """The URL or the folder, as messages name it."""
        return self.url or self.path

    def retried(self, request: Callable[[], _T], what: str) -> _T:
        """``request()``, retried while a server does not answer; failures are raised as they are."""
        if not self.url:
            return request()
        return self.retry.call(request, what=f"{what} at {self.url}")

    def call(self, what: str, request: Callable[[], _T]) -> _T:
        """``request()`` through :meth:`retried`; a Chroma or transport failure becomes :meth:`failure`."""
        try:
            return self.retried(request, what)
        except GravityError:
            raise
        except Exception as exc:
            raise self.failure(what, exc) from exc

    def failure(self, what: str, exc: Exception) -> GravityError:
        """ProviderError naming the URL for a server, AnchorStoreError naming the folder otherwise."""
        detail = f"{type(exc).__name__}: {exc}"
        if self.url:
            tries = (
                f" after {self.retry.attempts} attempts"
                if is_transient(exc) and self.retry.attempts > 1
                else ""
            )
            return ProviderError(
                f"Chroma server at {self.url} failed to {what}{tries}: {detail}", provider="chroma"
            )
        return AnchorStoreError(f"Chroma failed to {what}: {detail}", path=self.path)


_DATABASE = "chroma.sqlite3"
# Chroma's own command line (the ``chroma`` console script runs the same function), run as
# ``chroma vacuum``; a subprocess, so its progress lines never reach the host's stdout.
_CHROMA_CLI = "import sys; from chromadb_rust_bindings import cli; cli(['chroma', *sys.argv[1:]])"


def compact_chroma_folder(path: str | Path, *, attempts: int = 8, timeout: float = 60.0) -> list[str]:
    """Remove what an embedded Chroma folder still keeps of deleted rows and collections.

    Two steps, both safe while a Chroma client or server uses the folder:

    1. ``chroma vacuum --path PATH --force`` (Chroma's command line): purges the log rows every
       index has consumed and runs SQLite's ``VACUUM``, which rewrites ``chroma.sqlite3`` without
       the free pages that still held deleted ids, metadata and vectors. It reports a failure when
       a write held the database at that moment, so it is run again (``attempts`` in all).
    2. Deletes the HNSW folders of deleted collections, which Chroma leaves in place
       (chroma-core/chroma#5259): the sub-folders named by a UUID that no row of the database's
       ``segments`` table names (read-only; the folders are listed first, and Chroma writes a
       segment's row before its folder, so a collection created meanwhile is never touched).

    Rows deleted from a collection that still exists stay in its log and HNSW files: rebuild the
    collection first (:meth:`ChromaAnchorIndex.sync` with ``purge=True`` does), then compact.
    For a Chroma server, run this on the server's ``--path`` folder.

    Args:
        path: the folder (``PersistentClient(path)``, ``chroma run --path``).
        attempts: vacuum runs before giving up.
        timeout: seconds each run waits for the database's lock.

    Returns:
        The names of the HNSW folders deleted.

    Raises:
        ConfigurationError: ``attempts`` is below 1.
        AnchorStoreError: the folder holds no Chroma database, its segments cannot be read, or
            every vacuum failed (the message names the folder).
    """
    if attempts < 1:
        raise ConfigurationError(f"attempts must be >= 1, got {attempts}")
    folder = Path(path)
    if not (folder / _DATABASE).is_file():
        raise AnchorStoreError(f"no Chroma database ({_DATABASE}) to compact", path=str(folder))
    removed = _remove_orphan_segments(folder, timeout)
    _vacuum(folder, attempts, timeout)
    logger.info("chroma folder %s compacted; deleted collections' folders removed: %s", folder, removed)
    return removed


def _remove_orphan_segments(folder: Path, timeout: float) -> list[str]:
    candidates = [entry for entry in folder.iterdir() if entry.is_dir() and _is_uuid(entry.name)]
    if not candidates:
        return []
    database = (folder / _DATABASE).resolve()
    try:
        connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True, timeout=timeout)
        try:
            live = {str(row[0]) for row in connection.execute("SELECT id FROM segments")}
        finally:
            connection.close()
    except sqlite3.Error as exc:
        raise AnchorStoreError(
            f"cannot read the segments of the Chroma database to find deleted collections' folders: {exc}",
            path=str(folder),
        ) from exc
    removed = sorted(entry.name for entry in candidates if entry.name not in live)
    for name in removed:
        _remove_tree(folder / name)
    return removed


def _remove_tree(path: Path) -> None:
    """Delete ``path``; another compaction of the same folder may be deleting it at the same time."""
    for _ in range(3):
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            continue
        return
    if path.exists():
        raise AnchorStoreError("cannot delete a deleted collection's folder", path=str(path))


def _is_uuid(name: str) -> bool:
    try:
        return str(uuid.UUID(name)) == name
    except ValueError:
        return False


def _vacuum(folder: Path, attempts: int, timeout: float) -> None:
    command = [sys.executable, "-c", _CHROMA_CLI, "vacuum", "--path", str(folder), "--force"]
    command += ["--timeout", str(max(1, round(timeout)))]
    detail = ""
    for attempt in range(1, attempts + 1):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout + 30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            detail = f"{type(exc).__name__}: {exc}"
        else:
            # The command exits 0 even when it fails; it says so on stderr.
            if done.returncode == 0 and "fail" not in done.stderr.lower():
                return
            detail = (done.stderr.strip() or done.stdout.strip())[-500:]
        if attempt < attempts:
            wait = min(2.0, 0.05 * 2 ** (attempt - 1))
            logger.info(
                "chroma vacuum of %s failed (attempt %d of %d); again in %.2fs",
                folder,
                attempt,
                attempts,
                wait,
            )
            time.sleep(wait)
    raise AnchorStoreError(f"chroma vacuum failed {attempts} times: {detail}", path=str(folder))
