"""Selection of one kind's anchors: native matches are made only when they can change the result."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gravity_core.query.index import AnchorIndex, NumpyAnchorIndex
from gravity_core.query.index.base import NearestSearch
from gravity_core.query.index.ivf import IVFSettings
from gravity_core.query.selection import select
from gravity_core.query.types import ScoredAnchor
from gravity_core.schema import AnchorKind
from gravity_core.storage.anchor_vectors import AnchorVectors, KindVectors

DIM = 16
EVENT = AnchorKind.EVENT


def _index(matrix: np.ndarray, approximate: IVFSettings | None = None) -> NumpyAnchorIndex:
    ids = [f"ev-{i:04d}" for i in range(len(matrix))]
    vectors = AnchorVectors(embedder="test", dim=DIM)
    vectors.kinds[EVENT.value] = KindVectors(ids=ids, digests=[""] * len(ids), matrix=matrix)
    return NumpyAnchorIndex.from_vectors(vectors, approximate=approximate)


def _unit(rows: int, seed: int) -> np.ndarray:
    matrix = np.random.default_rng(seed).standard_normal((rows, DIM)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


class _Native:
    """Native matches as the lexicon gives them, counting how often they were asked for."""

    def __init__(self, scores: Mapping[str, float]) -> None:
        self.scores = dict(scores)
        self.calls = 0

    def __call__(self) -> Mapping[str, float]:
        self.calls += 1
        return self.scores


def _full_rerank(
    native: Mapping[str, float],
    index: AnchorIndex,
    query: np.ndarray,
    k: int,
    sigma: float,
    exclude: frozenset[str],
) -> list[ScoredAnchor]:
    """The definition: the pool's nearest and every native match, by cosine, then native score, then id."""
    scores = dict(index.top(EVENT, query, 50))
    scores.update(index.similarities(EVENT, query, [i for i in native if i not in scores]))
    ranked = sorted(
        ((i, s) for i, s in scores.items() if s >= sigma and i not in exclude),
        key=lambda p: (-p[1], -native.get(p[0], 0.0), p[0]),
    )
    return [ScoredAnchor(EVENT, i, s) for i, s in ranked[:k]]


def _select(
    native: Callable[[], Mapping[str, float]],
    index: AnchorIndex,
    query: np.ndarray,
    *,
    k: int = 5,
    sigma: float = 0.0,
    rerank: bool = True,
    exclude: frozenset[str] = frozenset(),
) -> list[ScoredAnchor]:
    return select(EVENT, native, index, query, k=k, sigma=sigma, pool=50, rerank=rerank, exclude=exclude)


def test_an_exact_index_without_ties_needs_no_native_matches() -> None:
    matrix = _unit(300, seed=1)
    index = _index(matrix)
    native = _Native({"ev-0007": 1.0, "ev-0100": 0.5})
    chosen = _select(native, index, matrix[7])
    assert native.calls == 0
    assert chosen[0].id == "ev-0007"
    assert chosen == _full_rerank(native.scores, index, matrix[7], 5, 0.0, frozenset())


def test_a_tie_among_the_nearest_is_ordered_by_native_score() -> None:
    matrix = _unit(40, seed=2)
    matrix[11] = matrix[3]  # two anchors with the same vector: the same cosine to any query
    index = _index(matrix)
    native = _Native({"ev-0011": 0.9})
    chosen = _select(native, index, matrix[3], k=1)
    assert native.calls == 1
    assert [a.id for a in chosen] == ["ev-0011"]  # by id alone, ev-0003 would come first


def test_an_approximate_index_is_taken_as_the_nearest_without_native_matches() -> None:
    pytest.importorskip("faiss", reason="the 'ann' extra (installed by make test) provides faiss")
    matrix = _unit(1_200, seed=3)
    index = _index(matrix, IVFSettings(min_rows=1_000))
    assert not index.searches_exactly(EVENT)
    native = _Native({"ev-0005": 1.0, "ev-0900": 0.9})
    chosen = _select(native, index, matrix[5])
    assert native.calls == 0
    assert chosen[0].id == "ev-0005"
    assert chosen == _full_rerank(native.scores, index, matrix[5], 5, 0.0, frozenset())


class _OtherIndex:
    """An index of another kind (a user's, or Chroma's graph search): only the AnchorIndex protocol."""

    def __init__(self, inner: NumpyAnchorIndex, missed: str) -> None:
        self.embedder, self.dim = inner.embedder, inner.dim
        self._inner, self._missed = inner, missed

    def top(self, kind: AnchorKind, query: np.ndarray, limit: int) -> list[tuple[str, float]]:
        return [p for p in self._inner.top(kind, query, limit + 1) if p[0] != self._missed][:limit]

    def similarities(self, kind: AnchorKind, query: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        return self._inner.similarities(kind, query, ids)


def test_another_index_is_searched_for_the_pool_and_joined_by_the_native_matches() -> None:
    matrix = _unit(300, seed=6)
    index = _OtherIndex(_index(matrix), missed="ev-0042")
    assert isinstance(index, AnchorIndex) and not isinstance(index, NearestSearch)
    native = _Native({"ev-0042": 0.5})
    chosen = _select(native, index, matrix[42])
    assert native.calls == 1
    assert chosen[0].id == "ev-0042"  # missed by its search, found as a native match


def test_without_rerank_the_native_order_is_kept() -> None:
    index = _index(_unit(20, seed=4))
    native = _Native({"ev-0002": 0.4, "ev-0009": 0.8, "ev-0001": 0.8})
    chosen = _select(native, index, _unit(1, seed=5)[0], rerank=False, exclude=frozenset({"ev-0001"}))
    assert [(a.id, a.score, a.reason) for a in chosen] == [
        ("ev-0009", 0.8, "native"),
        ("ev-0002", 0.4, "native"),
    ]


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 80),
    seed=st.integers(0, 10_000),
    duplicates=st.integers(0, 6),
    k=st.integers(1, 8),
    sigma=st.sampled_from([-1.0, 0.0, 0.2]),
    excluded=st.integers(0, 2),
    native_share=st.floats(0.0, 1.0),
)
def test_select_equals_the_full_rerank(
    rows: int, seed: int, duplicates: int, k: int, sigma: float, excluded: int, native_share: float
) -> None:
    rng = np.random.default_rng(seed)
    matrix = _unit(rows, seed)
    for _ in range(duplicates):  # equal vectors make ties
        matrix[rng.integers(rows)] = matrix[rng.integers(rows)]
    index = _index(matrix)
    ids = [f"ev-{i:04d}" for i in range(rows)]
    native = {i: float(rng.choice([0.3, 0.6, 0.9])) for i in ids if rng.random() < native_share}
    query = matrix[rng.integers(rows)] if rng.random() < 0.5 else _unit(1, seed + 1)[0]
    exclude = frozenset(rng.choice(ids, size=min(excluded, rows), replace=False).tolist())
    chosen = _select(_Native(native), index, query, k=k, sigma=sigma, exclude=exclude)
    assert chosen == _full_rerank(native, index, query, k, sigma, exclude)
