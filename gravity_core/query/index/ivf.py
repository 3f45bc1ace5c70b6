"""Approximate candidates for large anchor kinds: an inverted-file index (faiss ``IndexIVFScalarQuantizer``).

Exact search reads every row per query: at 100k anchors of 384 dimensions that is 150 MB of
float32 per query, most of GRAVITY's query time. An inverted file clusters the rows around
``sqrt(n)`` centroids (k-means on a fixed sample, so it is deterministic) and a query reads only
the rows of its ``nprobe`` nearest clusters. The lists hold each row in 8 bits per dimension (a
quarter of the float32 matrix, which the engine keeps for exact scores), as signed integers on one
scale for every dimension. faiss reads those without a per-dimension offset and step: on 1M
anchors the three kinds' searches took 1.4 ms per query instead of 2.5 with faiss's trained
per-dimension codes, and the same share of questions kept what an exact scan keeps. The inverted
file only proposes candidates, whose exact inner products then decide. Rows in clusters it did not
read are missed, and 8-bit scores can swap close rows, which is why the engine asks it for a wider
pool than it keeps. faiss is an optional extra (``ann``); without it, every kind is searched exactly.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from gravity_core.embeddings.base import Matrix

__all__ = ["IVFSearch", "IVFSettings"]

logger = logging.getLogger(__name__)

_ADD_ROWS = 8192
_CODE_LIMIT = 127.0


def _codes(rows: Matrix, scale: float) -> Matrix:
    """``rows`` on the codes' integer scale: multiplied, rounded and clipped to [-127, 127]."""
    return np.clip(np.rint(rows * np.float32(scale)), -_CODE_LIMIT, _CODE_LIMIT).astype(np.float32)


@dataclass(frozen=True)
class IVFSettings:
    """When and how a kind is searched approximately.

    Attributes:
        min_rows: kinds with fewer rows are searched exactly (it is fast enough there).
        probe_share: share of the clusters a query reads (at least ``min_probes``).
        min_probes: clusters read per query, at least.
        pool: a query takes ``pool`` times the rows asked for from the inverted file, before the
            exact ordering keeps the best.
        min_candidates: and at least this many (selection asks for the few anchors it keeps; the
            8-bit codes' order is too rough to take just twice that many).
        train_per_cluster: k-means sample size per cluster.
        seed: the k-means sample and initialisation seed.
    """

    min_rows: int = 10_000
    probe_share: float = 1 / 16
    min_probes: int = 8
    pool: int = 2
    min_candidates: int = 100
    train_per_cluster: int = 40
    seed: int = 1234


class IVFSearch:
    """Approximate top rows of one kind's L2-normalized matrix by inner product (cosine).

    Read-only after :meth:`build`; faiss searches are safe to run from several threads.
    """

    def __init__(self, index: Any, quantizer: Any, settings: IVFSettings, scale: float) -> None:
        self._index = index
        self._quantizer = quantizer  # the index does not own it: keep it alive as long as the index
        self._settings = settings
        self._scale = scale

    @classmethod
    def build(cls, matrix: Matrix, settings: IVFSettings) -> IVFSearch | None:
        """An inverted file over ``matrix`` (rows, dim), or ``None`` when faiss is not installed."""
        try:
            import faiss
        except ImportError:
            logger.info(
                "%d rows searched exactly; pip install 'gravity-memory[ann]' (faiss) makes large KBs faster",
                matrix.shape[0],
            )
            return None
        rows, dim = matrix.shape
        clusters = max(1, round(math.sqrt(rows)))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFScalarQuantizer(
            quantizer,
            dim,
            clusters,
            faiss.ScalarQuantizer.QT_8bit_direct_signed,
            faiss.METRIC_INNER_PRODUCT,
            False,  # codes of the rows themselves, not of their offsets from the centroid
        )
        index.cp.seed = settings.seed
        index.cp.min_points_per_centroid = 1
        sample_size = min(rows, settings.train_per_cluster * clusters)
        sample = np.random.default_rng(settings.seed).choice(rows, sample_size, replace=False)
        trained = np.asarray(matrix[np.sort(sample)], dtype=np.float32)
        largest = float(np.abs(trained).max()) if trained.size else 0.0
        # The sample's largest coordinate maps to 127; a larger one in another row is clipped, which
        # only moves that row's candidate score (the engine scores candidates exactly).
        scale = _CODE_LIMIT / largest if largest > 0 else 1.0
        index.train(trained * np.float32(scale))  # k-means on the rows as they are, only scaled
        for start in range(0, rows, _ADD_ROWS):  # float32 one block at a time (the matrix may be float16)
            index.add(_codes(np.asarray(matrix[start : start + _ADD_ROWS], dtype=np.float32), scale))
        index.nprobe = min(clusters, max(settings.min_probes, math.ceil(clusters * settings.probe_share)))
        logger.debug("inverted file: %d rows, %d clusters, %d probed", rows, clusters, index.nprobe)
        return cls(index, quantizer, settings, scale)

    def candidates(self, vector: Matrix, limit: int) -> npt.NDArray[np.intp]:
        """Row numbers of about the best ``pool * limit`` rows for ``vector`` (unordered, no -1).

        The search asks for at least ``min_candidates`` rows.
        """
        wanted = max(limit * self._settings.pool, self._settings.min_candidates)
        scaled = np.asarray(vector, dtype=np.float32).reshape(1, -1) * np.float32(self._scale)
        _, found = self._index.search(scaled, wanted)
        rows = found[0]
        return rows[rows >= 0].astype(np.intp)
