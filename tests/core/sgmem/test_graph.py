"""The sentence graph: the kNN rule (k, gamma, other turns only), incremental add == full build, expansion."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from gravity_core.embeddings import HashingEmbedder
from gravity_core.embeddings.base import Matrix
from gravity_core.errors import AnchorStoreError, ConfigurationError
from gravity_core.schema import Utterance
from gravity_core.sgmem import GraphConfig, RetrievalConfig, SentenceGraph, SGMem
from tests.core.sgmem.conftest import conversation


def brute_force_lists(vectors: np.ndarray, groups: np.ndarray, k: int, gamma: float) -> list[list[int]]:
    """The edge rule written out plainly: top-k other-turn sentences with cosine >= gamma."""
    sims = vectors.astype(np.float64) @ vectors.astype(np.float64).T
    out = []
    for i in range(len(vectors)):
        candidates = [
            (float(np.float32(sims[i, j])), j)
            for j in range(len(vectors))
            if groups[j] != groups[i] and np.float32(sims[i, j]) >= np.float32(gamma)
        ]
        candidates.sort(key=lambda c: (-c[0], c[1]))
        out.append([j for _, j in candidates[:k]])
    return out


@pytest.mark.parametrize(("k", "gamma"), [(5, 0.5), (2, 0.2), (8, -1.0)])
def test_edges_respect_k_gamma_and_turns(
    hashing: HashingEmbedder, sample: list[Utterance], k: int, gamma: float
) -> None:
    memory = SGMem(hashing, graph=GraphConfig(k=k, gamma=gamma))
    memory.add(sample)
    state = memory.state
    graph = state.sentence_graph
    groups = np.array([s.turn for s in state.units.sentences])
    expected = brute_force_lists(state.vectors["sentence"], groups, k, gamma)
    sims = state.vectors["sentence"] @ state.vectors["sentence"].T
    assert graph.n == len(state.units.sentences)
    for i in range(graph.n):
        edges = graph.out_edges(i)
        assert [j for j, _ in edges] == expected[i]
        assert len(edges) <= k
        for j, w in edges:
            assert groups[j] != groups[i]
            assert w >= gamma
            assert w == pytest.approx(float(sims[i, j]), abs=1e-5)
    if gamma <= -1.0:  # no threshold: every sentence with k other-turn sentences has exactly k edges
        assert all(
            len(graph.out_edges(i)) == min(k, int((groups != groups[i]).sum())) for i in range(graph.n)
        )


def test_incremental_add_equals_full_build(hashing: HashingEmbedder, sample: list[Utterance]) -> None:
    full = SGMem(hashing)
    full.add(sample)
    parts = SGMem(hashing)
    # Session by session, with session 3 cut in two so a round continues across adds.
    cuts = [0, 16, 31, 40, 55, 96]
    reports = [parts.add(sample[a:b]) for a, b in zip(cuts, cuts[1:], strict=False)]
    assert sum(r.added for r in reports) == len(sample)
    assert parts.units.to_json() == full.units.to_json()
    assert parts.state.sentence_graph.edges() == full.state.sentence_graph.edges()
    np.testing.assert_array_equal(parts.state.sentence_graph.neighbours, full.state.sentence_graph.neighbours)
    np.testing.assert_array_equal(parts.state.sentence_graph.weights, full.state.sentence_graph.weights)
    for kind in ("sentence", "turn", "round", "session"):
        np.testing.assert_allclose(parts.state.vectors[kind], full.state.vectors[kind], atol=1e-6)
    # Old sentences did gain edges to sentences added later.
    first_batch = len(
        [s for s in full.units.sentences if full.units.turns[s.turn].id in {u.id for u in sample[:16]}]
    )
    late = {(i, j) for i, j in full.state.sentence_graph.edges() if i < first_batch <= j}
    assert late


def test_adding_the_same_utterances_again_changes_nothing(
    hashing: HashingEmbedder, sample: list[Utterance]
) -> None:
    memory = SGMem(hashing)
    memory.add(sample[:30])
    before = memory.state.sentence_graph.edges()
    report = memory.add(sample[:30])
    assert report.added == 0 and report.skipped == 30
    assert memory.state.sentence_graph.edges() == before


def test_failed_embedding_leaves_the_index_as_it_was(
    hashing: HashingEmbedder, sample: list[Utterance]
) -> None:
    class Failing:
        name, dim = hashing.name, hashing.dim
        fail = False

        def embed(self, texts: Sequence[str]) -> Matrix:
            if self.fail:
                raise RuntimeError("embedding service down")
            return hashing.embed(texts)

    embedder = Failing()
    memory = SGMem(embedder)
    memory.add(sample[:20])
    before = memory.units.to_json()
    embedder.fail = True
    with pytest.raises(RuntimeError):
        memory.add(sample[20:40])
    assert memory.units.to_json() == before
    assert memory.state.sentence_graph.n == len(memory.units.sentences)
    embedder.fail = False
    memory.add(sample[20:])
    reference = SGMem(hashing)
    reference.add(sample)
    assert memory.units.to_json() == reference.units.to_json()
    assert memory.state.sentence_graph.edges() == reference.state.sentence_graph.edges()


def bridge_corpus() -> list[Utterance]:
    """A sentence about the cliff trail shares no word with the question, only with a seed."""
    return conversation(
        [
            ("t1", "Ann", "The blue lighthouse stands on the northern cliff."),
            ("t2", "Ben", "Lovely."),
            ("t3", "Ann", "My blue car needs new tyres."),
            ("t4", "Ben", "Bakeries open early on Sundays."),
            ("t5", "Ann", "The northern cliff trail is closed in winter."),
            ("t6", "Ben", "Cats sleep most of the day."),
        ]
    )


def test_graph_expansion_finds_a_sentence_plain_vector_search_misses() -> None:
    memory = SGMem(HashingEmbedder(), graph=GraphConfig(k=1, gamma=0.3, speaker_prefix=False))
    memory.add(bridge_corpus())
    # The lighthouse sentence and the trail sentence share "northern cliff": they are linked.
    assert memory.state.sentence_graph.out_edges(4)[0][0] == 0
    question = "Where is the blue lighthouse?"
    cfg = RetrievalConfig(top_sentences=1, max_chunks=2, token_budget=None)
    plain = memory.retrieve(question, config=cfg, hops=0)
    graph = memory.retrieve(question, config=cfg, hops=1)
    assert plain.chunks[0].id == graph.chunks[0].id == "t1"
    # Plain search ranks the other "blue" sentence second; the trail is reached only over the graph.
    assert [c.id for c in plain.chunks] == ["t1", "t3"]
    assert [c.id for c in graph.chunks] == ["t1", "t5"]
    assert graph.chunks[1].sentence_ids == ("t5#1",)
    own = float(memory.state.vectors["sentence"][4] @ memory.embed_queries([question])[0])
    third = float(memory.state.vectors["sentence"][2] @ memory.embed_queries([question])[0])
    assert own < third  # on its own similarity the trail sentence loses to the car sentence


def test_expansion_decays_per_hop_and_respects_max_per_hop() -> None:
    vectors = np.eye(4, dtype=np.float32)
    vectors[1] = [0.8, 0.6, 0, 0]
    vectors[2] = [0, 0.6, 0.8, 0]
    vectors[3] = [0, 0, 0.6, 0.8]
    graph = SentenceGraph(k=2, gamma=0.1)  # a chain: 0 - 1 - 2 - 3
    graph.extend(vectors, np.arange(4))
    assert graph.edges() == {(0, 1), (1, 0), (1, 2), (2, 3), (2, 1), (3, 2)}
    reached = graph.expand({0: 1.0}, hops=3, decay=0.5, max_per_hop=5)
    assert [reached[i][1] for i in range(4)] == [0, 1, 2, 3]
    assert reached[1][0] == pytest.approx(1.0 * 0.8 * 0.5)
    assert reached[2][0] == pytest.approx(reached[1][0] * 0.36 * 0.5)
    assert reached[3][0] < reached[2][0]
    assert set(graph.expand({0: 1.0}, hops=0, decay=0.5, max_per_hop=5)) == {0}
    wide = SentenceGraph(k=3, gamma=-1.0)
    wide.extend(np.eye(5, dtype=np.float32) + 0.1, np.arange(5))
    assert len(wide.expand({0: 1.0}, hops=1, decay=1.0, max_per_hop=2)) == 3


def test_graph_arrays_are_checked() -> None:
    with pytest.raises(ConfigurationError):
        SentenceGraph(k=0, gamma=0.5)
    with pytest.raises(AnchorStoreError, match="shapes"):
        SentenceGraph(2, 0.5, np.zeros((3, 2), np.int32), np.zeros((3, 3), np.float32))
    with pytest.raises(AnchorStoreError, match="out of range"):
        SentenceGraph(1, 0.5, np.array([[5]], np.int32), np.zeros((1, 1), np.float32))


def test_graph_settings_cannot_change_on_an_existing_index(sample_memory: SGMem) -> None:
    with pytest.raises(ConfigurationError, match="cannot change"):
        SGMem(sample_memory.embedder, graph=GraphConfig(k=9), state=sample_memory.state)
