"""SGMem's seed search in Chroma (optional extra ``chroma``): embedded on disk or on a ``chroma run`` server.

Two collections per index, ``sgmem-<name>-sentence`` and ``sgmem-<name>-memory``, cosine space,
no embedding function (SGMem passes the vectors, so Chroma never loads or downloads a model).
:meth:`ChromaSGMemStore.sync` mirrors the index's vectors, writing only rows that are new or whose
text changed. The sentence graph and the vectors it is maintained with stay in process: Chroma
answers the vector search that seeds the graph walk, so several processes can share one server.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from gravity_core.chroma_clients import persistent_client, require_chromadb, server_client
from gravity_core.embeddings.base import Matrix
from gravity_core.errors import (
    AnchorStoreError,
    ConfigurationError,
    GravityError,
    ProviderError,
)

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection

__all__ = ["ChromaSGMemStore", "StoreKind", "text_digest"]

logger = logging.getLogger(__name__)

StoreKind = Literal["sentence", "memory"]
_KINDS: tuple[StoreKind, ...] = ("sentence", "memory")
_PURPOSE = "The Chroma store of SGMem"
_UNSAFE = re.compile(r"[^a-zA-Z0-9._-]+")
_EMBEDDER = "sgmem_embedder"
_ROW_DIGEST = "digest"


def _chromadb() -> Any:
    return require_chromadb(_PURPOSE)


def text_digest(text: str) -> str:
    """Short digest of a row's text: a row is rewritten only when it changes."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


def _collection_name(name: str, kind: StoreKind) -> str:
    if not name:
        raise ConfigurationError("the SGMem store name must not be empty")
    safe = _UNSAFE.sub("_", name)
    while ".." in safe:
        safe = safe.replace("..", "._")
    if safe != name or len(safe) > 400:
        safe = safe[:400] + "-" + hashlib.blake2b(name.encode(), digest_size=8).hexdigest()
    return f"sgmem-{safe}-{kind}"


class ChromaSGMemStore:
    """Sentence and memory vectors of one SGMem index in Chroma.

    Build one with :meth:`persistent`, :meth:`server` or :meth:`from_client`, and pass it to
    :class:`~gravity_core.sgmem.SGMem` (``store=``); SGMem syncs it after every change and on load.

    Args:
        client: a ``chromadb`` client (Persistent, Ephemeral or Http).
        name: names the collections.

    Raises:
        MissingDependencyError: ``chromadb`` is not installed.
    """

    def __init__(self, client: ClientAPI, name: str) -> None:
        self._client = client
        self._name = name
        self._names = {kind: _collection_name(name, kind) for kind in _KINDS}
        self._collections: dict[StoreKind, Collection] = {}
        settings = client.get_settings()
        if str(settings.chroma_api_impl).endswith("FastAPI"):
            self._where = f"http://{settings.chroma_server_host}:{settings.chroma_server_http_port}"
            self._remote = True
        else:
            self._where = str(settings.persist_directory) if settings.is_persistent else "in-memory"
            self._remote = False

    @classmethod
    def persistent(cls, path: str, name: str) -> ChromaSGMemStore:
        """An embedded Chroma database in the folder ``path``."""
        return cls(persistent_client(path, _PURPOSE), name)

    @classmethod
    def server(cls, host: str, port: int, name: str, *, ssl: bool = False) -> ChromaSGMemStore:
        """A Chroma server at ``host:port``.

        Raises:
            ProviderError: the server does not answer.
        """
        return cls(server_client(host, port, _PURPOSE, ssl=ssl), name)

    @classmethod
    def from_client(cls, client: ClientAPI, name: str) -> ChromaSGMemStore:
        """Wrap an existing ``chromadb`` client."""
        _chromadb()
        return cls(client, name)

    def collection_name(self, kind: StoreKind) -> str:
        """Name of the collection of ``kind``."""
        return self._names[kind]

    def count(self, kind: StoreKind) -> int:
        """Rows stored for ``kind`` (0 before the first sync)."""
        collection = self._collections.get(kind)
        if collection is None:
            return 0
        with self._guard(f"count {collection.name}"):
            return int(collection.count())

    def sync(
        self, kind: StoreKind, ids: Sequence[str], matrix: Matrix, texts: Sequence[str], embedder: str
    ) -> int:
        """Make the collection of ``kind`` hold exactly these rows.

        Returns:
            Rows written or deleted.
        """
        name = self._names[kind]
        with self._guard(f"open collection {name}"):
            collection = self._client.get_or_create_collection(
                name, metadata={"hnsw:space": "cosine", _EMBEDDER: embedder}, embedding_function=None
            )
        if (collection.metadata or {}).get(_EMBEDDER) != embedder:
            logger.info("chroma collection %s was made by another embedder: rebuilding it", name)
            with self._guard(f"recreate collection {name}"):
                self._client.delete_collection(name)
                collection = self._client.create_collection(
                    name, metadata={"hnsw:space": "cosine", _EMBEDDER: embedder}, embedding_function=None
                )
        self._collections[kind] = collection
        with self._guard(f"read {name}"):
            stored = collection.get(include=["metadatas"])
        have = {
            i: (m or {}).get(_ROW_DIGEST)
            for i, m in zip(stored["ids"], stored["metadatas"] or [], strict=True)
        }
        digests = [text_digest(t) for t in texts]
        changed = [n for n, (i, d) in enumerate(zip(ids, digests, strict=True)) if have.get(i) != d]
        wanted = set(ids)
        gone = [i for i in have if i not in wanted]
        with self._guard("read the maximum batch size"):
            batch = max(1, int(self._client.get_max_batch_size()))
        rows = np.ascontiguousarray(matrix, dtype=np.float32)
        for start in range(0, len(changed), batch):
            part = changed[start : start + batch]
            with self._guard(f"upsert into {name}"):
                collection.upsert(
                    ids=[ids[n] for n in part],
                    embeddings=rows[part],
                    metadatas=[{_ROW_DIGEST: digests[n]} for n in part],
                )
        for start in range(0, len(gone), batch):
            with self._guard(f"delete from {name}"):
                collection.delete(ids=gone[start : start + batch])
        return len(changed) + len(gone)

    def top(self, kind: StoreKind, query: Matrix, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` rows nearest to ``query`` (cosine, approximate), best first."""
        collection = self._collections.get(kind)
        if collection is None or limit <= 0:
            return []
        with self._guard(f"query {collection.name}"):
            count = int(collection.count())
            if count == 0:
                return []
            result = collection.query(
                query_embeddings=np.asarray(query, dtype=np.float32).reshape(1, -1),
                n_results=min(limit, count),
                include=["distances"],
            )
        distances = result["distances"][0] if result["distances"] else []
        pairs = [(str(i), 1.0 - float(d)) for i, d in zip(result["ids"][0], distances, strict=True)]
        return sorted(pairs, key=lambda p: (-p[1], p[0]))

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        try:
            yield
        except GravityError:
            raise
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"
            if self._remote:
                raise ProviderError(
                    f"Chroma server at {self._where} failed to {what}: {detail}", provider="chroma"
                ) from exc
            raise AnchorStoreError(f"Chroma failed to {what}: {detail}", path=self._where) from exc
