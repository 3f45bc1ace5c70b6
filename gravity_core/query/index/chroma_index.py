"""An anchor index kept in Chroma (optional extra ``chroma``): embedded on disk or on a Chroma server.

One collection per anchor kind, named ``gravity-<kb_name>-<kind>``, with cosine space. GRAVITY always
passes the vectors itself: the collections have no embedding function, so Chroma never loads or
downloads a model. :meth:`ChromaAnchorIndex.sync` mirrors a KB's :class:`AnchorVectors` into the
collections, writing only rows whose text digest changed.

Deleting a row does not erase it in Chroma: its log keeps the id and float32 vector until the HNSW
index is persisted, the HNSW files keep deleted vectors and SQLite keeps deleted rows in free pages.
So a sync that purges (after a forget) rebuilds every collection from the KB's rows and compacts an
embedded database (:func:`~gravity_core.storage.chroma_clients.compact_chroma_folder`).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from gravity_core.embeddings.base import Matrix
from gravity_core.errors import ConfigurationError, GravityError
from gravity_core.query.index.base import query_vector
from gravity_core.schema import AnchorKind
from gravity_core.storage.anchor_vectors import AnchorVectors, KindVectors
from gravity_core.storage.chroma_clients import (
    ChromaEndpoint,
    ChromaRetry,
    compact_chroma_folder,
    persistent_client,
    require_chromadb,
    server_client,
)

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
# Set while a purge is under way: a purge cut short is done again by the next sync.
_PURGE = "gravity_purge_pending"
_ROW_DIGEST = "digest"
# Chroma persists a collection's HNSW files (and so may drop its log rows) only after
# ``sync_threshold`` new rows; below it, every process that opens the collection applies the log
# again and rewrites the files, whose unused capacity is written from that process's memory
# (chroma-core/chroma#7688). Persisting at every write keeps readers from writing at all.
_HNSW = {"hnsw:space": "cosine", "hnsw:sync_threshold": 2, "hnsw:batch_size": 2}
# A collection a purge was swapped away from may still be read from a cache: open the new one.
_SWAP_READS = 4

_T = TypeVar("_T")

# One sync or drop at a time per database and KB in this process (a purge swaps collections).
_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _kb_lock(where: str, kb_name: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault((where, kb_name), threading.Lock())


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


def _swap_name(name: str) -> str:
    """The collection a purge fills before it takes the place of ``name`` (short, valid, fixed)."""
    return "gravity-purge-" + hashlib.blake2b(name.encode(), digest_size=12).hexdigest()


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
        upserted: rows written (new anchors and anchors whose text changed; every row when the
            sync purged).
        deleted: rows removed (anchors no longer in the KB).
        recreated: kinds whose collection was dropped and rebuilt (the embedder or dimension changed).
        purged: every collection was rebuilt from the KB's rows (and an embedded database
            compacted), so Chroma keeps nothing of the rows that were deleted or rewritten.
    """

    upserted: int = 0
    deleted: int = 0
    recreated: tuple[AnchorKind, ...] = ()
    purged: bool = False

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
    :class:`~gravity_core.storage.chroma_clients.ChromaRetry`) before a :class:`ProviderError` naming its URL.
    A sync cut short leaves the collections marked out of date, so the next sync completes them.
    After a forget, a sync purges (see :meth:`sync`): Chroma then keeps no id or vector of what
    was forgotten, on disk included when the database is embedded.

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
        self._owns_client = False
        self._lock = _kb_lock(self._endpoint.where, kb_name)
        for kind in AnchorKind:
            collection = self._fetch(kind)
            if collection is not None and not self._embedder:
                self._embedder, self._dim = _embedder_of(collection)

    @classmethod
    def persistent(cls, path: str | Path, kb_name: str) -> ChromaAnchorIndex:
        """An embedded Chroma database in the folder ``path`` (created if missing); :meth:`close` it."""
        index = cls(persistent_client(path, _PURPOSE), kb_name)
        index._owns_client = True
        return index

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
        index = cls(server_client(host, port, _PURPOSE, ssl=ssl, retry=policy), kb_name, retry=policy)
        index._owns_client = True
        return index

    @classmethod
    def from_client(
        cls, client: ClientAPI, kb_name: str, *, retry: ChromaRetry | None = None
    ) -> ChromaAnchorIndex:
        """Wrap an existing ``chromadb`` client (Persistent, Ephemeral or Http); it stays the caller's."""
        _chromadb()
        return cls(client, kb_name, retry=retry)

    def close(self) -> None:
        """Release the client :meth:`persistent` or :meth:`server` opened; idempotent.

        An embedded database's files are then free. A client given to :meth:`from_client` is left
        open.
        """
        self._collections.clear()
        if self._owns_client:
            self._owns_client = False
            cast(Any, self._client).close()  # chromadb's Client has close(); its ClientAPI type does not

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
        self._collection(kind)
        return self._read(kind, "count", lambda collection: int(collection.count()))

    def sync(
        self, vectors: AnchorVectors, *, batch_size: int = 1000, purge: bool | None = None
    ) -> SyncReport:
        """Make the collections mirror ``vectors``.

        Rows whose text digest changed (or that are new) are upserted, rows whose anchor is gone are
        deleted; a kind whose collection was made by another embedder or dimension is rebuilt. A kind
        whose stored KB digest matches is skipped without reading its rows, so a repeated sync writes
        nothing.

        A deleted or rewritten row is not erased by Chroma (its log, HNSW files and SQLite free
        pages keep ids and vectors), so a sync that **purges** instead rebuilds every kind's
        collection from ``vectors`` (a new collection takes the old one's name) and, for an
        embedded database, compacts its folder
        (:func:`~gravity_core.storage.chroma_clients.compact_chroma_folder`). Afterwards the database
        holds no id, metadata or vector of a row that is not in ``vectors``. A Chroma server's
        folder keeps free pages and deleted collections' folders until it is compacted there.

        Args:
            vectors: the KB's anchor vectors (``AnchorStore(...).load().vectors``).
            batch_size: rows per upsert or delete request (capped by the client's maximum).
            purge: ``True`` after a forget; ``None`` (the default) purges when an anchor is gone
                (only a forget removes anchors) or a purge was cut short; ``False`` never does.

        Returns:
            What was written.

        Raises:
            ConfigurationError: ``batch_size`` is below 1.
            ProviderError: the Chroma server failed (the message names its URL).
            AnchorStoreError: the local Chroma database failed, or could not be compacted.
        """
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        limit = self._endpoint.call("read the maximum batch size", self._client.get_max_batch_size)
        batch = max(1, min(batch_size, int(limit)))
        with self._lock:
            plans = [self._plan(kind, vectors, batch) for kind in AnchorKind]
            if purge is None:
                purge = any(plan.gone_count or plan.pending for plan in plans)
            if purge:
                self._purge(plans, vectors, batch)
                for plan in plans:
                    plan.changed = list(range(len(plan.rows.ids)))
            else:
                for plan in plans:
                    self._diff(plan)
                    self._write(plan, vectors, batch)
        self._embedder, self._dim = vectors.embedder, vectors.dim
        report = SyncReport(
            upserted=sum(len(plan.changed) for plan in plans),
            deleted=sum(plan.gone_count for plan in plans),
            recreated=tuple(plan.kind for plan in plans if plan.other_embedder),
            purged=purge,
        )
        logger.info(
            "chroma sync of KB %r: %d upserted, %d deleted%s",
            self._kb_name,
            report.upserted,
            report.deleted,
            ", collections rebuilt (purge)" if purge else "",
        )
        return report

    def top(self, kind: AnchorKind, query: Matrix, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` anchors of ``kind`` nearest to ``query`` by Chroma's cosine search, ties by id.

        Raises:
            ConfigurationError: the index was never synced, or ``query`` has another dimension.
            ProviderError: the Chroma server failed (the message names its URL).
        """
        vector = query_vector(query, self._dim)
        self._collection(kind)
        if limit <= 0:
            return []
        wanted = limit + 1
        while True:
            result = self._read(
                kind,
                "query",
                partial(_query, embeddings=vector[np.newaxis], n_results=wanted),
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
        self._collection(kind)
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        result = self._read(
            kind, "get from", lambda collection: collection.get(ids=wanted, include=["embeddings"])
        )
        found = list(result["ids"])
        if not found:
            return {}
        matrix = np.asarray(result["embeddings"], dtype=np.float32)
        norms = np.maximum(np.linalg.norm(matrix, axis=1), 1e-12)
        scores = (matrix @ vector) / norms
        return dict(zip(found, scores.tolist(), strict=True))

    def _plan(self, kind: AnchorKind, vectors: AnchorVectors, batch: int) -> _KindPlan:
        """What a sync must do for ``kind``; nothing is written (but a purge's leftover deleted).

        Whether anchors are gone is told from the count and the KB's own ids, without reading the
        stored rows: a purge must not bring a forgotten id or digest into this process's memory
        before it writes the new HNSW files (hnswlib writes uninitialised capacity into them,
        chroma-core/chroma#7688).
        """
        rows = vectors.get(kind)
        name = self._names[kind]
        plan = _KindPlan(kind, rows, _kind_digest(vectors.embedder, vectors.dim, rows))
        # Re-read the collection: another process may have synced it since it was cached.
        self._collections.pop(kind, None)
        collection = self._fetch(kind)
        every = list(range(len(rows.ids)))
        if collection is None:
            # A purge cut short between dropping the old collection and renaming the new one
            # leaves the new one under its swap name: delete it, and purge again.
            swap = _swap_name(name)
            plan.pending = self._endpoint.call(
                f"delete collection {swap}", partial(self._delete_collection, swap)
            )
            plan.changed = every
            return plan
        metadata = collection.metadata or {}
        plan.collection = collection
        plan.pending = bool(metadata.get(_PURGE))
        if _embedder_of(collection) != (vectors.embedder, vectors.dim):
            plan.other_embedder, plan.changed = True, every
            return plan
        stored_count = self._endpoint.call(f"count {name}", lambda: int(collection.count()))
        if metadata.get(_KB_DIGEST) == plan.digest and stored_count == len(rows.ids):
            plan.current = True
            return plan
        present = 0
        for start in range(0, len(rows.ids), batch):
            wanted = rows.ids[start : start + batch]
            found = self._endpoint.call(f"read {name}", partial(collection.get, ids=wanted, include=[]))
            present += len(found["ids"])
        plan.gone_count = stored_count - present
        return plan

    def _diff(self, plan: _KindPlan) -> None:
        """Read the stored rows' digests: which rows changed and which are gone (no purge)."""
        collection = plan.collection
        if collection is None or plan.other_embedder or plan.current:
            return
        name, rows = self._names[plan.kind], plan.rows
        stored = self._endpoint.call(f"read {name}", lambda: collection.get(include=["metadatas"]))
        stored_digest = {
            anchor_id: (meta or {}).get(_ROW_DIGEST)
            for anchor_id, meta in zip(stored["ids"], stored["metadatas"] or [], strict=True)
        }
        plan.changed = [
            n
            for n, (a, d) in enumerate(zip(rows.ids, rows.digests, strict=True))
            if stored_digest.get(a) != d
        ]
        present = set(rows.ids)
        plan.gone = [a for a in stored_digest if a not in present]
        plan.gone_count = len(plan.gone)
        metadata = collection.metadata or {}
        plan.current = not plan.changed and not plan.gone and metadata.get(_KB_DIGEST) == plan.digest

    def _write(self, plan: _KindPlan, vectors: AnchorVectors, batch: int) -> None:
        """Bring one kind's collection up to date in place (no purge)."""
        kind, name = plan.kind, self._names[plan.kind]
        collection = plan.collection
        if collection is not None and plan.other_embedder:
            logger.info("chroma collection %s was made by another embedder: rebuilding it", name)
            self._endpoint.call(f"delete collection {name}", lambda: self._delete_collection(name))
            collection = None
        if collection is None:
            metadata: dict[str, Any] = {
                **_HNSW,
                _EMBEDDER: vectors.embedder,
                _DIM: vectors.dim,
            }
            collection = self._create(name, metadata)
        self._collections[kind] = collection
        if plan.current:
            return
        # Upserts and deletes are idempotent, so a retried batch is safe. The KB digest is written
        # last: a sync cut short leaves it stale, and the next sync reads the rows and completes them.
        self._upsert(collection, plan.rows, plan.changed, batch)
        for start in range(0, len(plan.gone), batch):
            delete = partial(collection.delete, ids=plan.gone[start : start + batch])
            self._endpoint.call(f"delete from {name}", delete)
        done = {_EMBEDDER: vectors.embedder, _DIM: vectors.dim, _KB_DIGEST: plan.digest}
        if plan.pending:
            done[_PURGE] = 1  # a purge cut short stays to be done (a sync told not to purge)
        self._modify(collection, name, done)

    def _purge(self, plans: Sequence[_KindPlan], vectors: AnchorVectors, batch: int) -> None:
        """Rebuild every kind's collection from ``vectors``, then compact an embedded database.

        Each collection is first marked (a purge cut short anywhere is done again by the next
        sync); new collections are filled under swap names, and only then are the old ones deleted
        and the new ones renamed to their names, so the new HNSW files are written before the old
        rows are read for deletion (hnswlib writes uninitialised capacity, chroma-core/chroma#7688).
        Readers holding an old collection open the new one (:meth:`_read`).
        """
        for plan in plans:
            if plan.collection is not None and not plan.pending:
                embedder, dim = _embedder_of(plan.collection)
                marked = {_EMBEDDER: embedder, _DIM: dim, _PURGE: 1}
                self._modify(plan.collection, self._names[plan.kind], marked)
        filled: list[Collection] = []
        for plan in plans:
            swap = _swap_name(self._names[plan.kind])
            self._endpoint.call(f"delete collection {swap}", partial(self._delete_collection, swap))
            metadata: dict[str, Any] = {
                **_HNSW,
                _EMBEDDER: vectors.embedder,
                _DIM: vectors.dim,
                _PURGE: 1,
            }
            fresh = self._create(swap, metadata)
            self._upsert(fresh, plan.rows, range(len(plan.rows.ids)), batch)
            filled.append(fresh)
        for plan, fresh in zip(plans, filled, strict=True):
            name = self._names[plan.kind]
            self._endpoint.call(f"delete collection {name}", partial(self._delete_collection, name))
            self._endpoint.call(f"rename {fresh.name} to {name}", partial(fresh.modify, name=name))
            self._collections[plan.kind] = fresh
        self._compact()
        for plan in plans:
            done = {_EMBEDDER: vectors.embedder, _DIM: vectors.dim, _KB_DIGEST: plan.digest}
            self._modify(self._collections[plan.kind], self._names[plan.kind], done)

    def _compact(self) -> None:
        """Compact an embedded database's folder; a server's folder is its administrator's."""
        if self._endpoint.url:
            logger.info(
                "chroma server %s keeps deleted rows in free pages and deleted collections' folders "
                "until its folder is compacted there (compact_chroma_folder or `chroma vacuum`)",
                self._endpoint.url,
            )
        elif self._endpoint.path != "in-memory":
            compact_chroma_folder(self._endpoint.path)

    def _upsert(self, collection: Collection, rows: KindVectors, which: Sequence[int], batch: int) -> None:
        matrix = np.ascontiguousarray(rows.matrix, dtype=np.float32)
        for start in range(0, len(which), batch):
            part = list(which[start : start + batch])
            self._endpoint.call(
                f"upsert into {collection.name}",
                partial(
                    collection.upsert,
                    ids=[rows.ids[n] for n in part],
                    embeddings=matrix[part],
                    metadatas=[{_ROW_DIGEST: rows.digests[n]} for n in part],
                ),
            )

    def _create(self, name: str, metadata: dict[str, Any]) -> Collection:
        # get_or_create: a retry after a lost answer finds the collection the first try made.
        create = partial(
            self._client.get_or_create_collection, name, metadata=metadata, embedding_function=None
        )
        collection: Collection = self._endpoint.call(f"create collection {name}", create)
        return collection

    def _modify(self, collection: Collection, name: str, metadata: dict[str, Any]) -> None:
        self._endpoint.call(f"update metadata of {name}", partial(collection.modify, metadata=metadata))

    def drop(self) -> None:
        """Delete the KB's collections (every kind), e.g. when its user's KB is deleted.

        An embedded database's folder is then compacted, so it keeps nothing of them.

        Raises:
            ProviderError: the Chroma server failed (the message names its URL).
            AnchorStoreError: the local Chroma database failed.
        """
        with self._lock:
            for kind in AnchorKind:
                for name in (self._names[kind], _swap_name(self._names[kind])):
                    self._endpoint.call(f"delete collection {name}", partial(self._delete_collection, name))
                self._collections.pop(kind, None)
            self._compact()
        logger.info("chroma collections of KB %r deleted", self._kb_name)

    def _delete_collection(self, name: str) -> bool:
        """Delete the collection ``name``; False when there was none (or a retry found it gone)."""
        from chromadb.errors import NotFoundError

        try:
            self._client.delete_collection(name)
        except NotFoundError:
            return False
        return True

    def _read(self, kind: AnchorKind, what: str, request: Callable[[Collection], _T]) -> _T:
        """``request(collection)`` on the collection of ``kind``.

        The collection is opened again when a purge by another index or process replaced it
        meanwhile.
        """
        from chromadb.errors import NotFoundError

        for attempt in range(1, _SWAP_READS + 1):
            collection = self._fetch(kind) if attempt < _SWAP_READS else self._collection(kind)
            if collection is None:  # between a purge's delete and rename: a moment
                time.sleep(0.02 * attempt)
                continue
            try:
                return self._endpoint.retried(partial(request, collection), f"{what} {collection.name}")
            except NotFoundError as exc:
                self._collections.pop(kind, None)
                if attempt == _SWAP_READS:
                    raise self._endpoint.failure(f"{what} {collection.name}", exc) from exc
            except GravityError:
                raise
            except Exception as exc:
                raise self._endpoint.failure(f"{what} {collection.name}", exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

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


@dataclass
class _KindPlan:
    """One kind's part of a sync: the KB's rows, the collection found, and what differs."""

    kind: AnchorKind
    rows: KindVectors
    digest: str
    collection: Collection | None = None
    other_embedder: bool = False
    pending: bool = False
    current: bool = False
    changed: list[int] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    gone_count: int = 0


def _query(collection: Collection, *, embeddings: np.ndarray, n_results: int) -> Any:
    return collection.query(query_embeddings=embeddings, n_results=n_results, include=["distances"])


def _embedder_of(collection: Collection) -> tuple[str, int]:
    metadata = collection.metadata or {}
    return str(metadata.get(_EMBEDDER, "")), int(metadata.get(_DIM, 0) or 0)
