"""Persisting an SGMem index: JSON + .npy round trip, generations, damaged folders, embedder checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import AnchorStoreError, ConfigurationError
from gravity_core.schema import Utterance
from gravity_core.sgmem import GraphConfig, SGMem, is_sgmem_dir
from gravity_core.sgmem.persist import MANIFEST
from gravity_core.sgmem.state import VECTOR_KINDS
from gravity_core.testing import RecordedModel
from tests.core.sgmem.test_memories import SESSION_1, SESSION_2

QUESTION = "Where did Maya find a flat?"


def built(hashing: HashingEmbedder, sample: list[Utterance]) -> SGMem:
    model = RecordedModel(
        {
            ("SessionMemories", "--- session session_1 ---"): SESSION_1,
            ("SessionMemories", "--- session session_2 ---"): SESSION_2,
        }
    )
    memory = SGMem(hashing, graph=GraphConfig(k=4, gamma=0.3), memory_model=model)
    memory.add(sample[:31])
    return memory


def test_round_trip_keeps_everything(
    hashing: HashingEmbedder, sample: list[Utterance], tmp_path: Path
) -> None:
    memory = built(hashing, sample)
    folder = tmp_path / "sgmem"
    assert memory.save(folder) == 1
    assert is_sgmem_dir(folder)
    loaded = SGMem.load(folder)  # the embedder is found from its name
    assert loaded.embedder.name == hashing.name
    assert loaded.graph_config == GraphConfig(k=4, gamma=0.3)
    assert loaded.units.to_json() == memory.units.to_json()
    assert [m.to_json() for m in loaded.memories] == [m.to_json() for m in memory.memories]
    assert loaded.state.memory_digests == memory.state.memory_digests
    for kind in VECTOR_KINDS:
        np.testing.assert_array_equal(loaded.state.vectors[kind], memory.state.vectors[kind])
    np.testing.assert_array_equal(
        loaded.state.sentence_graph.neighbours, memory.state.sentence_graph.neighbours
    )
    np.testing.assert_array_equal(loaded.state.sentence_graph.weights, memory.state.sentence_graph.weights)
    for granularity in ("turn", "round", "session"):
        assert (
            loaded.retrieve(QUESTION, granularity=granularity).to_dict()
            == memory.retrieve(QUESTION, granularity=granularity).to_dict()
        )
    files = sorted(p.name for p in (folder / "g000001").iterdir())
    assert (
        "units.json" in files
        and "graph-neighbours.npy" in files
        and not any(f.endswith(".pkl") for f in files)
    )


def test_a_loaded_index_keeps_growing_like_a_fresh_one(
    hashing: HashingEmbedder, sample: list[Utterance], tmp_path: Path
) -> None:
    first = SGMem(hashing)
    first.add(sample[:40])
    first.save(tmp_path / "idx")
    again = SGMem.load(tmp_path / "idx", hashing)
    again.add(sample)
    assert again.save(tmp_path / "idx") == 2
    whole = SGMem(hashing)
    whole.add(sample)
    reloaded = SGMem.load(tmp_path / "idx")
    assert reloaded.units.to_json() == whole.units.to_json()
    assert reloaded.state.sentence_graph.edges() == whole.state.sentence_graph.edges()


def test_old_generations_are_pruned(
    hashing: HashingEmbedder, sample: list[Utterance], tmp_path: Path
) -> None:
    memory = SGMem(hashing)
    memory.add(sample[:10])
    for _ in range(3):
        memory.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["g000002", "g000003"]
    assert json.loads((tmp_path / MANIFEST).read_text())["generation"] == 3


def test_damaged_or_foreign_folders_are_refused(
    hashing: HashingEmbedder, sample: list[Utterance], tmp_path: Path
) -> None:
    with pytest.raises(AnchorStoreError, match="manifest.json missing"):
        SGMem.load(tmp_path / "nothing")
    memory = SGMem(hashing)
    memory.add(sample[:10])
    memory.save(tmp_path / "idx")
    gen = tmp_path / "idx" / "g000001"
    np.save(gen / "vectors-turn.npy", np.zeros((3, hashing.dim), np.float32))
    with pytest.raises(AnchorStoreError, match="vectors-turn.npy"):
        SGMem.load(tmp_path / "idx")
    (gen / "units.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(AnchorStoreError, match="corrupt JSON"):
        SGMem.load(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / MANIFEST).read_text())
    manifest["version"] = 99
    (tmp_path / "idx" / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(AnchorStoreError, match="version"):
        SGMem.load(tmp_path / "idx")
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / MANIFEST).write_text(json.dumps({"schema_version": 1, "generation": 1}))
    assert not is_sgmem_dir(kb)
    with pytest.raises(AnchorStoreError, match="not an SGMem index"):
        SGMem.load(kb)
    with pytest.raises(AnchorStoreError, match="another kind of index"):
        memory.save(kb)


def test_pickled_arrays_are_not_loaded(
    hashing: HashingEmbedder, sample: list[Utterance], tmp_path: Path
) -> None:
    memory = SGMem(hashing)
    memory.add(sample[:10])
    memory.save(tmp_path)
    np.save(tmp_path / "g000001" / "graph-weights.npy", np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(AnchorStoreError, match="graph-weights.npy"):
        SGMem.load(tmp_path)


def test_another_embedder_is_refused(
    hashing: HashingEmbedder, sample: list[Utterance], tmp_path: Path
) -> None:
    memory = SGMem(hashing)
    memory.add(sample[:10])
    memory.save(tmp_path)
    with pytest.raises(ConfigurationError, match="hashing-256"):
        SGMem.load(tmp_path, HashingEmbedder(dim=64))
