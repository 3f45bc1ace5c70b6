"""Anchor index backends: numpy (default) and Chroma (embedded and server) agree, sync, ties, errors."""

from __future__ import annotations

import re
import socket
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gravity_core.build.merge import apply_update
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError, MissingDependencyError, ProviderError
from gravity_core.query.index import AnchorIndex, ChromaAnchorIndex, NumpyAnchorIndex
from gravity_core.query.index.chroma_index import collection_name
from gravity_core.schema import (
    AnchorKind,
    AnchorUpdate,
    AttributeObservation,
    EntityObservation,
    EntityType,
    EventObservation,
    KnowledgeBase,
    RelationObservation,
    TopicObservation,
    Utterance,
)
from gravity_core.storage.anchor_vectors import AnchorVectors, KindVectors
from gravity_core.storage.chroma_clients import ChromaRetry

T0 = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)
EMBEDDER = HashingEmbedder(dim=64)
QUERIES = [
    "Maya's pottery class and the vase she made",
    "when did Leo move to Denver",
    "adopting Biscuit the dog from the shelter",
    "running a marathon in the rain",
    "bakery opening on Main Street",
]
CHROMA_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _utterances() -> list[Utterance]:
    lines = [
        ("Maya", "s1", "I started a pottery class and made a blue vase."),
        ("Leo", "s1", "I moved to Denver last month for the new job."),
        ("Maya", "s1", "We adopted Biscuit, a beagle, from the shelter."),
        ("Leo", "s1", "I opened a bakery on Main Street."),
        ("Maya", "s2", "I ran a marathon in the rain on Sunday."),
        ("Leo", "s2", "The bakery sells sourdough and cinnamon rolls."),
        ("Maya", "s2", "Biscuit chewed my pottery wheel cover."),
        ("Leo", "s2", "Denver winters are cold but sunny."),
    ]
    return [
        Utterance(id=f"u{n}", speaker=who, text=text, session=session, timestamp=T0 + timedelta(days=n))
        for n, (who, session, text) in enumerate(lines, start=1)
    ]


def _update() -> AnchorUpdate:
    def attr(name: str, value: str, source: str) -> AttributeObservation:
        return AttributeObservation(name=name, value=value, sources=[source])

    return AnchorUpdate(
        entities=[
            EntityObservation(
                name="Maya",
                type=EntityType.PERSON,
                is_speaker=True,
                attributes=[attr("hobby", "pottery", "u1"), attr("sport", "marathon running", "u5")],
                relations=[RelationObservation(relation="sister_of", object="Leo", sources=["u2"])],
                sources=["u1", "u3", "u5", "u7"],
            ),
            EntityObservation(
                name="Leo",
                type=EntityType.PERSON,
                is_speaker=True,
                attributes=[attr("lives_in", "Denver", "u2"), attr("owns", "bakery", "u4")],
                sources=["u2", "u4", "u6", "u8"],
            ),
            EntityObservation(
                name="Biscuit", type=EntityType.PET, aliases=["the beagle"], sources=["u3", "u7"]
            ),
            EntityObservation(name="Denver", type=EntityType.PLACE, sources=["u2", "u8"]),
            EntityObservation(name="Main Street Bakery", type=EntityType.ORGANIZATION, sources=["u4", "u6"]),
        ],
        events=[
            EventObservation(
                who=["Maya"], what="started a pottery class and made a blue vase", sources=["u1"]
            ),
            EventObservation(
                who=["Leo"], what="moved to Denver for a new job", where="Denver", sources=["u2"]
            ),
            EventObservation(
                who=["Maya"], what="adopted Biscuit the beagle from the shelter", sources=["u3"]
            ),
            EventObservation(who=["Leo"], what="opened a bakery", where="Main Street", sources=["u4"]),
            EventObservation(who=["Maya"], what="ran a marathon in the rain", sources=["u5"]),
            EventObservation(who=["Biscuit"], what="chewed the pottery wheel cover", sources=["u7"]),
        ],
        topics=[
            TopicObservation(
                label="pottery",
                keywords=["vase", "class", "wheel"],
                session="s1",
                summary="Maya took up pottery.",
                sources=["u1"],
            ),
            TopicObservation(
                label="Leo's move to Denver",
                keywords=["Denver", "job"],
                session="s1",
                summary="Leo moved for work.",
                sources=["u2"],
            ),
            TopicObservation(
                label="the bakery",
                keywords=["sourdough", "cinnamon rolls"],
                session="s2",
                summary="Leo's bakery menu.",
                sources=["u6"],
            ),
            TopicObservation(
                label="running",
                keywords=["marathon", "rain"],
                session="s2",
                summary="A rainy race.",
                sources=["u5"],
            ),
        ],
    )


def _kb_and_vectors() -> tuple[KnowledgeBase, AnchorVectors]:
    kb = KnowledgeBase()
    utterances = _utterances()
    apply_update(kb, _update(), utterances)
    vectors = AnchorVectors()
    vectors.refresh(kb, EMBEDDER)
    return kb, vectors


def _query(text: str, embedder: HashingEmbedder = EMBEDDER) -> np.ndarray:
    vector: np.ndarray = embedder.embed([text])[0]
    return vector


def _unit_rows(rows: int, dim: int, seed: int) -> np.ndarray:
    matrix = np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def _vectors(kinds: dict[AnchorKind, tuple[list[str], np.ndarray]], dim: int) -> AnchorVectors:
    return AnchorVectors(
        embedder=f"test-{dim}",
        dim=dim,
        kinds={
            kind: KindVectors(ids=ids, digests=[f"d-{i}" for i in ids], matrix=matrix)
            for kind, (ids, matrix) in kinds.items()
        },
    )


def _assert_same_results(expected: AnchorIndex, actual: AnchorIndex, kb: KnowledgeBase) -> None:
    for text in QUERIES:
        query = _query(text)
        for kind in AnchorKind:
            want, got = expected.top(kind, query, 4), actual.top(kind, query, 4)
            assert [i for i, _ in got] == [i for i, _ in want], (text, kind)
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)
        ids = [*kb.events, "no-such-event"]
        want_sims = expected.similarities(AnchorKind.EVENT, query, ids)
        got_sims = actual.similarities(AnchorKind.EVENT, query, ids)
        assert set(got_sims) == set(kb.events)
        assert got_sims == pytest.approx(want_sims, abs=1e-5)


@pytest.fixture
def kb_vectors() -> tuple[KnowledgeBase, AnchorVectors]:
    return _kb_and_vectors()


@pytest.fixture
def chroma_path(tmp_path: Path) -> Path:
    pytest.importorskip("chromadb")
    return tmp_path / "chroma"


@pytest.fixture
def write_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Counts Collection.upsert / delete / modify calls (the calls still go through)."""
    from chromadb.api.models.Collection import Collection

    calls = {"upsert": 0, "delete": 0, "modify": 0}
    for name in calls:
        original = getattr(Collection, name)

        def counted(
            self: Any, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any
        ) -> Any:
            calls[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Collection, name, counted)
    yield calls


# ----- numpy backend -------------------------------------------------------------------------------


def test_numpy_top_matches_a_full_sort_best_first() -> None:
    ids = [f"ev-{n:04d}" for n in range(300)]
    matrix = _unit_rows(300, 32, seed=1)
    index = NumpyAnchorIndex.from_vectors(_vectors({AnchorKind.EVENT: (ids, matrix)}, 32))
    query = _unit_rows(1, 32, seed=2)[0]
    scores = matrix @ query
    full = sorted(zip(ids, scores.tolist(), strict=True), key=lambda p: (-p[1], p[0]))
    for limit in (1, 7, 50, 300, 1000):
        got = index.top(AnchorKind.EVENT, query, limit)
        assert [i for i, _ in got] == [i for i, _ in full[:limit]]
        assert [s for _, s in got] == pytest.approx([s for _, s in full[:limit]], abs=1e-6)
    assert index.top(AnchorKind.EVENT, query, 0) == []
    assert index.top(AnchorKind.TOPIC, query, 5) == []


def test_numpy_similarities_skip_unknown_ids_and_match_cosine() -> None:
    ids = ["a", "b", "c"]
    matrix = _unit_rows(3, 8, seed=3)
    index = NumpyAnchorIndex.from_vectors(_vectors({AnchorKind.ENTITY: (ids, matrix)}, 8))
    query = _unit_rows(1, 8, seed=4)[0]
    got = index.similarities(AnchorKind.ENTITY, query, ["c", "zzz", "a", "c"])
    assert list(got) == ["c", "a"]
    assert got["c"] == pytest.approx(float(matrix[2] @ query), abs=1e-6)
    assert got["a"] == pytest.approx(float(matrix[0] @ query), abs=1e-6)
    assert index.similarities(AnchorKind.ENTITY, query, []) == {}
    assert index.similarities(AnchorKind.EVENT, query, ["a"]) == {}


def test_numpy_index_reports_embedder_and_rejects_a_query_of_another_dimension(
    kb_vectors: tuple[KnowledgeBase, AnchorVectors],
) -> None:
    _, vectors = kb_vectors
    index = NumpyAnchorIndex.from_vectors(vectors)
    assert isinstance(index, AnchorIndex)
    assert (index.embedder, index.dim) == ("hashing-64", 64)
    with pytest.raises(ConfigurationError, match="64-dimensional"):
        index.top(AnchorKind.EVENT, np.ones(32, dtype=np.float32) / np.sqrt(32), 3)


def test_numpy_index_rejects_ids_and_matrix_of_different_lengths() -> None:
    vectors = _vectors({AnchorKind.EVENT: (["a", "b"], _unit_rows(3, 4, seed=0))}, 4)
    with pytest.raises(ConfigurationError, match="2 ids"):
        NumpyAnchorIndex.from_vectors(vectors)


# ----- ties ----------------------------------------------------------------------------------------


def _tied_vectors() -> tuple[AnchorVectors, np.ndarray]:
    rows = _unit_rows(4, 16, seed=5)
    ids = ["d", "b", "e", "a", "c", "f"]
    # d, b, a, c share one vector; e and f are different.
    matrix = np.stack([rows[0], rows[0], rows[1], rows[0], rows[0], rows[2]])
    return _vectors({AnchorKind.ENTITY: (ids, matrix)}, 16), rows[0]


def test_numpy_ties_are_broken_by_id_even_at_the_cut() -> None:
    vectors, query = _tied_vectors()
    index = NumpyAnchorIndex.from_vectors(vectors)
    assert [i for i, _ in index.top(AnchorKind.ENTITY, query, 1)] == ["a"]
    assert [i for i, _ in index.top(AnchorKind.ENTITY, query, 3)] == ["a", "b", "c"]
    assert [i for i, _ in index.top(AnchorKind.ENTITY, query, 4)] == ["a", "b", "c", "d"]


def test_chroma_ties_are_broken_by_id_even_at_the_cut(chroma_path: Path) -> None:
    vectors, query = _tied_vectors()
    index = ChromaAnchorIndex.persistent(chroma_path, "ties")
    index.sync(vectors)
    assert [i for i, _ in index.top(AnchorKind.ENTITY, query, 1)] == ["a"]
    assert [i for i, _ in index.top(AnchorKind.ENTITY, query, 3)] == ["a", "b", "c"]
    assert [i for i, _ in index.top(AnchorKind.ENTITY, query, 4)] == ["a", "b", "c", "d"]


# ----- chroma, embedded ------------------------------------------------------------------------------


def test_chroma_embedded_matches_numpy(
    chroma_path: Path, kb_vectors: tuple[KnowledgeBase, AnchorVectors]
) -> None:
    kb, vectors = kb_vectors
    index = ChromaAnchorIndex.persistent(chroma_path, "maya-leo")
    report = index.sync(vectors)
    assert report.upserted == len(kb.entities) + len(kb.events) + len(kb.topics)
    assert isinstance(index, AnchorIndex)
    assert (index.embedder, index.dim) == ("hashing-64", 64)
    _assert_same_results(NumpyAnchorIndex.from_vectors(vectors), index, kb)


def test_chroma_embedded_matches_numpy_on_a_few_hundred_random_anchors(chroma_path: Path) -> None:
    ids = [f"ev-{n:04d}" for n in range(400)]
    vectors = _vectors({AnchorKind.EVENT: (ids, _unit_rows(400, 48, seed=7))}, 48)
    index = ChromaAnchorIndex.persistent(chroma_path, "random")
    assert index.sync(vectors, batch_size=150).upserted == 400
    expected = NumpyAnchorIndex.from_vectors(vectors)
    for seed in range(5):
        query = _unit_rows(1, 48, seed=100 + seed)[0]
        want, got = expected.top(AnchorKind.EVENT, query, 10), index.top(AnchorKind.EVENT, query, 10)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)


def test_chroma_reopened_index_knows_its_embedder_and_serves_queries(
    chroma_path: Path, kb_vectors: tuple[KnowledgeBase, AnchorVectors]
) -> None:
    kb, vectors = kb_vectors
    ChromaAnchorIndex.persistent(chroma_path, "maya-leo").sync(vectors)
    reopened = ChromaAnchorIndex.persistent(chroma_path, "maya-leo")
    assert (reopened.embedder, reopened.dim) == ("hashing-64", 64)
    _assert_same_results(NumpyAnchorIndex.from_vectors(vectors), reopened, kb)


def test_chroma_second_sync_writes_nothing(
    chroma_path: Path, kb_vectors: tuple[KnowledgeBase, AnchorVectors], write_calls: dict[str, int]
) -> None:
    _, vectors = kb_vectors
    index = ChromaAnchorIndex.persistent(chroma_path, "maya-leo")
    index.sync(vectors, batch_size=2)
    assert write_calls["upsert"] == sum(-(-len(vectors.get(k).ids) // 2) for k in AnchorKind)
    counts = {kind: index.count(kind) for kind in AnchorKind}
    assert counts == {kind: len(vectors.get(kind).ids) for kind in AnchorKind}
    before = dict(write_calls)

    report = index.sync(vectors)

    assert report.writes == 0
    assert write_calls == before
    assert {kind: index.count(kind) for kind in AnchorKind} == counts


def test_chroma_sync_compares_row_digests_when_the_kb_digest_is_unknown(
    chroma_path: Path, kb_vectors: tuple[KnowledgeBase, AnchorVectors], write_calls: dict[str, int]
) -> None:
    _, vectors = kb_vectors
    index = ChromaAnchorIndex.persistent(chroma_path, "maya-leo")
    index.sync(vectors)
    client = index._client  # the stored KB digest is wiped, so sync must diff row by row
    for kind in AnchorKind:
        client.get_collection(index.collection_name(kind), embedding_function=None).modify(
            metadata={"gravity_embedder": "hashing-64", "gravity_dim": 64}
        )
    fresh = ChromaAnchorIndex.persistent(chroma_path, "maya-leo")
    upserts = write_calls["upsert"]

    report = fresh.sync(vectors)

    assert report.writes == 0
    assert write_calls["upsert"] == upserts


def test_chroma_sync_upserts_changed_and_deletes_removed_anchors(
    chroma_path: Path, kb_vectors: tuple[KnowledgeBase, AnchorVectors]
) -> None:
    kb, vectors = kb_vectors
    index = ChromaAnchorIndex.persistent(chroma_path, "maya-leo")
    index.sync(vectors)
    removed = "biscuit"
    assert removed in kb.entities
    del kb.entities[removed]
    changed = next(i for i, e in kb.events.items() if "marathon" in e.what)
    kb.events[changed] = kb.events[changed].model_copy(update={"what": "baked sourdough bread at the bakery"})
    assert vectors.refresh(kb, EMBEDDER, [kind.value for kind in AnchorKind]) == 1

    report = index.sync(vectors, purge=False)  # in place; by default a sync after a removal purges

    assert (report.upserted, report.deleted, report.purged) == (1, 1, False)
    assert index.count(AnchorKind.ENTITY) == len(kb.entities)
    query = _query("Biscuit the beagle")
    assert removed not in [i for i, _ in index.top(AnchorKind.ENTITY, query, 10)]
    assert index.similarities(AnchorKind.ENTITY, query, [removed]) == {}
    bread = _query("sourdough bread")
    assert index.top(AnchorKind.EVENT, bread, 1)[0][0] == changed
    _assert_same_results(NumpyAnchorIndex.from_vectors(vectors), index, kb)


def test_chroma_sync_rebuilds_collections_made_by_another_embedder(
    chroma_path: Path, kb_vectors: tuple[KnowledgeBase, AnchorVectors]
) -> None:
    kb, vectors = kb_vectors
    index = ChromaAnchorIndex.persistent(chroma_path, "maya-leo")
    index.sync(vectors)
    other = HashingEmbedder(dim=32)
    wider = AnchorVectors()
    wider.refresh(kb, other)

    report = index.sync(wider)

    assert set(report.recreated) == set(AnchorKind)
    assert (index.embedder, index.dim) == ("hashing-32", 32)
    query = _query(QUERIES[0], other)
    expected = NumpyAnchorIndex.from_vectors(wider).top(AnchorKind.EVENT, query, 3)
    assert [i for i, _ in index.top(AnchorKind.EVENT, query, 3)] == [i for i, _ in expected]


def test_chroma_never_uses_its_own_embedding_function(
    chroma_path: Path, kb_vectors: tuple[KnowledgeBase, AnchorVectors], monkeypatch: pytest.MonkeyPatch
) -> None:
    from chromadb.api.types import DefaultEmbeddingFunction
    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("chroma tried to embed or download a model")

    monkeypatch.setattr(DefaultEmbeddingFunction, "__call__", forbidden)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "__call__", forbidden)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "_download_model_if_not_exists", forbidden)
    kb, vectors = kb_vectors
    index = ChromaAnchorIndex.persistent(chroma_path, "maya-leo")
    index.sync(vectors)
    query = _query(QUERIES[1])
    assert index.top(AnchorKind.EVENT, query, 2)
    assert index.similarities(AnchorKind.EVENT, query, list(kb.events))
    collection = index._client.get_collection(
        index.collection_name(AnchorKind.EVENT), embedding_function=None
    )
    assert collection.configuration_json["embedding_function"] is None
    assert collection.configuration_json["hnsw"]["space"] == "cosine"


def test_chroma_index_before_sync_says_to_sync(chroma_path: Path) -> None:
    index = ChromaAnchorIndex.persistent(chroma_path, "never-synced")
    assert (index.embedder, index.dim) == ("", 0)
    with pytest.raises(ConfigurationError, match=r"sync\(vectors\) first"):
        index.top(AnchorKind.EVENT, np.zeros(0, dtype=np.float32), 3)


def test_chroma_rejects_a_query_of_another_dimension(
    chroma_path: Path, kb_vectors: tuple[KnowledgeBase, AnchorVectors]
) -> None:
    _, vectors = kb_vectors
    index = ChromaAnchorIndex.persistent(chroma_path, "maya-leo")
    index.sync(vectors)
    with pytest.raises(ConfigurationError, match="64-dimensional"):
        index.similarities(AnchorKind.EVENT, np.ones(8, dtype=np.float32), ["ev-000001"])


@pytest.mark.parametrize(
    "kb_name", ["conv-26", "a", "my kb/ü", "x" * 600, "..", "1.2.3.4", "-lead_and_trail-", "a..b"]
)
def test_collection_names_follow_chroma_rules(kb_name: str) -> None:
    names = {collection_name(kb_name, kind) for kind in AnchorKind}
    assert len(names) == 3
    for name in names:
        assert CHROMA_NAME.match(name), name
        assert ".." not in name


def test_collection_names_keep_valid_kb_names_and_separate_sanitized_ones() -> None:
    assert collection_name("conv-26", AnchorKind.EVENT) == "gravity-conv-26-event"
    assert collection_name("my kb", AnchorKind.EVENT) != collection_name("my_kb", AnchorKind.EVENT)
    with pytest.raises(ConfigurationError):
        collection_name("", AnchorKind.EVENT)


@pytest.mark.parametrize("kb_name", ["my kb/ü", "x" * 600, "-a..b-"])
def test_sanitized_collection_names_are_accepted_by_chroma(kb_name: str) -> None:
    chromadb = pytest.importorskip("chromadb")
    from chromadb.config import Settings

    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    index = ChromaAnchorIndex.from_client(client, kb_name)
    vectors, query = _tied_vectors()
    assert index.sync(vectors).upserted == 6
    assert index.top(AnchorKind.ENTITY, query, 1)[0][0] == "a"


def test_missing_chromadb_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "chromadb", None)
    with pytest.raises(MissingDependencyError, match=r"gravity-memory\[chroma\]"):
        ChromaAnchorIndex.persistent(tmp_path, "kb")


@pytest.mark.loopback
def test_unreachable_server_names_its_url() -> None:
    pytest.importorskip("chromadb")
    port = _free_port()
    with pytest.raises(ProviderError, match=re.escape(f"http://127.0.0.1:{port}")):
        ChromaAnchorIndex.server("127.0.0.1", port, "kb", retry=ChromaRetry(attempts=1))


# ----- chroma, server ---------------------------------------------------------------------------------


@pytest.mark.server
def test_chroma_server_matches_numpy_and_syncs_idempotently(
    chroma_server: tuple[str, int], kb_vectors: tuple[KnowledgeBase, AnchorVectors]
) -> None:
    kb, vectors = kb_vectors
    host, port = chroma_server
    index = ChromaAnchorIndex.server(host, port, "server-maya-leo")
    first = index.sync(vectors)
    assert first.upserted == sum(len(vectors.get(k).ids) for k in AnchorKind)
    assert index.sync(vectors).writes == 0
    _assert_same_results(NumpyAnchorIndex.from_vectors(vectors), index, kb)
    reopened = ChromaAnchorIndex.server(host, port, "server-maya-leo")
    assert (reopened.embedder, reopened.dim) == ("hashing-64", 64)


@pytest.mark.server
def test_chroma_server_going_down_gives_provider_error_with_url(
    start_chroma_server: Callable[[], Any], kb_vectors: tuple[KnowledgeBase, AnchorVectors]
) -> None:
    _, vectors = kb_vectors
    server = start_chroma_server()
    index = ChromaAnchorIndex.server(server.host, server.port, "doomed", retry=ChromaRetry(attempts=1))
    index.sync(vectors)
    query = _query(QUERIES[0])
    assert index.top(AnchorKind.EVENT, query, 1)
    server.stop()
    with pytest.raises(ProviderError, match=re.escape(server.url)):
        index.top(AnchorKind.EVENT, query, 1)
    with pytest.raises(ProviderError, match=re.escape(server.url)):
        index.similarities(AnchorKind.EVENT, query, ["ev-000001"])
