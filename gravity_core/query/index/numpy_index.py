"""The default anchor index: the KB's anchor matrices in memory, searched by one mat-vec product."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gravity_core.embeddings.base import Matrix
from gravity_core.errors import ConfigurationError
from gravity_core.query.index.base import query_vector
from gravity_core.query.index.ivf import IVFSearch, IVFSettings
from gravity_core.schema import AnchorKind
from gravity_core.storage.anchor_vectors import AnchorVectors, KindVectors
from gravity_core.storage.files import RowReader

__all__ = ["DEFAULT_IVF", "NumpyAnchorIndex"]

#: Kinds of 10k anchors or more take candidates from an inverted file (with faiss installed).
DEFAULT_IVF = IVFSettings()

logger = logging.getLogger(__name__)

#: Twice the largest error of a float16 cosine of unit vectors (2^-11).
_FLOAT16_MARGIN = 1e-3


def _matvec(matrix: Matrix, vector: Matrix) -> Matrix:
    """``matrix @ vector`` on one thread.

    ``np.vecdot`` runs one BLAS dot per row in the calling thread. ``@`` (multi-threaded BLAS gemv)
    is up to 2x faster on an idle machine, but its worker threads stall when the cores are busy:
    at 10k x 384 on 2 loaded cores its mean was 3x and its p90 17x that of ``vecdot``.
    """
    if hasattr(np, "vecdot"):  # numpy >= 2.0
        return np.vecdot(matrix, vector)
    return matrix @ vector


@dataclass(frozen=True)
class _KindIndex:
    """One kind's rows, with what each query would otherwise recompute."""

    ids: list[str]
    matrix: Matrix
    rows: dict[str, int]
    # id_rank[i] is the position of ids[i] in sorted id order: ties are broken by integer compare.
    id_rank: npt.NDArray[np.intp]
    ivf: IVFSearch | None = None
    exact: RowReader | None = None  # float32 rows, when ``matrix`` holds float16

    @classmethod
    def build(
        cls, kind: AnchorKind, vectors: KindVectors, dim: int, approximate: IVFSettings | None = None
    ) -> _KindIndex:
        ids = list(vectors.ids)
        matrix = vectors.matrix
        if not ids and matrix.size == 0:
            matrix = np.zeros((0, dim), dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape != (len(ids), dim):
            raise ConfigurationError(
                f"{kind.value} vectors: {len(ids)} ids but a matrix of shape {matrix.shape} (dim {dim})"
            )
        id_rank = np.empty(len(ids), dtype=np.intp)
        id_rank[np.argsort(np.asarray(ids, dtype=object), kind="stable")] = np.arange(len(ids))
        ivf = None
        if approximate is not None and len(ids) >= approximate.min_rows:
            ivf = IVFSearch.build(matrix, approximate)
        exact = vectors.exact_rows if ivf is not None and matrix.dtype == np.float16 else None
        if exact is None:  # every row scored at each query, or no float32 source: float32 in memory
            matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        return cls(
            ids=ids,
            matrix=matrix,
            rows={a: i for i, a in enumerate(ids)},
            id_rank=id_rank,
            ivf=ivf,
            exact=exact,
        )

    def scores(self, rows: npt.NDArray[np.intp] | list[int], vector: Matrix) -> Matrix:
        """Cosine of ``vector`` with these rows (float32, whatever the matrix holds)."""
        return _matvec(np.asarray(self.matrix[rows], dtype=np.float32), vector)


class NumpyAnchorIndex:
    """Cosine search over in-memory anchor matrices (the default :class:`AnchorIndex`).

    All per-KB work (contiguous float32 matrices, id -> row map, id order for ties) happens once
    in :meth:`from_vectors`; a query is one matrix-vector product plus a partial sort
    (``np.argpartition``). A kind of 10k rows or more takes its candidates from an inverted file
    when faiss is installed (extra ``ann``; see :mod:`gravity_core.query.index.ivf`), then orders
    them exactly. Vectors read from a KB folder by ``load_packed`` hold such a kind in float16 (half
    the memory): its candidates are scored from those rows, and the ones that could reach the top
    again from their float32 rows in the file (``KindVectors.exact_rows``); ``similarities`` does
    the same for the rows that could reach the score it is given. :meth:`searches_exactly` tells which
    kinds are scanned whole. Selection takes ``top`` as the nearest anchors either way
    (:class:`~gravity_core.query.index.base.NearestSearch`). Instances
    are read-only and safe to share between threads.

    Example:
        ```python
        index = NumpyAnchorIndex.from_vectors(AnchorStore("kb").load().vectors)
        index.top(AnchorKind.EVENT, embedder.embed(["when did Maya move?"])[0], 5)
        ```
    """

    def __init__(self, embedder: str, dim: int, kinds: dict[AnchorKind, _KindIndex]) -> None:
        self._embedder = embedder
        self._dim = dim
        self._kinds = kinds
        # Made at the first top_each that needs it, by the process that uses it: a process forked
        # from this one (a pre-fork server) inherits the pool but not its threads.
        self._helpers: tuple[int, ThreadPoolExecutor] | None = None
        self._helpers_lock = threading.Lock()

    @classmethod
    def from_vectors(
        cls, vectors: AnchorVectors, *, approximate: IVFSettings | None = DEFAULT_IVF
    ) -> NumpyAnchorIndex:
        """Index a KB's anchor vectors (the matrices are copied only if not already contiguous float32).

        Args:
            vectors: the KB's vectors.
            approximate: when large kinds use an inverted file for candidates; ``None``: never.

        Raises:
            ConfigurationError: a kind's ids and matrix disagree in length or dimension.
        """
        kinds = {
            kind: _KindIndex.build(kind, vectors.get(kind), vectors.dim, approximate) for kind in AnchorKind
        }
        logger.debug(
            "numpy anchor index: %s",
            ", ".join(f"{kind.value} {len(k.ids)}" for kind, k in kinds.items()),
        )
        return cls(vectors.embedder, vectors.dim, kinds)

    @property
    def embedder(self) -> str:
        """Name of the embedder that made the vectors."""
        return self._embedder

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._dim

    def __len__(self) -> int:
        return sum(len(k.ids) for k in self._kinds.values())

    def searches_exactly(self, kind: AnchorKind) -> bool:
        """Whether :meth:`top` scores every anchor of ``kind`` (no inverted file for it)."""
        return self._kinds[kind].ivf is None

    def top(self, kind: AnchorKind, query: Matrix, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` anchors of ``kind`` with the highest cosine to ``query``, best first, ties by id.

        Raises:
            ConfigurationError: ``query`` does not have the index's dimension.
        """
        vector = query_vector(query, self._dim)
        index = self._kinds[kind]
        count = len(index.ids)
        if limit <= 0 or count == 0:
            return []
        if index.ivf is not None and limit < count:
            rows = index.ivf.candidates(vector, limit)
            scores = index.scores(rows, vector)
            if index.exact is not None and len(rows):
                # A float16 cosine is within 2^-11 of the float32 one: every row that could reach
                # the top ``limit`` is scored again from its float32 row, so the order is exact.
                cut = (
                    np.partition(scores, len(scores) - limit)[len(scores) - limit]
                    if limit < len(scores)
                    else -2.0
                )
                near = np.flatnonzero(scores >= cut - _FLOAT16_MARGIN)
                scores[near] = _matvec(index.exact.read(rows[near]), vector)
            order = np.lexsort((index.id_rank[rows], -scores))[:limit]
            return [(index.ids[rows[i]], float(scores[i])) for i in order.tolist()]
        scores = _matvec(index.matrix, vector)
        if limit < count:
            best = np.argpartition(scores, count - limit)[count - limit :]
            # Every row tied with the weakest kept score competes, so ties at the cut go by id too.
            candidates = np.flatnonzero(scores >= scores[best].min())
        else:
            candidates = np.arange(count)
        order = candidates[np.lexsort((index.id_rank[candidates], -scores[candidates]))][:limit]
        return [(index.ids[i], float(scores[i])) for i in order.tolist()]

    def top_each(
        self, query: Matrix, limits: Mapping[AnchorKind, int]
    ) -> dict[AnchorKind, list[tuple[str, float]]]:
        """:meth:`top` of each kind in ``limits`` (kind -> limit), the same lists.

        When two kinds or more take candidates from an inverted file, the largest of them is
        searched in a helper thread meanwhile (faiss releases the GIL while it reads the codes).
        On benchmark 1's 1M-anchor KB, searched in process, the three kinds took 1.2 ms instead of
        1.7 on idle cores, and no longer with one to three other busy processes on the two cores.
        The helper threads, at most one per core, start at the first such call and wait idle
        between queries.

        Raises:
            ConfigurationError: ``query`` does not have the index's dimension.
        """
        vector = query_vector(query, self._dim)
        approximate = [
            kind
            for kind, limit in limits.items()
            if self._kinds[kind].ivf is not None and 0 < limit < len(self._kinds[kind].ids)
        ]
        if len(approximate) < 2:
            return {kind: self.top(kind, vector, limit) for kind, limit in limits.items()}
        largest = max(approximate, key=lambda kind: len(self._kinds[kind].ids))
        pending = self._helper_threads().submit(self.top, largest, vector, limits[largest])
        found = {kind: self.top(kind, vector, limit) for kind, limit in limits.items() if kind is not largest}
        found[largest] = pending.result()
        return {kind: found[kind] for kind in limits}

    def _helper_threads(self) -> ThreadPoolExecutor:
        with self._helpers_lock:
            if self._helpers is None or self._helpers[0] != os.getpid():
                pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="gravity-index")
                self._helpers = (os.getpid(), pool)
            return self._helpers[1]

    def similarities(
        self, kind: AnchorKind, query: Matrix, ids: Sequence[str], *, at_least: float | None = None
    ) -> dict[str, float]:
        """Cosine of ``query`` with the anchors ``ids`` of ``kind``; unknown ids are skipped.

        A kind held in float16 is scored from those rows, then the rows that could score
        ``at_least`` (all of them if ``None``) again from their float32 rows in the file: the
        cosines that can count are the ones :meth:`top` gives, the others within 5e-4 of them.

        Raises:
            ConfigurationError: ``query`` does not have the index's dimension.
        """
        vector = query_vector(query, self._dim)
        index = self._kinds[kind]
        known = [a for a in dict.fromkeys(ids) if a in index.rows]
        if not known:
            return {}
        rows = np.fromiter((index.rows[a] for a in known), dtype=np.intp, count=len(known))
        scores = index.scores(rows, vector)
        if index.exact is not None:
            floor = -np.inf if at_least is None else at_least - _FLOAT16_MARGIN
            near = np.flatnonzero(scores >= floor)
            if near.size:
                scores[near] = _matvec(index.exact.read(rows[near]), vector)
        return dict(zip(known, scores.tolist(), strict=True))
