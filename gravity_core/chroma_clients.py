"""Opening Chroma clients the one way GRAVITY does: telemetry off, retries, failures as GravityErrors.

chromadb is an optional dependency (extra ``chroma``); it is imported only here, when asked for.

A Chroma server that does not answer (connection refused or reset, a timeout, HTTP 429/502/503/504)
is retried a bounded number of times with exponential backoff (:class:`ChromaRetry`; the loop is
`tenacity <https://tenacity.readthedocs.io>`_'s); then the caller raises a
:class:`~gravity_core.errors.ProviderError` naming the server's URL. Other failures (a bad request,
a missing collection) are not retried.
"""

from __future__ import annotations

import logging
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
