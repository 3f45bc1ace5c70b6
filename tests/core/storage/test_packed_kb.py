"""A KB held packed for queries: the same records and answers as the loaded KB, clear errors, less memory."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from gravity_core.build.builder import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import AnchorStoreError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import NumpyAnchorIndex
from gravity_core.schema import EventAnchor, KnowledgeBase, Utterance
from gravity_core.storage.anchor_vectors import ANCHOR_KINDS, EXPANSION_KIND
from gravity_core.storage.files import map_npy, read_npy_file
from gravity_core.storage.packed_kb import InvalidRecord, PackedRecords, json_members, to_knowledge_base
from gravity_core.storage.store import AnchorStore

SAMPLE = Path(__file__).parents[3] / "examples" / "gold" / "long_conversation.jsonl"
QUESTIONS = ["When did she start the new job?", "Who is her sister?", "What happened last week?"]


@pytest.fixture(scope="module")
def hashing() -> HashingEmbedder:
    return HashingEmbedder(dim=64)


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, hashing: HashingEmbedder
) -> tuple[AnchorStore, AnchorBuilder]:
    store = AnchorStore(tmp_path_factory.mktemp("packed") / "kb")
    builder = AnchorBuilder(OfflineExtractor(hashing), hashing, store=store)
    builder.add(load_conversation(SAMPLE)[:80])
    return store, builder


def test_json_members_split_an_object_without_parsing_it_whole() -> None:
    expected = {"a": {"x": '}, "b": {'}, "é-ü": [1, {"y": "ünïcode ✓"}], "c": None}
    compact = json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    spaced = json.dumps(expected, ensure_ascii=False, indent=2).encode("utf-8")
    for raw in (compact, b" \n" + spaced + b"\n"):
        members = list(json_members(raw))
        assert [key for key, _ in members] == ["a", "é-ü", "c"]
        assert {key: json.loads(value) for key, value in members} == expected
    ascii_only = json.dumps(expected).encode("ascii")  # "\u00e9-\u00fc" written escaped
    assert [key for key, _ in json_members(ascii_only)] == ["a", "é-ü", "c"]
    assert list(json_members(b"{ }")) == []
    for bad in (b"[1, 2]", b'{"a" 1}', b'{"a": 1 "b": 2}', b'{"a": 1', b"", b'{"a": 1} x', b"{} {}"):
        with pytest.raises(ValueError):
            list(json_members(bad))


def test_packed_records_read_like_the_dict_they_came_from(built: tuple[AnchorStore, AnchorBuilder]) -> None:
    events = built[1].kb.events
    packed = PackedRecords(EventAnchor, ((k, v.model_dump_json().encode()) for k, v in events.items()))
    assert list(packed) == list(events) and len(packed) == len(events) > 32  # more than one chunk
    assert all(packed[key] == events[key] for key in reversed(list(events)))
    assert list(packed.values()) == list(events.values())
    assert dict(packed.items()) == events
    assert "no-such-event" not in packed and packed.get("no-such-event") is None
    lazy = PackedRecords(
        EventAnchor, ((k, v.model_dump_json().encode()) for k, v in events.items()), indexed=False
    )
    assert list(lazy) == list(events) and lazy[next(iter(events))] == next(iter(events.values()))


@pytest.mark.parametrize("indexed", [True, False])
def test_many_records_past_the_shared_dictionary_read_back_exactly(indexed: bool) -> None:
    turns = {
        f"D{n // 20}:{n}": Utterance.model_validate(
            {
                "id": f"D{n // 20}:{n}",
                "speaker": ("Maya", "Jonas")[n % 2],
                "text": f"turn {n}: " + "ünïcode and plenty of words " * (n % 7),
                "session": f"session_{n // 20}",
                "timestamp": f"2024-03-{1 + n // 100:02d}T09:{n % 60:02d}:00Z",
            }
        )
        for n in range(700)  # about 90 KB of JSON: past the 32 KB dictionary
    }
    packed = PackedRecords(
        Utterance, ((k, u.model_dump_json().encode()) for k, u in turns.items()), indexed=indexed
    )
    assert list(packed) == list(turns) and list(packed.values()) == list(turns.values())
    assert all(packed[key] == turns[key] for key in list(turns)[::-37])
    assert packed.packed_bytes() < sum(len(u.model_dump_json()) for u in turns.values()) / 2


def test_a_record_that_breaks_its_model_is_named() -> None:
    good = Utterance.model_validate(
        {"id": "u1", "speaker": "Maya", "text": "hi", "session": "s1", "timestamp": "2024-03-01T09:00:00Z"}
    )
    bad = good.model_dump(mode="json") | {"timestamp": "not a date"}
    with pytest.raises(InvalidRecord, match=r"^u2\.timestamp: "):
        PackedRecords(Utterance, [("u1", good.model_dump_json().encode()), ("u2", json.dumps(bad).encode())])


def test_load_packed_holds_the_same_kb_and_vectors(built: tuple[AnchorStore, AnchorBuilder]) -> None:
    store, _ = built
    full = store.load(vector_kinds=ANCHOR_KINDS)
    packed = store.load_packed(vector_kinds=ANCHOR_KINDS, mapped_kinds=(EXPANSION_KIND,), half_from=30)
    assert to_knowledge_base(packed.kb) == full.kb
    assert packed.kb.packed_bytes() < len(full.kb.model_dump_json())
    for kind in ANCHOR_KINDS:
        mine, theirs = packed.vectors.get(kind), full.vectors.get(kind)
        assert mine.ids == theirs.ids
        half = kind != EXPANSION_KIND and len(theirs.ids) >= 30
        assert mine.matrix.dtype == (np.float16 if half else np.float32)
        np.testing.assert_allclose(mine.matrix, theirs.matrix, atol=1e-3 if half else 0)
    assert isinstance(packed.vectors.get(EXPANSION_KIND).matrix, np.memmap)
    assert packed.vectors.get("event").matrix.dtype == np.float16  # the threshold was reached
    for kind in ANCHOR_KINDS:
        kept = full.vectors.get(kind).digests if kind != EXPANSION_KIND else []
        assert packed.vectors.get(kind).digests == kept
    bare = store.load_packed(vector_kinds=ANCHOR_KINDS, mapped_kinds=(EXPANSION_KIND,), digests=False)
    assert all(bare.vectors.get(kind).digests == [] for kind in ANCHOR_KINDS)
    assert all(bare.vectors.get(kind).ids == full.vectors.get(kind).ids for kind in ANCHOR_KINDS)


def test_an_engine_over_the_folder_answers_as_one_over_the_loaded_kb(
    built: tuple[AnchorStore, AnchorBuilder], hashing: HashingEmbedder
) -> None:
    store, _ = built
    loaded = store.load(vector_kinds=ANCHOR_KINDS)
    plain = GravityEngine(
        loaded.kb,
        NumpyAnchorIndex.from_vectors(loaded.vectors),
        hashing,
        expansion_vectors=loaded.vectors.get(EXPANSION_KIND),
    )
    folder = GravityEngine.from_dir(store.directory, embedder=hashing, follow=False)
    assert not isinstance(folder.records, KnowledgeBase)
    for question in QUESTIONS:
        assert folder.query(question) == plain.query(question)
    assert folder.kb == loaded.kb


def test_packed_loads_name_the_file_and_record_at_fault(
    tmp_path: Path, built: tuple[AnchorStore, AnchorBuilder]
) -> None:
    _, builder = built
    store = AnchorStore(tmp_path / "kb")
    store.save(builder.kb, builder.vectors)
    events = store.directory / "g000001" / "events.json"
    data = json.loads(events.read_text(encoding="utf-8"))
    first = next(iter(data))
    data[first]["said_at"] = "yesterday"
    events.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(
        AnchorStoreError, match=rf"events\.json: invalid KB content: events\.{first}\.said_at"
    ):
        store.load_packed(vector_kinds=ANCHOR_KINDS)
    events.write_text("{not json", encoding="utf-8")
    with pytest.raises(AnchorStoreError, match=r"events\.json: corrupt JSON"):
        store.load_packed(vector_kinds=ANCHOR_KINDS)


@pytest.mark.parametrize("how", ["mapped", "half"])
def test_a_damaged_vector_file_read_in_blocks_or_mapped_is_caught(
    tmp_path: Path, built: tuple[AnchorStore, AnchorBuilder], how: str
) -> None:
    _, builder = built
    store = AnchorStore(tmp_path / "kb")
    store.save(builder.kb, builder.vectors)
    kind = EXPANSION_KIND if how == "mapped" else "event"
    path = store.directory / "g000001" / f"vectors-{kind}.npy"
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0xFF  # same length, one byte of a vector changed
    path.write_bytes(bytes(raw))
    with pytest.raises(AnchorStoreError, match=rf"vectors-{kind}\.npy: corrupt"):
        store.load_packed(vector_kinds=ANCHOR_KINDS, mapped_kinds=(EXPANSION_KIND,), half_from=1)


def test_npy_files_map_and_convert_in_blocks(tmp_path: Path) -> None:
    matrix = np.random.default_rng(0).standard_normal((1000, 24)).astype(np.float32)
    path = tmp_path / "m.npy"
    np.save(path, matrix)
    half, digest = read_npy_file(path, np.float16, block_bytes=1000)  # many blocks, one row split
    np.testing.assert_array_equal(half, matrix.astype(np.float16))
    assert digest == hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    np.testing.assert_array_equal(map_npy(path), matrix)
    np.save(path, np.zeros((0, 24), dtype=np.float32))
    assert map_npy(path).shape == (0, 24)
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(ValueError):
        read_npy_file(path, np.float16)
