"""Choosing anchors of one kind: native candidates, cosine rerank, similarity floor, top K."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from gravity_core.query.index.base import AnchorIndex, NearestSearch
from gravity_core.query.types import ScoredAnchor
from gravity_core.schema import AnchorKind

__all__ = ["select"]


def select(
    kind: AnchorKind,
    native: Callable[[], Mapping[str, float]],
    index: AnchorIndex,
    query: np.ndarray,
    *,
    k: int,
    sigma: float,
    pool: int,
    rerank: bool,
    exclude: frozenset[str] = frozenset(),
    nearest: Sequence[tuple[str, float]] | None = None,
) -> list[ScoredAnchor]:
    """The ``k`` best anchors of ``kind`` for the query.

    With ``rerank``, the candidates are the native matches plus the ``pool`` nearest anchors by
    embedding; all are scored by cosine and those below ``sigma`` are dropped. Without it (the
    '-rerank' ablation), the native matches are kept in native-score order.

    ``native`` makes the native matches when they are needed. A :class:`NearestSearch` index is
    asked only for the anchors kept: the ``k`` best by cosine are among its nearest, and native
    scores would only order equal cosines, so they are made only when two of the nearest tie.
    Another index (such as Chroma's graph search) is asked for the ``pool`` nearest, and the
    native matches join them, since it may miss some.

    ``nearest``: the :class:`NearestSearch` index's ``top`` for this kind and query with a limit of
    at least ``k + len(exclude) + 1``, when the caller has it already (``top_each``).
    """
    if k <= 0:
        return []
    if not rerank:
        ranked = sorted(
            ((i, s) for i, s in native().items() if i not in exclude), key=lambda p: (-p[1], p[0])
        )
        return [ScoredAnchor(kind, i, s, "native") for i, s in ranked[:k]]
    wanted = k + len(exclude)
    if wanted >= pool or not isinstance(index, NearestSearch):
        return _reranked(kind, native(), index, query, k=k, sigma=sigma, nearest=pool, exclude=exclude)
    nearest = list(nearest[: wanted + 1]) if nearest is not None else index.top(kind, query, wanted + 1)
    if any(a[1] <= b[1] for a, b in itertools.pairwise(nearest)):
        return _reranked(kind, native(), index, query, k=k, sigma=sigma, nearest=pool, exclude=exclude)
    kept = [(i, s) for i, s in nearest[:wanted] if s >= sigma and i not in exclude]
    return [ScoredAnchor(kind, i, s) for i, s in kept[:k]]


def _reranked(
    kind: AnchorKind,
    native: Mapping[str, float],
    index: AnchorIndex,
    query: np.ndarray,
    *,
    k: int,
    sigma: float,
    nearest: int,
    exclude: frozenset[str],
) -> list[ScoredAnchor]:
    scores = dict(index.top(kind, query, nearest))
    missing = [i for i in native if i not in scores]
    if missing and isinstance(index, NearestSearch):
        # A native match counts only if it reaches the floor and the k-th nearest.
        nearest_kept = sorted((s for i, s in scores.items() if i not in exclude), reverse=True)[k - 1 : k]
        scores.update(index.similarities(kind, query, missing, at_least=max([sigma, *nearest_kept])))
    elif missing:
        scores.update(index.similarities(kind, query, missing))
    ranked = sorted(
        ((i, s) for i, s in scores.items() if s >= sigma and i not in exclude),
        key=lambda p: (-p[1], -native.get(p[0], 0.0), p[0]),
    )
    return [ScoredAnchor(kind, i, s) for i, s in ranked[:k]]
