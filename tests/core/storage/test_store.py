"""The KB on disk: round trip, atomic generations, clear errors for missing or corrupt files."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from gravity_core.build.merge import apply_update
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import AnchorStoreError, ConfigurationError, StorageAccessError
from gravity_core.schema import (
    AnchorKind,
    AnchorUpdate,
    AttributeObservation,
    EntityObservation,
    EntityType,
    EventObservation,
    KnowledgeBase,
    TopicObservation,
    Utterance,
)
from gravity_core.storage.anchor_vectors import AnchorVectors
from gravity_core.storage.store import MANIFEST, AnchorStore
from tests.reliability._os_fakes import disk_full

EMBEDDER = HashingEmbedder(dim=64)


def _kb(extra: str = "") -> KnowledgeBase:
    kb = KnowledgeBase()
    u = Utterance(
        id="u1",
        speaker="Maya",
        text=f"I work at Northwind {extra}",
        session="s1",
        timestamp=datetime(2024, 3, 1, 9, tzinfo=UTC),
        attachments=["photo: a dog"],
    )
    update = AnchorUpdate(
        entities=[
            EntityObservation(
                name="Maya",
                type=EntityType.PERSON,
                is_speaker=True,
                sources=["u1"],
                attributes=[
                    AttributeObservation(name="employer", value="Northwind", exclusive=True, sources=["u1"])
                ],
            )
        ],
        events=[EventObservation(who=["Maya"], what=f"started at Northwind {extra}", sources=["u1"])],
        topics=[TopicObservation(label="work", session="s1", summary="new job", sources=["u1"])],
    )
    apply_update(kb, update, [u])
    return kb


def _saved(tmp_path: Path, kb: KnowledgeBase) -> tuple[AnchorStore, AnchorVectors]:
    vectors = AnchorVectors()
    vectors.refresh(kb, EMBEDDER)
    store = AnchorStore(tmp_path / "kb")
    store.save(kb, vectors)
    return store, vectors


def test_round_trip_keeps_kb_and_vectors(tmp_path: Path) -> None:
    kb = _kb()
    store, vectors = _saved(tmp_path, kb)
    loaded = store.load()
    assert loaded.kb == kb
    assert loaded.kb.to_dict() == KnowledgeBase.from_dict(kb.to_dict()).to_dict()
    for kind in AnchorKind:
        assert loaded.vectors.get(kind).ids == vectors.get(kind).ids
        np.testing.assert_array_equal(loaded.vectors.get(kind).matrix, vectors.get(kind).matrix)
    assert loaded.vectors.embedder == EMBEDDER.name


def test_files_are_plain_json(tmp_path: Path) -> None:
    store, _ = _saved(tmp_path, _kb())
    manifest = json.loads((store.directory / MANIFEST).read_text())
    folder = store.directory / f"g{manifest['generation']:06d}"
    entities = json.loads((folder / "entities.json").read_text())
    assert entities["maya"]["attributes"][0]["sources"] == ["u1"]
    assert manifest["counts"] == {"utterances": 1, "entities": 1, "events": 1, "topics": 1, "summaries": 0}


def test_each_part_file_holds_what_to_dict_holds_and_the_checksums_name_its_bytes(tmp_path: Path) -> None:
    # Text JSON escapes differently (quotes, backslashes, controls, U+2028, astral) must survive.
    store, _ = _saved(tmp_path, _kb(extra='"q" \\ \x01 \u2028 \U0001f600 é'))
    folder = store.directory / f"g{store.current_generation():06d}"
    dumped = store.load().kb.to_dict()
    for part, value in dumped.items():
        if part == "schema_version":
            continue
        assert json.loads((folder / f"{part}.json").read_text(encoding="utf-8")) == value
    listed = json.loads((folder / "checksums.json").read_text())["files"]
    on_disk = sorted(p.name for p in folder.iterdir() if p.is_file())
    assert sorted([*listed, "checksums.json"]) == on_disk  # the marker (a dot file) is listed too
    for name, digest in listed.items():
        assert hashlib.blake2b((folder / name).read_bytes(), digest_size=16).hexdigest() == digest


def test_crash_while_saving_keeps_previous_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = _saved(tmp_path, _kb())
    before = store.load().kb
    newer = _kb("and more")
    vectors = AnchorVectors()
    vectors.refresh(newer, EMBEDDER)

    disk_full(monkeypatch, store.directory, only=lambda path: path.endswith(".npy"))
    with pytest.raises(StorageAccessError, match="No space left on device"):
        store.save(newer, vectors)
    monkeypatch.undo()
    assert store.load().kb == before
    assert not [p for p in store.directory.iterdir() if p.name.startswith(".g")]


def test_old_generations_are_pruned_but_previous_kept(tmp_path: Path) -> None:
    store, vectors = _saved(tmp_path, _kb())
    for _ in range(3):
        store.save(_kb(), vectors)
    assert sorted(p.name for p in store.directory.glob("g*")) == ["g000003", "g000004"]
    assert store.load().generation == 4


def test_missing_kb_names_the_manifest(tmp_path: Path) -> None:
    with pytest.raises(AnchorStoreError, match=r"manifest\.json.*no GRAVITY KB"):
        AnchorStore(tmp_path).load()


@pytest.mark.parametrize("victim", ["entities.json", "vectors.json"])
def test_corrupt_file_error_names_the_file(tmp_path: Path, victim: str) -> None:
    store, _ = _saved(tmp_path, _kb())
    target = store.directory / "g000001" / victim
    target.write_text(target.read_text()[:40])
    with pytest.raises(AnchorStoreError, match=rf"g000001/{victim}: corrupt JSON"):
        store.load()


def test_invalid_content_names_the_field(tmp_path: Path) -> None:
    store, _ = _saved(tmp_path, _kb())
    path = store.directory / "g000001" / "entities.json"
    data = json.loads(path.read_text())
    data["maya"]["attributes"][0]["confidence"] = 7
    path.write_text(json.dumps(data))
    with pytest.raises(AnchorStoreError, match=r"entities\.maya\.attributes\.0\.confidence"):
        store.load()


def test_truncated_vectors_are_reported(tmp_path: Path) -> None:
    store, _ = _saved(tmp_path, _kb())
    path = store.directory / "g000001" / "vectors-entity.npy"
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(AnchorStoreError, match="vectors-entity.npy"):
        store.load()


def test_other_schema_version_is_refused(tmp_path: Path) -> None:
    store, _ = _saved(tmp_path, _kb())
    manifest = json.loads((store.directory / MANIFEST).read_text())
    manifest["schema_version"] = 99
    (store.directory / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(AnchorStoreError, match="schema version 99"):
        store.load()


def test_vectors_refresh_embeds_only_changed_anchors() -> None:
    kb = _kb()
    vectors = AnchorVectors()
    anchors = tuple(kind.value for kind in AnchorKind)
    assert vectors.refresh(kb, EMBEDDER, anchors) == 3
    assert vectors.refresh(kb, EMBEDDER, anchors) == 0
    kb.entities["maya"].aliases.append("May")
    assert vectors.refresh(kb, EMBEDDER, anchors) == 1


def test_vectors_refuse_another_embedder() -> None:
    kb = _kb()
    vectors = AnchorVectors()
    vectors.refresh(kb, EMBEDDER)
    with pytest.raises(ConfigurationError, match="hashing-64"):
        vectors.refresh(kb, HashingEmbedder(dim=32))


def test_vectors_load_without_copies_and_only_the_kinds_asked_for(tmp_path: Path) -> None:
    kb = _kb()
    vectors = AnchorVectors()
    vectors.refresh(kb, EMBEDDER)
    store = AnchorStore(tmp_path)
    store.save(kb, vectors)

    loaded = store.load().vectors
    entity = loaded.get(AnchorKind.ENTITY.value)
    assert np.array_equal(entity.matrix, vectors.get(AnchorKind.ENTITY.value).matrix)
    assert not entity.matrix.flags.writeable  # a view of the file's bytes, not a copy

    only = store.load(vector_kinds=[AnchorKind.EVENT.value]).vectors
    assert set(only.kinds) == {AnchorKind.EVENT.value}


def test_an_object_array_in_a_vector_file_is_refused(tmp_path: Path) -> None:
    kb = _kb()
    vectors = AnchorVectors()
    vectors.refresh(kb, EMBEDDER)
    store = AnchorStore(tmp_path)
    store.save(kb, vectors)
    [path] = tmp_path.glob("g*/vectors-entity.npy")
    with open(path, "wb") as handle:
        np.save(handle, np.array([{"x": 1}], dtype=object), allow_pickle=True)

    with pytest.raises(AnchorStoreError, match="vectors-entity.npy"):
        store.load()
