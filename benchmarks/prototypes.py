"""Prototypes of the fixes proposed for missed targets, measured beside the real code. Not part of GRAVITY.

Query overhead at 100k anchors: the exact search (one float32 mat-vec over every anchor's 384-dim vector per
query, :class:`~gravity_core.query.index.NumpyAnchorIndex`) is most of GRAVITY's query time.
:class:`TwoStageAnchorIndex` keeps a PCA projection of each large kind's vectors: the coarse pass
reads the projected rows (4x fewer bytes), and only the best ``oversample * limit`` candidates are
rescored exactly with the full vectors. Small kinds are searched exactly, as before. It implements
the :class:`~gravity_core.query.index.AnchorIndex` protocol, so the engine runs unchanged.

The benchmark reports its time and how often it selects the same anchors as the exact index,
as evidence for the change proposed to ``numpy_index.py``.

Expansion fan-out: :class:`PrecomputedEmbedder` serves the expansions' vectors from memory, as
if the KB had stored them at build time, so only the question is embedded per query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gravity_core.anchor_vectors import AnchorVectors
from gravity_core.embeddings.base import Embedder, Matrix
from gravity_core.query.index import NumpyAnchorIndex
from gravity_core.schema import AnchorKind

__all__ = ["PrecomputedEmbedder", "TwoStageAnchorIndex"]

#: Kinds with fewer rows are searched exactly (the full mat-vec is cheap there).
_MIN_ROWS = 5_000
_SAMPLE_ROWS = 20_000


def _matvec(matrix: Matrix, vector: Matrix) -> Matrix:
    """Row dot products on one thread (multi-threaded BLAS gemv stalls on busy cores)."""
    return np.vecdot(matrix, vector) if hasattr(np, "vecdot") else np.einsum("ij,j->i", matrix, vector)


@dataclass(frozen=True)
class _Projected:
    ids: list[str]
    basis: Matrix  # (dim, reduced)
    reduced: Matrix  # (rows, reduced), contiguous float32
    full: Matrix  # (rows, dim)


class TwoStageAnchorIndex:
    """Coarse search on PCA-reduced vectors, exact rescoring of the best candidates.

    Args:
        vectors: the KB's anchor vectors.
        reduced_dim: dimensions kept by the projection.
        oversample: candidates rescored exactly, as a multiple of the requested ``limit``.
        seed: seed of the row sample the projection is fitted on.
        min_rows: kinds with fewer rows are searched exactly.
    """

    def __init__(
        self,
        vectors: AnchorVectors,
        *,
        reduced_dim: int = 96,
        oversample: int = 8,
        seed: int = 0,
        min_rows: int = _MIN_ROWS,
    ) -> None:
        self._exact = NumpyAnchorIndex.from_vectors(vectors)
        self._oversample = oversample
        self._projected: dict[AnchorKind, _Projected] = {}
        rng = np.random.default_rng(seed)
        for kind in AnchorKind:
            rows = vectors.get(kind)
            if len(rows.ids) < max(min_rows, reduced_dim):
                continue
            full = np.ascontiguousarray(rows.matrix, dtype=np.float32)
            sample = full[rng.choice(len(full), size=min(_SAMPLE_ROWS, len(full)), replace=False)]
            _, _, vt = np.linalg.svd(sample - sample.mean(axis=0), full_matrices=False)
            basis = np.ascontiguousarray(vt[:reduced_dim].T, dtype=np.float32)
            self._projected[kind] = _Projected(
                list(rows.ids), basis, np.ascontiguousarray(full @ basis, dtype=np.float32), full
            )

    @property
    def embedder(self) -> str:
        """Name of the embedder that made the vectors."""
        return self._exact.embedder

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._exact.dim

    def top(self, kind: AnchorKind, query: Matrix, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` anchors of ``kind`` with the highest cosine, found in two stages for large kinds."""
        projected = self._projected.get(kind)
        if projected is None or limit <= 0:
            return self._exact.top(kind, query, limit)
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        coarse = _matvec(projected.reduced, vector @ projected.basis)
        keep = min(len(coarse), limit * self._oversample)
        candidates = np.argpartition(coarse, len(coarse) - keep)[len(coarse) - keep :]
        exact = _matvec(projected.full[candidates], vector)
        order = np.argsort(-exact, kind="stable")[:limit]
        pairs = ((projected.ids[candidates[n]], float(exact[n])) for n in order)
        return sorted(pairs, key=lambda pair: (-pair[1], pair[0]))

    def applies(self) -> bool:
        """Whether any kind is large enough to be searched in two stages."""
        return bool(self._projected)

    def similarities(self, kind: AnchorKind, query: Matrix, ids: Sequence[str]) -> dict[str, float]:
        """Exact cosines of the given anchors."""
        return self._exact.similarities(kind, query, ids)


class PrecomputedEmbedder:
    """An embedder that answers texts embedded beforehand from memory, and embeds only the others.

    Stands in for the fan-out fix: expansions are KB text (anchor renderings, turns), so their
    vectors can be computed at build time and handed out with the expansions; only the question
    is then embedded at query time. Same name and dimension as the embedder it wraps.

    Args:
        inner: the real embedder.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self._vectors: dict[str, Matrix] = {}

    @property
    def name(self) -> str:
        """The wrapped embedder's name."""
        return self.inner.name

    @property
    def dim(self) -> int:
        """The wrapped embedder's dimension."""
        return self.inner.dim

    def precompute(self, texts: Sequence[str]) -> None:
        """Embed ``texts`` now (what the build would do) and keep their vectors."""
        fresh = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if fresh:
            self._vectors.update(zip(fresh, self.inner.embed(fresh), strict=True))

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Known texts from memory; the others in one call to the wrapped embedder (not kept)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        computed = dict(zip(missing, self.inner.embed(missing), strict=True)) if missing else {}
        rows = [self._vectors[t] if t in self._vectors else computed[t] for t in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
