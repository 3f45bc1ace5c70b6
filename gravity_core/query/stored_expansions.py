"""The vectors a build stored for expanded queries, found by a digest of the query instead of its text."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gravity_core.anchors.expansions import expansion_key
from gravity_core.embeddings.base import Matrix
from gravity_core.storage.anchor_vectors import KindVectors

__all__ = ["StoredExpansions"]


def _digest(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")


@dataclass(frozen=True)
class StoredExpansions:
    """Stored expanded-query vectors by query, without holding the queries' texts.

    A KB stores about two expanded queries per anchor; their texts, kept as a dict, took 20 MB at
    100k anchors. Here each is a 64-bit digest in a sorted array (two different queries share
    one with odds of about 1 in 10^9 at 200k queries; the vector found would then be the other's).

    Attributes:
        matrix: the vectors, one row per stored query (may be a read-only file mapping).
        digests: digests of the queries' keys (``expansion_key``), sorted.
        rows: ``rows[i]`` is the row of ``matrix`` of ``digests[i]``; or, with a ``tail`` (the
            rows of a delta generation, ``KindVectors.tail``), ``tail[~rows[i]]`` when negative.
    """

    matrix: Matrix
    digests: npt.NDArray[np.uint64]
    rows: npt.NDArray[np.intp]
    tail: Matrix | None = None

    @classmethod
    def of(cls, vectors: KindVectors | None) -> StoredExpansions:
        """Index the stored expansion vectors of a KB (none: an empty index)."""
        ids = vectors.ids if vectors is not None else []
        digests = np.fromiter((_digest(key) for key in ids), dtype=np.uint64, count=len(ids))
        order = np.argsort(digests, kind="stable").astype(np.intp)
        if vectors is None:
            return cls(matrix=np.zeros((0, 0), dtype=np.float32), digests=digests, rows=order)
        rows = order if vectors.source is None else vectors.source[order]
        return cls(matrix=vectors.matrix, digests=digests[order], rows=rows, tail=vectors.tail)

    def vector(self, query: str) -> Matrix | None:
        """The stored vector of an expanded query, or ``None`` when the build did not embed it."""
        wanted = np.uint64(_digest(expansion_key(query)))
        i = int(np.searchsorted(self.digests, wanted))
        if i < len(self.digests) and self.digests[i] == wanted:
            where = int(self.rows[i])
            row: Matrix = self.matrix[where] if where >= 0 or self.tail is None else self.tail[~where]
            return row
        return None
