"""SGMem's seed search in Chroma (optional extra ``chroma``): embedded on disk or on a ``chroma run`` server.

Two collections per index, ``sgmem-<name>-sentence`` and ``sgmem-<name>-memory``, cosine space,
no embedding function (SGMem passes the vectors, so Chroma never loads or downloads a model).
:meth:`ChromaSGMemStore.sync` mirrors the index's vectors, writing only rows that are new or whose
text changed. The sentence graph and the vectors it is maintained with stay in process: Chroma
answers the vector search that seeds the graph walk, so several processes can share one server.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from gravity_core.embeddings.base import Matrix
from gravity_core.errors import ConfigurationError
from gravity_core.storage.chroma_clients import (
    ChromaEndpoint,
    ChromaRetry,
    persistent_client,
    require_chromadb,
    server_client,
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
    A server that stops answering is retried (``retry``) before a ProviderError naming its URL.

    Args:
        client: a ``chromadb`` client (Persistent, Ephemeral or Http).
        name: names the collections.
        retry: how a Chroma server that does not answer is retried (default ``ChromaRetry()``).

    Raises:
        MissingDependencyError: ``chromadb`` is not installed.
    """

    def __init__(self, client: ClientAPI, name: str, *, retry: ChromaRetry | None = None) -> None:
        self._client = client
        self._name = name
        self._names = {kind: _collection_name(name, kind) for kind in _KINDS}
        self._collections: dict[StoreKind, Collection] = {}
        self._endpoint = ChromaEndpoint.of(client, retry)

    @classmethod
    def persistent(cls, path: str, name: str) -> ChromaSGMemStore:
        """An embedded Chroma database in the folder ``path``."""
        return cls(persistent_client(path, _PURPOSE), name)

    @classmethod
    def server(
        cls, host: str, port: int, name: str, *, ssl: bool = False, retry: ChromaRetry | None = None
    ) -> ChromaSGMemStore:
        """A Chroma server at ``host:port``.

        Raises:
            ConfigurationError: ``host`` is empty or ``port`` is not a TCP port.
            ProviderError: the server does not answer after the retries; the message names the URL.
        """
        policy = retry or ChromaRetry()
        return cls(server_client(host, port, _PURPOSE, ssl=ssl, retry=policy), name, retry=policy)

    @classmethod
    def from_client(
        cls, client: ClientAPI, name: str, *, retry: ChromaRetry | None = None
    ) -> ChromaSGMemStore:
        """Wrap an existing ``chromadb`` client."""
        _chromadb()
        return cls(client, name, retry=retry)

    def collection_name(self, kind: StoreKind) -> str:
        """Name of the collection of ``kind``."""
        return self._names[kind]

    def count(self, kind: StoreKind) -> int:
        """Rows stored for ``kind`` (0 before the first sync)."""
        collection = self._collections.get(kind)
        if collection is None:
            return 0
        return self._endpoint.call(f"count {collection.name}", lambda: int(collection.count()))

    def sync(
        self, kind: StoreKind, ids: Sequence[str], matrix: Matrix, texts: Sequence[str], embedder: str
    ) -> int:
        """Make the collection of ``kind`` hold exactly these rows.

        Returns:
            Rows written or deleted.
        """
        name = self._names[kind]
        metadata = {"hnsw:space": "cosine", _EMBEDDER: embedder}
        open_collection = partial(
            self._client.get_or_create_collection, name, metadata=metadata, embedding_function=None
        )
        collection = self._endpoint.call(f"open collection {name}", open_collection)
        if (collection.metadata or {}).get(_EMBEDDER) != embedder:
            logger.info("chroma collection %s was made by another embedder: rebuilding it", name)
            self._endpoint.call(f"delete collection {name}", partial(self._delete_collection, name))
            collection = self._endpoint.call(f"recreate collection {name}", open_collection)
        self._collections[kind] = collection
        stored = self._endpoint.call(f"read {name}", partial(collection.get, include=["metadatas"]))
        have = {
            i: (m or {}).get(_ROW_DIGEST)
            for i, m in zip(stored["ids"], stored["metadatas"] or [], strict=True)
        }
        digests = [text_digest(t) for t in texts]
        changed = [n for n, (i, d) in enumerate(zip(ids, digests, strict=True)) if have.get(i) != d]
        wanted = set(ids)
        gone = [i for i in have if i not in wanted]
        limit = self._endpoint.call("read the maximum batch size", self._client.get_max_batch_size)
        batch = max(1, int(limit))
        rows = np.ascontiguousarray(matrix, dtype=np.float32)
        # Upserts and deletes are idempotent: a retried batch, or the next sync after a failed one,
        # brings the collection to exactly these rows.
        for start in range(0, len(changed), batch):
            part = changed[start : start + batch]
            self._endpoint.call(
                f"upsert into {name}",
                partial(
                    collection.upsert,
                    ids=[ids[n] for n in part],
                    embeddings=rows[part],
                    metadatas=[{_ROW_DIGEST: digests[n]} for n in part],
                ),
            )
        for start in range(0, len(gone), batch):
            delete = partial(collection.delete, ids=gone[start : start + batch])
            self._endpoint.call(f"delete from {name}", delete)
        return len(changed) + len(gone)

    def top(self, kind: StoreKind, query: Matrix, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` rows nearest to ``query`` (cosine, approximate), best first."""
        collection = self._collections.get(kind)
        if collection is None or limit <= 0:
            return []
        vector = np.asarray(query, dtype=np.float32).reshape(1, -1)

        def search() -> Any:
            count = int(collection.count())
            if count == 0:
                return None
            return collection.query(
                query_embeddings=vector, n_results=min(limit, count), include=["distances"]
            )

        result = self._endpoint.call(f"query {collection.name}", search)
        if result is None:
            return []
        distances = result["distances"][0] if result["distances"] else []
        pairs = [(str(i), 1.0 - float(d)) for i, d in zip(result["ids"][0], distances, strict=True)]
        return sorted(pairs, key=lambda p: (-p[1], p[0]))

    def _delete_collection(self, name: str) -> None:
        from chromadb.errors import NotFoundError

        with contextlib.suppress(NotFoundError):  # gone already: a retry after a lost answer
            self._client.delete_collection(name)
