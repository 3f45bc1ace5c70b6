"""The sentence graph: a k-nearest-neighbour graph on cosine similarity, kept as fixed-width arrays.

Storage: ``neighbours`` (int32, shape ``(n, k)``) and ``weights`` (float32, same shape) hold, for
each sentence, its out-edges best first, padded with ``-1`` / ``0``. Two ``.npy`` files persist it
as they are; no pickle, no sparse library.

Edge rule: sentence ``i`` links to the (at most) ``k`` sentences ``j`` of *other turns* with the
highest cosine ``cos(i, j)``, keeping only ``cos(i, j) >= gamma``. Ties are broken by the lower
index, so the graph is a pure function of the vectors and their order. Sentences of the same turn
are not linked here: they are already joined by their parent turn.

Incremental rule (:meth:`SentenceGraph.extend`): a new sentence gets its top-k among *all*
sentences, old and new; an old sentence's list is merged with the new sentences and cut back to
its top-k (a new sentence displaces an old neighbour only if it is more similar, or equally
similar with a lower index, which cannot happen as new indices are higher). Since
``top_k(A ∪ B) = top_k(top_k(A) ∪ B)``, the result equals a build from scratch over the same
sentences in the same order. Similarities are computed in float64 and stored rounded to float32,
so the blocking of the matrix products does not change the result.

Traversal (:meth:`SentenceGraph.expand`) treats edges as undirected: ``i`` and ``j`` are linked if
either lists the other. The undirected view is a CSR triple of numpy arrays, rebuilt lazily after
an extension.

Scale: building costs one ``n x n`` similarity pass (in row blocks, so memory stays bounded), which
is fine up to a few hundred thousand sentences on one machine. With millions of sentences, build the
kNN lists with an approximate index (hnswlib or FAISS HNSW/IVF, querying each new sentence for its
k neighbours, then updating the old lists exactly as :meth:`SentenceGraph.extend` does), and keep
the graph on disk as CSR arrays (memory-mapped ``.npy``) or in a graph database (Neo4j, Memgraph)
if other processes must walk it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gravity_core.embeddings.base import Matrix
from gravity_core.errors import AnchorStoreError, ConfigurationError

__all__ = ["Adjacency", "SentenceGraph"]

logger = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float32]

_BLOCK_CELLS = 1 << 23  # float64 cells of one similarity block (64 MiB)


@dataclass(frozen=True)
class Adjacency:
    """Undirected CSR view: the neighbours of ``i`` are ``indices[indptr[i]:indptr[i + 1]]``."""

    indptr: npt.NDArray[np.int64]
    indices: IntArray
    weights: FloatArray


class SentenceGraph:
    """Directed top-k lists over sentence vectors, with an undirected traversal view.

    Args:
        k: out-edges per sentence at most.
        gamma: minimum cosine of an edge.
        neighbours: existing lists ``(n, k)`` (``-1`` padding), e.g. read from disk.
        weights: their cosines ``(n, k)`` (``0`` padding).

    Raises:
        ConfigurationError: ``k`` below 1.
        AnchorStoreError: ``neighbours``/``weights`` of the wrong shape or out-of-range indices.
    """

    def __init__(
        self,
        k: int,
        gamma: float,
        neighbours: IntArray | None = None,
        weights: FloatArray | None = None,
    ) -> None:
        if k < 1:
            raise ConfigurationError(f"k must be >= 1, got {k}")
        self.k = k
        self.gamma = gamma
        if neighbours is None or weights is None:
            neighbours = np.full((0, k), -1, dtype=np.int32)
            weights = np.zeros((0, k), dtype=np.float32)
        neighbours = np.asarray(neighbours, dtype=np.int32)
        weights = np.asarray(weights, dtype=np.float32)
        n = neighbours.shape[0] if neighbours.ndim == 2 else -1
        if neighbours.shape != (n, k) or weights.shape != (n, k):
            raise AnchorStoreError(
                f"sentence graph arrays have shapes {neighbours.shape} and {weights.shape}, expected (n, {k})"
            )
        if n and (neighbours.min() < -1 or neighbours.max() >= n):
            raise AnchorStoreError("sentence graph has neighbour indices out of range")
        self.neighbours: IntArray = neighbours
        self.weights: FloatArray = weights
        self._adjacency: Adjacency | None = None

    @property
    def n(self) -> int:
        """Number of sentences (nodes)."""
        return int(self.neighbours.shape[0])

    def extend(self, vectors: Matrix, groups: npt.ArrayLike) -> None:
        """Add the sentences ``vectors[self.n:]`` and their edges (see the module's incremental rule).

        Args:
            vectors: L2-normalized vectors of *all* sentences, old ones first, in index order.
            groups: the turn index of every sentence (same length); equal groups are never linked.

        Raises:
            ConfigurationError: ``vectors`` and ``groups`` disagree, or fewer rows than nodes.
        """
        matrix = np.asarray(vectors, dtype=np.float64)
        group = np.asarray(groups, dtype=np.int64)
        total = matrix.shape[0]
        if matrix.ndim != 2 or group.shape != (total,) or total < self.n:
            raise ConfigurationError(
                f"extend needs vectors (n, dim) and groups (n,) with n >= {self.n}, "
                f"got {matrix.shape} and {group.shape}"
            )
        old = self.n
        if total == old:
            return
        new_idx, new_w = self._new_rows(matrix, group, old)
        old_idx, old_w = self._merge_old_rows(matrix, group, old)
        self.neighbours = np.vstack([old_idx, new_idx])
        self.weights = np.vstack([old_w, new_w])
        self._adjacency = None
        logger.debug("sentence graph: %d -> %d nodes, %d edges", old, total, self.edge_count())

    def _new_rows(
        self, matrix: npt.NDArray[np.float64], group: npt.NDArray[np.int64], old: int
    ) -> tuple[IntArray, FloatArray]:
        total = matrix.shape[0]
        out_idx = np.full((total - old, self.k), -1, dtype=np.int32)
        out_w = np.zeros((total - old, self.k), dtype=np.float32)
        step = max(1, _BLOCK_CELLS // max(total, 1))
        columns = np.arange(total, dtype=np.int64)
        for start in range(old, total, step):
            rows = np.arange(start, min(start + step, total))
            sims = (matrix[rows] @ matrix.T).astype(np.float32)
            sims[group[rows][:, None] == group[None, :]] = -np.inf
            idx, w = _select(sims, np.broadcast_to(columns, sims.shape), self.k, self.gamma)
            out_idx[rows - old], out_w[rows - old] = idx, w
        return out_idx, out_w

    def _merge_old_rows(
        self, matrix: npt.NDArray[np.float64], group: npt.NDArray[np.int64], old: int
    ) -> tuple[IntArray, FloatArray]:
        """The old rows' lists merged with the new sentences (copies; the graph is unchanged)."""
        out_idx, out_w = self.neighbours.copy(), self.weights.copy()
        total = matrix.shape[0]
        fresh = matrix[old:]
        step = max(1, _BLOCK_CELLS // max(total - old, 1))
        new_columns = np.arange(old, total, dtype=np.int64)
        for start in range(0, old, step):
            rows = np.arange(start, min(start + step, old))
            sims = (matrix[rows] @ fresh.T).astype(np.float32)
            sims[group[rows][:, None] == group[None, old:]] = -np.inf
            current = self.neighbours[rows].astype(np.int64)
            current_w = np.where(current >= 0, self.weights[rows], -np.inf).astype(np.float32)
            scores = np.hstack([current_w, sims])
            cols = np.hstack([current, np.broadcast_to(new_columns, sims.shape)])
            idx, w = _select(scores, cols, self.k, self.gamma)
            out_idx[rows], out_w[rows] = idx, w
        return out_idx, out_w

    def edge_count(self) -> int:
        """Number of directed edges."""
        return int((self.neighbours >= 0).sum())

    def out_edges(self, i: int) -> list[tuple[int, float]]:
        """The directed out-edges of sentence ``i``, best first."""
        row = self.neighbours[i]
        return [(int(j), float(w)) for j, w in zip(row, self.weights[i], strict=True) if j >= 0]

    def edges(self) -> set[tuple[int, int]]:
        """All directed edges as ``(source, target)`` pairs."""
        src, slot = np.nonzero(self.neighbours >= 0)
        return set(zip(src.tolist(), self.neighbours[src, slot].tolist(), strict=True))

    def adjacency(self) -> Adjacency:
        """The undirected view (cached until the next :meth:`extend`)."""
        if self._adjacency is None:
            self._adjacency = self._build_adjacency()
        return self._adjacency

    def _build_adjacency(self) -> Adjacency:
        n = self.n
        src, slot = np.nonzero(self.neighbours >= 0)
        dst = self.neighbours[src, slot].astype(np.int64)
        w = self.weights[src, slot]
        both_src = np.concatenate([src.astype(np.int64), dst])
        both_dst = np.concatenate([dst, src.astype(np.int64)])
        both_w = np.concatenate([w, w])
        # A mutual pair appears twice with the same cosine: keep one copy.
        keys, first = np.unique(both_src * max(n, 1) + both_dst, return_index=True)
        rows = keys // max(n, 1)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, rows + 1, 1)
        return Adjacency(
            indptr=np.cumsum(indptr),
            indices=(keys % max(n, 1)).astype(np.int32),
            weights=both_w[first].astype(np.float32),
        )

    def expand(
        self,
        seeds: Mapping[int, float],
        *,
        hops: int,
        decay: float,
        max_per_hop: int,
        own_scores: npt.NDArray[np.float32] | None = None,
    ) -> dict[int, tuple[float, int]]:
        """Spread scores from seed sentences along the undirected edges.

        A sentence first reached at hop ``h`` from a sentence scored ``s`` over an edge of weight
        ``w`` scores ``s * w * decay`` (the best over all such edges), or its own cosine with the
        question (``own_scores``) if that is higher. At most ``max_per_hop`` newly reached
        sentences (the best, ties by index) are kept per hop and spread further.

        Args:
            seeds: sentence index -> score (hop 0).
            hops: number of hops.
            decay: factor per hop, in (0, 1].
            max_per_hop: new sentences kept per hop.
            own_scores: cosine of every sentence with the question, if known.

        Returns:
            sentence index -> (score, hop at which it was reached), seeds included.
        """
        reached: dict[int, tuple[float, int]] = {int(i): (float(s), 0) for i, s in seeds.items()}
        if hops <= 0 or not reached or self.edge_count() == 0:
            return reached
        adjacency = self.adjacency()
        frontier = np.fromiter(reached, dtype=np.int64)
        frontier_scores = np.array([reached[int(i)][0] for i in frontier], dtype=np.float64)
        for hop in range(1, hops + 1):
            starts, ends = adjacency.indptr[frontier], adjacency.indptr[frontier + 1]
            counts = ends - starts
            if not counts.sum():
                break
            positions = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends, strict=True)])
            targets = adjacency.indices[positions].astype(np.int64)
            spread = np.repeat(frontier_scores, counts) * adjacency.weights[positions] * decay
            best: dict[int, float] = {}
            for j, s in zip(targets.tolist(), spread.tolist(), strict=True):
                if j not in reached and s > best.get(j, -np.inf):
                    best[j] = s
            if not best:
                break
            kept = sorted(best.items(), key=lambda item: (-item[1], item[0]))[:max_per_hop]
            for j, s in kept:
                own = float(own_scores[j]) if own_scores is not None else -np.inf
                reached[j] = (max(s, own), hop)
            frontier = np.array([j for j, _ in kept], dtype=np.int64)
            frontier_scores = np.array([reached[j][0] for j, _ in kept], dtype=np.float64)
        return reached


def _select(
    scores: npt.NDArray[np.float32], columns: npt.NDArray[np.int64], k: int, gamma: float
) -> tuple[IntArray, FloatArray]:
    """Per row, the ``k`` best columns with score >= gamma, by (score desc, column asc)."""
    rows, width = scores.shape
    out_idx = np.full((rows, k), -1, dtype=np.int32)
    out_w = np.zeros((rows, k), dtype=np.float32)
    if width == 0:
        return out_idx, out_w
    if width > k:
        kth = np.partition(scores, width - k, axis=1)[:, width - k]
        candidates = (scores >= kth[:, None]) & (scores >= gamma)
    else:
        candidates = scores >= gamma
    candidates &= np.isfinite(scores)
    for r in range(rows):
        cand = np.flatnonzero(candidates[r])
        if not cand.size:
            continue
        cols = columns[r, cand]
        vals = scores[r, cand]
        order = np.lexsort((cols, -vals))[:k]
        out_idx[r, : order.size] = cols[order]
        out_w[r, : order.size] = vals[order]
    return out_idx, out_w
