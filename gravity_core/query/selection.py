"""Choosing anchors of one kind: native candidates, cosine rerank, similarity floor, top K."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gravity_core.query.index.base import AnchorIndex
from gravity_core.query.types import ScoredAnchor
from gravity_core.schema import AnchorKind

__all__ = ["select"]


def select(
    kind: AnchorKind,
    native: Mapping[str, float],
    index: AnchorIndex,
    query: np.ndarray,
    *,
    k: int,
    sigma: float,
    pool: int,
    rerank: bool,
    exclude: frozenset[str] = frozenset(),
) -> list[ScoredAnchor]:
    """The ``k`` best anchors of ``kind`` for the query.

    With ``rerank``, the candidates are the native matches plus the ``pool`` nearest anchors by
    embedding; all are scored by cosine and those below ``sigma`` are dropped. Without it (the
    '-rerank' ablation), the native matches are kept in native-score order.
    """
    if k <= 0:
        return []
    if not rerank:
        ranked = sorted(((i, s) for i, s in native.items() if i not in exclude), key=lambda p: (-p[1], p[0]))
        return [ScoredAnchor(kind, i, s, "native") for i, s in ranked[:k]]
    scores = dict(index.top(kind, query, pool))
    missing = [i for i in native if i not in scores]
    if missing:
        scores.update(index.similarities(kind, query, missing))
    ranked = sorted(
        ((i, s) for i, s in scores.items() if s >= sigma and i not in exclude),
        key=lambda p: (-p[1], -native.get(p[0], 0.0), p[0]),
    )
    return [ScoredAnchor(kind, i, s) for i, s in ranked[:k]]
