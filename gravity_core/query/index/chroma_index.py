"""An anchor index kept in Chroma (optional extra ``chroma``): embedded on disk or on a Chroma server.

One collection per anchor kind, named ``gravity-<kb_name>-<kind>``, with cosine space. GRAVITY always
passes the vectors itself: the collections have no embedding function, so Chroma never loads or
downloads a model. :meth:`ChromaAnchorIndex.sync` mirrors a KB's :class:`AnchorVectors` into the
collections, writing only rows whose text digest changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gravity_core.anchor_vectors import AnchorVectors, KindVectors
from gravity_core.chroma_clients import (
    ChromaEndpoint,
    ChromaRetry,
    persistent_client,
    require_chromadb,
    server_client,
)
from gravity_core.embeddings.base import Matrix
from gravity_core.errors import ConfigurationError
from gravity_core.query.index.base import query_vector
from gravity_core.schema import AnchorKind

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

__all__ = ["ChromaAnchorIndex", "SyncReport", "collection_name"]

logger = logging.getLogger(__name__)

_PURPOSE = "The Chroma anchor index"
_NAME_MAX = 512
_UNSAFE = re.compile(r"[^a-zA-Z0-9._-]+")
# Collection metadata keys (row metadata holds only _ROW_DIGEST).
_EMBEDDER = "gravity_embedder"
_DIM = "gravity_dim"
_KB_DIGEST = "gravity_kb_digest"
_ROW_DIGEST = "digest"


def _chromadb() -> Any:
    return require_chromadb(_PURPOSE)


def collection_name(kb_name: str, kind: AnchorKind) -> str:
    """The Chroma collection of one kind of a KB: ``gravity-<kb_name>-<kind>``, made valid for Chroma.

    Characters Chroma does not allow become ``_``; when the KB name had to change (or be shortened)
    a hash of the original is appended, so two different KB names never share collections.

    Raises:
        ConfigurationError: ``kb_name`` is empty.
    """
    if not kb_name:
        raise ConfigurationError("kb_name must not be empty")
    safe = _UNSAFE.sub("_", kb_name)
    while ".." in safe:
        safe = safe.replace("..", "._")
    suffix = f"-{kind.value}"
    tag = "-" + hashlib.blake2b(kb_name.encode(), digest_size=8).hexdigest()
    room = _NAME_MAX - len("gravity-") - len(suffix) - len(tag)
    if safe != kb_name or len(safe) > room:
        safe = safe[:room] + tag
    # The fixed prefix and suffix make it start and end alphanumeric, and never an IPv4 address.
    return f"gravity-{safe}{suffix}"


def _kind_digest(embedder: str, dim: int, vectors: KindVectors) -> str:
    """Digest of everything a kind's collection holds: embedder, dimension, ids and text digests."""
    hasher = hashlib.blake2b(digest_size=16)
    hasher.update(f"{embedder}\x00{dim}\x00".encode())
    for anchor_id, digest in zip(vectors.ids, vectors.digests, strict=True):
        hasher.update(f"{anchor_id}\x00{digest}\x01".encode())
    return hasher.hexdigest()


@dataclass(frozen=True)
class SyncReport:
    """What one :meth:`ChromaAnchorIndex.sync` wrote.

    Attributes:
        upserted: rows written (new anchors and anchors whose text changed).
        deleted: rows removed (anchors no longer in the KB).
        recreated: kinds whose collection was dropped and rebuilt (the embedder or dimension changed).
    """

    upserted: int = 0
    deleted: int = 0
    recreated: tuple[AnchorKind, ...] = ()

    @property
    def writes(self) -> int:
        """Rows upserted plus rows deleted."""
        return self.upserted + self.deleted


class ChromaAnchorIndex:
    """An :class:`~gravity_core.query.index.base.AnchorIndex` over Chroma collections.

    Build one with :meth:`persistent` (embedded, on disk), :meth:`server` (a ``chroma run``
    server) or :meth:`from_client`, then :meth:`sync` the KB's vectors into it. Scores are
    cosine similarities, as with the numpy index; Chroma's search is approximate (HNSW).

    Example:
        ```python
        loaded = AnchorStore("kb").load()
        index = ChromaAnchorIndex.server("127.0.0.1", 8000, kb_name="conv-26")
        index.sync(loaded.vectors)
        index.top(AnchorKind.EVENT, query_vector, 5)
        ```

    A server that stops answering is retried (``retry``, see
    :class:`~gravity_core.chroma_clients.ChromaRetry`) before a :class:`ProviderError` naming its URL.
    A sync cut short leaves the collections marked out of date, so the next sync completes them.

    Args:
        client: a ``chromadb`` client.
        kb_name: names the KB's collections (see :func:`collection_name`).
        retry: how a Chroma server that does not answer is retried (default ``ChromaRetry()``).

    Raises:
        MissingDependencyError: ``chromadb`` is not installed.
        ProviderError: the Chroma server cannot be reached (the message names its URL).
        AnchorStoreError: a local Chroma database cannot be read.
    """

    def __init__(self, client: ClientAPI, kb_name: str, *, retry: ChromaRetry | None = None) -> None:
        self._client = client
        self._kb_name = kb_name
        self._names = {kind: collection_name(kb_name, kind) for kind in AnchorKind}
        self._endpoint = ChromaEndpoint.of(client, retry)
        self._collections: dict[AnchorKind, Collection] = {}
        self._embedder = ""
        self._dim = 0
        for kind in AnchorKind:
            collection = self._fetch(kind)
            if collection is not None and not self._embedder:
                self._embedder, self._dim = _embedder_of(collection)

    @classmethod
    def persistent(cls, path: str | Path, kb_name: str) -> ChromaAnchorIndex:
        """An embedded Chroma database in the folder ``path`` (created if missing)."""
        return cls(persistent_client(path, _PURPOSE), kb_name)

    @classmethod
    def server(
        cls, host: str, port: int, kb_name: str, *, ssl: bool = False, retry: ChromaRetry | None = None
    ) -> ChromaAnchorIndex:
        """A Chroma server (``chroma run``) at ``host:port``.

        Raises:
            ConfigurationError: ``host`` is empty or ``port`` is not a TCP port.
            ProviderError: the server does not answer after the retries; the message names the URL.
        """
        policy = retry or ChromaRetry()
        return cls(server_client(host, port, _PURPOSE, ssl=ssl, retry=policy), kb_name, retry=policy)

    @classmethod
    def from_client(
        cls, client: ClientAPI, kb_name: str, *, retry: ChromaRetry | None = None
    ) -> ChromaAnchorIndex:
        """Wrap an existing ``chromadb`` client (Persistent, Ephemeral or Http)."""
        _chromadb()
        return cls(client, kb_name, retry=retry)

    @property
    def embedder(self) -> str:
        """Name of the embedder of the synced vectors ("" before the first sync)."""
        return self._embedder

    @property
    def dim(self) -> int:
        """Dimension of the synced vectors (0 before the first sync)."""
        return self._dim

    @property
    def kb_name(self) -> str:
        """The KB name the collections are named after."""
        return self._kb_name

    def collection_name(self, kind: AnchorKind) -> str:
        """Name of the collection that holds ``kind``."""
        return self._names[kind]

    def count(self, kind: AnchorKind) -> int:
        """Rows in the collection of ``kind``.

        Raises:
            ConfigurationError: the index was never synced.
        """
        collection = self._collection(kind)
        return self._endpoint.call(f"count {collection.name}", lambda: int(collection.count()))

    def sync(self, vectors: AnchorVectors, *, batch_size: int = 1000) -> SyncReport:
        """Make the collections mirror ``vectors``.

        Rows whose text digest changed (or that are new) are upserted, rows whose anchor is gone are
        deleted; a kind whose collection was made by another embedder or dimension is rebuilt. A kind
        whose stored KB digest matches is skipped without reading its rows, so a repeated sync writes
        nothing.

        Args:
            vectors: the KB's anchor vectors (``AnchorStore(...).load().vectors``).
            batch_size: rows per upsert or delete request (capped by the client's maximum).

        Returns:
            What was written.

        Raises:
            ConfigurationError: ``batch_size`` is below 1.
            ProviderError: the Chroma server failed (the message names its URL).
            AnchorStoreError: the local Chroma database failed.
        """
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        limit = self._endpoint.call("read the maximum batch size", self._client.get_max_batch_size)
        batch = max(1, min(batch_size, int(limit)))
        upserted = deleted = 0
        recreated: list[AnchorKind] = []
        for kind in AnchorKind:
            up, down, rebuilt = self._sync_kind(kind, vectors, batch)
            upserted, deleted = upserted + up, deleted + down
            if rebuilt:
                recreated.append(kind)
        self._embedder, self._dim = vectors.embedder, vectors.dim
        report = SyncReport(upserted=upserted, deleted=deleted, recreated=tuple(recreated))
        logger.info("chroma sync of KB %r: %d upserted, %d deleted", self._kb_name, upserted, deleted)
        return report

    def top(self, kind: AnchorKind, query: Matrix, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` anchors of ``kind`` nearest to ``query`` by Chroma's cosine search, ties by id.

        Raises:
            ConfigurationError: the index was never synced, or ``query`` has another dimension.
            ProviderError: the Chroma server failed (the message names its URL).
        """
        vector = query_vector(query, self._dim)
        collection = self._collection(kind)
        if limit <= 0:
            return []
        wanted = limit + 1
        while True:
            result = self._endpoint.call(
                f"query {collection.name}",
                partial(
                    collection.query,
                    query_embeddings=vector[np.newaxis],
                    n_results=wanted,
                    include=["distances"],
                ),
            )
            ids = list(result["ids"][0])
            distances = result["distances"]
            scores = [1.0 - float(d) for d in (distances[0] if distances else [])]
            # A tie across the cut may hide equal-scored rows Chroma left out: widen until it does not.
            if len(ids) < wanted or scores[limit - 1] != scores[limit]:
                break
            wanted *= 2
        ranked = sorted(zip(ids, scores, strict=True), key=lambda pair: (-pair[1], pair[0]))
        return ranked[:limit]

    def similarities(self, kind: AnchorKind, query: Matrix, ids: Sequence[str]) -> dict[str, float]:
        """Cosine of ``query`` with the stored vectors of the anchors ``ids``; unknown ids are skipped.

        Raises:
            ConfigurationError: the index was never synced, or ``query`` has another dimension.
            ProviderError: the Chroma server failed (the message names its URL).
        """
        vector = query_vector(query, self._dim)
        collection = self._collection(kind)
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        result = self._endpoint.call(
            f"get from {collection.name}", lambda: collection.get(ids=wanted, include=["embeddings"])
        )
        found = list(result["ids"])
        if not found:
            return {}
        matrix = np.asarray(result["embeddings"], dtype=np.float32)
        norms = np.maximum(np.linalg.norm(matrix, axis=1), 1e-12)
        scores = (matrix @ vector) / norms
        return dict(zip(found, scores.tolist(), strict=True))

    def _sync_kind(self, kind: AnchorKind, vectors: AnchorVectors, batch: int) -> tuple[int, int, bool]:
        rows = vectors.get(kind)
        name = self._names[kind]
        digest = _kind_digest(vectors.embedder, vectors.dim, rows)
        # Re-read the collection: another process may have synced it since it was cached.
        self._collections.pop(kind, None)
        collection = self._fetch(kind)
        rebuilt = False
        if collection is not None and _embedder_of(collection) != (vectors.embedder, vectors.dim):
            logger.info("chroma collection %s was made by another embedder: rebuilding it", name)
            self._endpoint.call(f"delete collection {name}", lambda: self._delete_collection(name))
            self._collections.pop(kind, None)
            collection, rebuilt = None, True
        if collection is None:
            # get_or_create: a retry after a lost answer finds the collection the first try made.
            collection = self._endpoint.call(
                f"create collection {name}",
                lambda: self._client.get_or_create_collection(
                    name,
                    metadata={"hnsw:space": "cosine", _EMBEDDER: vectors.embedder, _DIM: vectors.dim},
                    embedding_function=None,
                ),
            )
            self._collections[kind] = collection
        current = collection
        stored_count = self._endpoint.call(f"count {name}", lambda: int(current.count()))
        if (collection.metadata or {}).get(_KB_DIGEST) == digest and stored_count == len(rows.ids):
            return 0, 0, rebuilt
        stored = self._endpoint.call(f"read {name}", lambda: current.get(include=["metadatas"]))
        stored_digest = {
            anchor_id: (meta or {}).get(_ROW_DIGEST)
            for anchor_id, meta in zip(stored["ids"], stored["metadatas"] or [], strict=True)
        }
        changed = [
            n
            for n, (a, d) in enumerate(zip(rows.ids, rows.digests, strict=True))
            if stored_digest.get(a) != d
        ]
        present = set(rows.ids)
        gone = [a for a in stored_digest if a not in present]
        matrix = np.ascontiguousarray(rows.matrix, dtype=np.float32)
        # Upserts and deletes are idempotent, so a retried batch is safe. The KB digest is written
        # last: a sync cut short leaves it stale, and the next sync reads the rows and completes them.
        for start in range(0, len(changed), batch):
            part = changed[start : start + batch]
            self._endpoint.call(
                f"upsert into {name}",
                partial(
                    current.upsert,
                    ids=[rows.ids[n] for n in part],
                    embeddings=matrix[part],
                    metadatas=[{_ROW_DIGEST: rows.digests[n]} for n in part],
                ),
            )
        for start in range(0, len(gone), batch):
            delete = partial(current.delete, ids=gone[start : start + batch])
            self._endpoint.call(f"delete from {name}", delete)
        self._endpoint.call(
            f"update metadata of {name}",
            lambda: current.modify(
                metadata={_EMBEDDER: vectors.embedder, _DIM: vectors.dim, _KB_DIGEST: digest}
            ),
        )
        return len(changed), len(gone), rebuilt

    def drop(self) -> None:
        """Delete the KB's collections (every kind), e.g. when its user's KB is deleted.

        Raises:
            ProviderError: the Chroma server failed (the message names its URL).
            AnchorStoreError: the local Chroma database failed.
        """
        for kind in AnchorKind:
            name = self._names[kind]
            self._endpoint.call(f"delete collection {name}", partial(self._delete_collection, name))
            self._collections.pop(kind, None)
        logger.info("chroma collections of KB %r deleted", self._kb_name)

    def _delete_collection(self, name: str) -> None:
        from chromadb.errors import NotFoundError

        with contextlib.suppress(NotFoundError):  # gone already: a retry after a lost answer
            self._client.delete_collection(name)

    def _fetch(self, kind: AnchorKind) -> Collection | None:
        """The collection of ``kind`` (cached), or None when it does not exist."""
        if kind in self._collections:
            return self._collections[kind]
        from chromadb.errors import NotFoundError

        name = self._names[kind]
        try:
            collection = self._endpoint.retried(
                lambda: self._client.get_collection(name, embedding_function=None), f"open collection {name}"
            )
        except NotFoundError:
            return None
        except Exception as exc:
            raise self._endpoint.failure(f"open collection {name}", exc) from exc
        self._collections[kind] = collection
        return collection

    def _collection(self, kind: AnchorKind) -> Collection:
        collection = self._fetch(kind)
        if collection is None:
            raise ConfigurationError(
                f"the Chroma anchor index of KB {self._kb_name!r} has no collection {self._names[kind]!r} "
                f"at {self._endpoint.where}: call sync(vectors) first"
            )
        return collection


def _embedder_of(collection: Collection) -> tuple[str, int]:
    metadata = collection.metadata or {}
    return str(metadata.get(_EMBEDDER, "")), int(metadata.get(_DIM, 0) or 0)
