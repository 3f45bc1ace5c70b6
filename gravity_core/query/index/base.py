"""The anchor index protocol: nearest anchors of one kind to a query vector, and cosines of given anchors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from gravity_core.embeddings.base import Matrix
from gravity_core.errors import ConfigurationError
from gravity_core.schema import AnchorKind

__all__ = ["AnchorIndex", "NearestSearch", "query_vector"]


@runtime_checkable
class AnchorIndex(Protocol):
    """Cosine search over a KB's anchor vectors, one collection per :class:`AnchorKind`.

    Queries are L2-normalized float32 vectors of dimension ``dim`` made by the embedder named
    ``embedder``; scores are cosine similarities (higher is better).
    """

    @property
    def embedder(self) -> str:
        """Name of the embedder that made the anchor vectors (empty when the index holds none)."""
        ...

    @property
    def dim(self) -> int:
        """Vector dimension (0 when the index holds no vectors)."""
        ...

    def top(self, kind: AnchorKind, query: Matrix, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` anchors of ``kind`` most similar to ``query``.

        Args:
            kind: which anchors to search.
            query: L2-normalized float32 vector of shape ``(dim,)``.
            limit: how many anchors to return at most.

        Returns:
            ``(anchor id, cosine)`` pairs, best first; equal scores are ordered by id.
        """
        ...

    def similarities(self, kind: AnchorKind, query: Matrix, ids: Sequence[str]) -> dict[str, float]:
        """Cosine of ``query`` with each of the anchors ``ids`` of ``kind``; unknown ids are skipped."""
        ...


@runtime_checkable
class NearestSearch(Protocol):
    """An index whose :meth:`AnchorIndex.top` selection can take as a kind's nearest anchors.

    Its ``top`` scans the kind whole, or takes enough candidates from an approximate structure
    itself (benchmark 1 measures how often that selects other anchors than a full scan), and orders
    them by cosine then id. Selection then asks it only for the anchors it keeps, and adds native
    matches only to order equal cosines.
    """

    def searches_exactly(self, kind: AnchorKind) -> bool:
        """Whether ``top`` for ``kind`` scores every anchor of the kind (else it is approximate)."""
        ...

    def top_each(
        self, query: Matrix, limits: Mapping[AnchorKind, int]
    ) -> dict[AnchorKind, list[tuple[str, float]]]:
        """``top(kind, query, limit)`` of each kind in ``limits`` (kind -> limit).

        It is one call, which may search the kinds at once.
        """
        ...

    def similarities(
        self, kind: AnchorKind, query: Matrix, ids: Sequence[str], *, at_least: float | None = None
    ) -> dict[str, float]:
        """:meth:`AnchorIndex.similarities`, where only the cosines from ``at_least`` on need be exact.

        Only the cosines of ``at_least`` or more need be the very ones ``top`` gives (lower ones may
        be close approximations); ``None``: all of them.
        """
        ...


def query_vector(query: Matrix, dim: int) -> Matrix:
    """``query`` as a 1-D float32 array of length ``dim`` (no copy when it already is one).

    Raises:
        ConfigurationError: the query has another size than the index's vectors.
    """
    vector = np.asarray(query, dtype=np.float32)
    if vector.ndim != 1:
        vector = vector.reshape(-1)
    if vector.shape[0] != dim:
        raise ConfigurationError(
            f"query vector has {vector.shape[0]} dimensions but the anchor index holds {dim}-dimensional "
            "vectors: embed the query with the embedder the KB was built with"
        )
    return vector
