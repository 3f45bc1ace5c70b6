"""Large anchor kinds take candidates from an inverted file (faiss), then are ordered exactly."""

from __future__ import annotations

import multiprocessing
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from gravity_core.query.index import NumpyAnchorIndex
from gravity_core.query.index.ivf import IVFSearch, IVFSettings
from gravity_core.schema import AnchorKind
from gravity_core.storage.anchor_vectors import AnchorVectors, KindVectors
from gravity_core.storage.files import NpyRows

pytest.importorskip("faiss", reason="the 'ann' extra (installed by make test) provides faiss")

DIM = 48
SMALL = IVFSettings(min_rows=1_000)


def _clustered(rows: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((64, DIM)).astype(np.float32)
    matrix = centres[rng.integers(0, 64, rows)] + 0.5 * rng.standard_normal((rows, DIM)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def _vectors(matrix: np.ndarray) -> AnchorVectors:
    ids = [f"ev-{i:06d}" for i in range(len(matrix))]
    vectors = AnchorVectors(embedder="test", dim=DIM)
    vectors.kinds[AnchorKind.EVENT.value] = KindVectors(ids=ids, digests=[""] * len(ids), matrix=matrix)
    return vectors


def _kinds(rows: dict[AnchorKind, int]) -> AnchorVectors:
    """Clustered vectors of several kinds, each drawn with its own seed."""
    vectors = AnchorVectors(embedder="test", dim=DIM)
    for seed, (kind, count) in enumerate(rows.items(), start=3):
        ids = [f"{kind.value}-{i:05d}" for i in range(count)]
        vectors.kinds[kind.value] = KindVectors(ids=ids, digests=[""] * count, matrix=_clustered(count, seed))
    return vectors


def _queries(matrix: np.ndarray, count: int = 40) -> np.ndarray:
    rng = np.random.default_rng(1)
    picked = matrix[rng.choice(len(matrix), count, replace=False)]
    noisy = picked + 0.2 * rng.standard_normal(picked.shape).astype(np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def test_candidates_come_from_the_inverted_file_and_agree_with_exact_search() -> None:
    matrix = _clustered(6_000)
    approximate = NumpyAnchorIndex.from_vectors(_vectors(matrix), approximate=SMALL)
    exact = NumpyAnchorIndex.from_vectors(_vectors(matrix), approximate=None)
    overlap, same_best = [], []
    for query in _queries(matrix):
        fast = approximate.top(AnchorKind.EVENT, query, 20)
        slow = exact.top(AnchorKind.EVENT, query, 20)
        assert [s for _, s in fast] == sorted((s for _, s in fast), reverse=True)
        exact_scores = exact.similarities(AnchorKind.EVENT, query, [i for i, _ in fast])
        assert all(abs(exact_scores[i] - s) < 1e-5 for i, s in fast)  # scores are exact cosines
        same_best.append(fast[0] == slow[0])
        overlap.append(len({i for i, _ in fast} & {i for i, _ in slow}) / 20)
    # Approximate: a row in a cluster the query did not read is missed, rarely.
    assert np.mean(overlap) >= 0.95 and np.mean(same_best) >= 0.95


def test_a_few_anchors_asked_for_are_chosen_from_at_least_min_candidates() -> None:
    matrix = _clustered(3_000)
    search = IVFSearch.build(matrix, SMALL)
    assert search is not None
    assert len(search.candidates(matrix[0], 3)) == SMALL.min_candidates  # not pool * 3
    assert len(search.candidates(matrix[0], 80)) == SMALL.pool * 80
    # the best few by exact order, taken from those candidates, are the exact search's best few
    approximate = NumpyAnchorIndex.from_vectors(_vectors(matrix), approximate=SMALL)
    exact = NumpyAnchorIndex.from_vectors(_vectors(matrix), approximate=None)
    same = [
        approximate.top(AnchorKind.EVENT, q, 3) == exact.top(AnchorKind.EVENT, q, 3) for q in _queries(matrix)
    ]
    assert np.mean(same) >= 0.95


def test_a_row_is_its_own_nearest_neighbour_and_builds_are_deterministic() -> None:
    matrix = _clustered(3_000)
    first = IVFSearch.build(matrix, SMALL)
    second = IVFSearch.build(matrix, SMALL)
    assert first is not None and second is not None
    for row in (0, 17, 2_999):
        found = first.candidates(matrix[row], 5)
        assert row in found.tolist()
        assert found.tolist() == second.candidates(matrix[row], 5).tolist()


def test_rows_with_coordinates_beyond_the_trained_range_are_still_found() -> None:
    # A sample of 5 rows per cluster (about 6% of the rows) sets the codes' scale; the basis
    # vectors' coordinate of 1 lies far beyond it in every row the sample missed. Such a coordinate
    # is clipped to the largest code, not wrapped around to a negative one.
    matrix = _clustered(6_000)
    spikes = list(range(0, 6_000, 600))
    for dim, row in enumerate(spikes):
        matrix[row] = np.eye(DIM, dtype=np.float32)[dim]
    search = IVFSearch.build(matrix, IVFSettings(min_rows=1_000, train_per_cluster=5))
    assert search is not None
    assert float(np.abs(matrix).max()) == 1.0
    for row in spikes:
        assert row in search.candidates(matrix[row], 5).tolist()


def test_top_each_gives_each_kinds_top_and_searches_the_largest_inverted_file_in_a_helper_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    vectors = _kinds({AnchorKind.ENTITY: 2_000, AnchorKind.EVENT: 6_000, AnchorKind.TOPIC: 500})
    searched_in: list[tuple[int, str]] = []
    candidates = IVFSearch.candidates

    def spied(self: IVFSearch, vector: np.ndarray, limit: int) -> np.ndarray:
        searched_in.append((limit, threading.current_thread().name))
        return candidates(self, vector, limit)

    monkeypatch.setattr(IVFSearch, "candidates", spied)
    limits = {AnchorKind.ENTITY: 5, AnchorKind.EVENT: 7, AnchorKind.TOPIC: 4}
    index = NumpyAnchorIndex.from_vectors(vectors, approximate=SMALL)  # entities and events: inverted files
    for query in _queries(vectors.get(AnchorKind.EVENT).matrix, 10):
        searched_in.clear()
        found = index.top_each(query, limits)
        threads = dict(searched_in)  # limit -> the thread that searched that kind's inverted file
        assert len(searched_in) == 2
        assert threads[7].startswith("gravity-index")  # the events, the largest
        assert threads[5] == threading.current_thread().name  # the entities, meanwhile
        assert list(found) == list(limits)
        assert found == {kind: index.top(kind, query, limit) for kind, limit in limits.items()}
    # One inverted file: nothing to search meanwhile, every kind in the calling thread.
    searched_in.clear()
    index.top_each(
        _queries(vectors.get(AnchorKind.EVENT).matrix, 1)[0], {AnchorKind.EVENT: 7, AnchorKind.TOPIC: 4}
    )
    assert searched_in == [(7, threading.current_thread().name)]


def test_small_kinds_and_a_disabled_setting_are_searched_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    matrix = _clustered(2_000)

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("the inverted file was used")

    monkeypatch.setattr(IVFSearch, "candidates", fail)
    for index in (
        NumpyAnchorIndex.from_vectors(_vectors(matrix)),  # default: below 20k rows
        NumpyAnchorIndex.from_vectors(_vectors(matrix), approximate=None),
    ):
        assert len(index.top(AnchorKind.EVENT, matrix[3], 10)) == 10


def test_float16_rows_with_their_float32_file_order_near_ties_exactly(tmp_path: Path) -> None:
    base = _clustered(2_000)
    # Copies 1e-4 apart: their float16 cosines cannot tell them apart, their float32 ones can.
    matrix = np.concatenate([base, base + 1e-4 * np.random.default_rng(3).standard_normal(base.shape)])
    matrix = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)
    path = tmp_path / "vectors-event.npy"
    np.save(path, matrix)
    half = _vectors(matrix.astype(np.float16))
    half.kinds[AnchorKind.EVENT.value].exact_rows = NpyRows(path)
    approximate = NumpyAnchorIndex.from_vectors(half, approximate=SMALL)
    # Without the file the float16 rows are all there is (held as float32 of the same values).
    rough = NumpyAnchorIndex.from_vectors(_vectors(matrix.astype(np.float16)), approximate=SMALL)
    exact = NumpyAnchorIndex.from_vectors(_vectors(matrix), approximate=SMALL)
    queries = _queries(matrix)
    same = [approximate.top(AnchorKind.EVENT, q, 10) == exact.top(AnchorKind.EVENT, q, 10) for q in queries]
    assert all(same)
    # Scored from float16 alone, the copies' order is a coin toss.
    assert not all(
        [a for a, _ in rough.top(AnchorKind.EVENT, q, 10)]
        == [a for a, _ in exact.top(AnchorKind.EVENT, q, 10)]
        for q in queries
    )


def test_float16_similarities_are_exact_where_they_can_reach_the_score_asked(tmp_path: Path) -> None:
    matrix = _clustered(2_000)
    path = tmp_path / "vectors-event.npy"
    np.save(path, matrix)
    half = _vectors(matrix.astype(np.float16))
    half.kinds[AnchorKind.EVENT.value].exact_rows = NpyRows(path)
    index = NumpyAnchorIndex.from_vectors(half, approximate=SMALL)
    query = _queries(matrix, 1)[0]
    ids = [f"ev-{i:06d}" for i in range(0, 2_000, 7)]
    truth = dict(zip(ids, (matrix[::7] @ query).tolist(), strict=True))
    # No score given: every cosine is the float32 one top() would give.
    assert index.similarities(AnchorKind.EVENT, query, ids) == pytest.approx(truth, abs=1e-6)
    floor = sorted(truth.values())[-10]
    got = index.similarities(AnchorKind.EVENT, query, ids, at_least=floor)
    above = [i for i in ids if truth[i] >= floor]
    below = [i for i in ids if truth[i] < floor - 2e-3]
    assert len(above) == 10 and below
    assert all(abs(got[i] - truth[i]) < 1e-6 for i in above)
    assert all(abs(got[i] - truth[i]) < 1e-3 for i in below)
    assert any(abs(got[i] - truth[i]) > 1e-6 for i in below)  # those stayed float16 scores


def _top_each_in_child(index: NumpyAnchorIndex, query: np.ndarray, limits: dict[AnchorKind, int]) -> None:
    os._exit(0 if len(index.top_each(query, limits)) == len(limits) else 1)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="a process forked from one that queried")
def test_a_forked_process_searches_with_helper_threads_of_its_own() -> None:
    vectors = _kinds({AnchorKind.ENTITY: 2_000, AnchorKind.EVENT: 6_000})
    index = NumpyAnchorIndex.from_vectors(vectors, approximate=SMALL)
    query = _queries(vectors.get(AnchorKind.EVENT).matrix, 1)[0]
    limits = {AnchorKind.ENTITY: 3, AnchorKind.EVENT: 3}
    index.top_each(query, limits)  # the parent's helper thread exists now; a child has none of it
    fork = multiprocessing.get_context("fork")
    child = fork.Process(target=_top_each_in_child, args=(index, query, limits))
    child.start()
    child.join(timeout=30)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0  # not None: it did not wait forever for the parent's thread
