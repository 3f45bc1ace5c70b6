"""Opening Chroma clients the one way GRAVITY does: telemetry off, failures as GravityErrors.

chromadb is an optional dependency (extra ``chroma``); it is imported only here, when asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gravity_core.errors import AnchorStoreError, MissingDependencyError, ProviderError

__all__ = ["persistent_client", "require_chromadb", "server_client"]


def require_chromadb(purpose: str) -> Any:
    """The ``chromadb`` module, or MissingDependencyError naming the ``chroma`` extra."""
    try:
        import chromadb
    except ImportError as exc:
        raise MissingDependencyError("chromadb", "chroma", purpose) from exc
    return chromadb


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


def server_client(host: str, port: int, purpose: str, *, ssl: bool = False) -> Any:
    """A client of the Chroma server (``chroma run``) at ``host:port``.

    Raises:
        ProviderError: the server does not answer; the message names the URL.
    """
    chromadb = require_chromadb(purpose)
    url = f"{'https' if ssl else 'http'}://{host}:{port}"
    try:
        return chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=_settings())
    except Exception as exc:
        raise ProviderError(
            f"cannot connect to the Chroma server at {url} (is `chroma run` up?): {exc}",
            provider="chroma",
        ) from exc
