"""Delta generations (#18, item 4): a save after an add writes what changed and links the rest.

KBs are built from the sample conversation by the offline extractor with the hashing embedder, so
the build, the store and the engine are the real ones; nothing is faked but the OS refusing a
hard link.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.build.forget import ForgetRequest
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import AnchorStoreError, ConfigurationError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.engine import GravityEngine
from gravity_core.query.stored_expansions import StoredExpansions
from gravity_core.schema import Utterance
from gravity_core.schema.changes import PARTS, KBChanges
from gravity_core.storage.anchor_vectors import EXPANSION_KIND, _expansion_texts
from gravity_core.storage.store import AnchorStore

ROOT = Path(__file__).resolve().parents[3]
EMBEDDER = HashingEmbedder(dim=32)
QUESTIONS = (
    "What happened with Biscuit the terrier?",
    "Where does Maya work now?",
    "When did Jonas ship the game?",
)


@pytest.fixture(scope="module")
def turns() -> list[Utterance]:
    return load_conversation(ROOT / "examples" / "sample_conversation.jsonl")


def _sessions(turns: list[Utterance], *numbers: int) -> list[Utterance]:
    wanted = {f"session_{n}" for n in numbers}
    return [u for u in turns if u.session in wanted]


def _builder(folder: Path, share: float = 1.0) -> AnchorBuilder:
    return AnchorBuilder(OfflineExtractor(EMBEDDER), EMBEDDER, store=AnchorStore(folder, delta_share=share))


def _delta_base(folder: Path, generation: int) -> int | None:
    path = folder / f"g{generation:06d}" / "delta.json"
    return int(json.loads(path.read_text())["base"]) if path.exists() else None


def _five_then_six(folder: Path, turns: list[Utterance]) -> AnchorBuilder:
    """Sessions 1-5 built (generation 1), then all six added by another builder (generation 2, a delta)."""
    _builder(folder).add(_sessions(turns, 1, 2, 3, 4, 5))
    builder = _builder(folder)
    builder.add(turns)
    assert _delta_base(folder, 2) == 1
    return builder


def _assert_same_as_built(folder: Path, builder: AnchorBuilder) -> None:
    """What the store reads back is what the builder holds: items, their order, every vector row."""
    loaded = AnchorStore(folder).load()
    for part in PARTS:
        assert list(getattr(loaded.kb, part)) == list(getattr(builder.kb, part)), part
    assert loaded.kb.to_dict() == builder.kb.to_dict()
    for kind, built in builder.vectors.kinds.items():
        read = loaded.vectors.get(kind)
        if kind == EXPANSION_KIND:  # found by query, not by row: compared as id -> row
            rows = {i: (d, r.tobytes()) for i, d, r in zip(read.ids, read.digests, read.matrix, strict=True)}
            assert rows == {
                i: (d, r.tobytes()) for i, d, r in zip(built.ids, built.digests, built.matrix, strict=True)
            }
            continue
        assert read.ids == built.ids, kind
        assert read.digests == built.digests, kind
        np.testing.assert_array_equal(read.matrix, built.matrix)


def test_an_add_writes_a_delta_that_links_its_base_and_reads_back_whole(
    tmp_path: Path, turns: list[Utterance]
) -> None:
    builder = _five_then_six(tmp_path, turns)
    base, delta = tmp_path / "g000001", tmp_path / "g000002"
    for name in ("events.json", "utterances.json", "vectors-event.npy", "vectors.json"):
        assert os.stat(delta / f"base-{name}").st_ino == os.stat(base / name).st_ino  # linked, not copied
    own = [p for p in delta.iterdir() if not p.name.startswith("base-")]
    full_size = sum(p.stat().st_size for p in base.iterdir())
    assert 0 < sum(p.stat().st_size for p in own) < 0.5 * full_size
    changed = json.loads((delta / "delta-utterances.json").read_text())
    assert set(changed) == {u.id for u in _sessions(turns, 6)}
    _assert_same_as_built(tmp_path, builder)


def test_the_query_path_reads_a_delta_as_the_full_generation_it_stands_for(
    tmp_path: Path, turns: list[Utterance]
) -> None:
    as_delta, as_full = tmp_path / "delta", tmp_path / "full"
    _builder(as_delta).add(_sessions(turns, 1, 2, 3, 4, 5))
    shutil.copytree(as_delta, as_full)
    _builder(as_delta).add(turns)
    _builder(as_full, share=0).add(turns)
    assert _delta_base(as_delta, 2) == 1 and _delta_base(as_full, 2) is None

    # half_from=10: kinds of 10 rows or more held in float16, their exact rows read from two files
    packed = AnchorStore(as_delta).load_packed(
        vector_kinds=("entity", "event", "topic", EXPANSION_KIND),
        mapped_kinds=(EXPANSION_KIND,),
        half_from=10,
    )
    full = AnchorStore(as_full).load()
    for part in PARTS:
        assert dict(getattr(packed.kb, part).items()) == getattr(full.kb, part)
        assert list(getattr(packed.kb, part)) == list(getattr(full.kb, part))
    for kind in ("entity", "event", "topic"):
        rows = packed.vectors.get(kind)
        assert rows.ids == full.vectors.get(kind).ids
        assert rows.exact_rows is not None
        exact = rows.exact_rows.read(np.arange(len(rows.ids), dtype=np.intp))
        np.testing.assert_array_equal(exact, full.vectors.get(kind).matrix)
    expansions = packed.vectors.get(EXPANSION_KIND)
    assert expansions.tail is not None and len(expansions.tail) > 0  # the base's rows stay mapped
    stored, full_rows = StoredExpansions.of(expansions), full.vectors.get(EXPANSION_KIND)
    row_of = full_rows.row_of()
    for key, text in _expansion_texts(full.kb).items():
        np.testing.assert_array_equal(stored.vector(text), full_rows.matrix[row_of[key]])

    for question in QUESTIONS:
        assert GravityEngine.from_dir(as_delta, embedder=EMBEDDER, follow=False).query(
            question
        ) == GravityEngine.from_dir(as_full, embedder=EMBEDDER, follow=False).query(question)


def test_later_deltas_keep_the_base_until_one_would_be_too_large(
    tmp_path: Path, turns: list[Utterance]
) -> None:
    _builder(tmp_path).add(_sessions(turns, 1, 2, 3))
    for session in (4, 5):
        _builder(tmp_path).add(_sessions(turns, session))
    # Both deltas follow generation 1 (the second holds the first's items too); the base stays on
    # disk beside the current generation and the one before it.
    assert (_delta_base(tmp_path, 2), _delta_base(tmp_path, 3)) == (1, 1)
    assert sorted(p.name for p in tmp_path.glob("g*")) == ["g000001", "g000002", "g000003"]
    changed = json.loads((tmp_path / "g000003" / "delta-utterances.json").read_text())
    assert set(changed) == {u.id for u in _sessions(turns, 4, 5)}

    builder = _builder(tmp_path, share=0.01)  # this delta would be too large: a full generation
    builder.add(_sessions(turns, 6))
    assert _delta_base(tmp_path, 4) is None
    assert sorted(p.name for p in tmp_path.glob("g*")) == ["g000001", "g000003", "g000004"]
    _assert_same_as_built(tmp_path, builder)

    _builder(tmp_path).add(turns)  # nothing new: no save
    assert AnchorStore(tmp_path).current_generation() == 4


def test_rollback_from_a_damaged_delta_goes_back_to_the_generation_before(
    tmp_path: Path, turns: list[Utterance]
) -> None:
    _builder(tmp_path).add(_sessions(turns, 1, 2, 3, 4))
    _builder(tmp_path).add(_sessions(turns, 5))
    before = AnchorStore(tmp_path).load().kb
    _builder(tmp_path).add(_sessions(turns, 6))
    damaged = tmp_path / "g000003" / "delta-events.json"
    damaged.write_bytes(damaged.read_bytes()[:-20])

    store = AnchorStore(tmp_path)
    with pytest.raises(AnchorStoreError, match=r"delta-events\.json.*corrupt.*g000002 is intact"):
        store.load()
    assert store.rollback() == 2
    assert store.load().kb == before


def test_a_damaged_file_of_a_delta_is_named_whether_it_is_its_own_or_its_bases(
    tmp_path: Path, turns: list[Utterance]
) -> None:
    _five_then_six(tmp_path, turns)
    store, folder = AnchorStore(tmp_path), tmp_path / "g000002"

    changed = json.loads((folder / "delta-events.json").read_text())
    event_id = next(iter(changed))
    changed[event_id]["when"] = {"start": "not a date"}
    saved = (folder / "delta-events.json").read_bytes()
    (folder / "delta-events.json").unlink()  # a new file: the base's stays as it was
    (folder / "delta-events.json").write_text(json.dumps(changed))
    for load in (store.load, lambda: store.load_packed(vector_kinds=("event",))):
        with pytest.raises(AnchorStoreError, match=rf"g000002/delta-events\.json.*{event_id}"):
            load()
    (folder / "delta-events.json").unlink()
    (folder / "delta-events.json").write_bytes(saved)

    (folder / "delta.json").unlink()
    with pytest.raises(AnchorStoreError, match=r"delta\.json: file missing"):
        store.load()


def test_a_folder_without_hard_links_gets_full_generations(
    tmp_path: Path, turns: list[Utterance], monkeypatch: pytest.MonkeyPatch
) -> None:
    _builder(tmp_path).add(_sessions(turns, 1, 2, 3, 4, 5))

    def no_links(src: object, dst: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    builder = _builder(tmp_path)
    builder.add(turns)
    assert _delta_base(tmp_path, 2) is None
    assert not list((tmp_path / "g000002").glob("base-*"))
    _assert_same_as_built(tmp_path, builder)


def test_a_build_that_replayed_another_builds_journal_writes_a_full_generation(
    tmp_path: Path, turns: list[Utterance]
) -> None:
    """Its changes since the generation are partly the journal's, which it did not note."""
    _builder(tmp_path).add(_sessions(turns, 1, 2, 3))
    crashed = AnchorBuilder(
        OfflineExtractor(EMBEDDER), EMBEDDER, store=AnchorStore(tmp_path), batch_size=4, checkpoint_every=1
    )
    with pytest.raises(KeyboardInterrupt):
        crashed.add(_sessions(turns, 4), progress=_stop_after(8))
    assert (tmp_path / "journal.jsonl").exists()

    resumed = _builder(tmp_path)
    resumed.add(_sessions(turns, 1, 2, 3, 4))
    assert _delta_base(tmp_path, 2) is None
    _assert_same_as_built(tmp_path, resumed)
    _builder(tmp_path).add(_sessions(turns, 5))  # and the next add, whose changes are known, a delta
    assert _delta_base(tmp_path, 3) == 2


def _stop_after(turns_done: int):  # type: ignore[no-untyped-def]
    def progress(done: int, total: int) -> None:
        if done >= turns_done:
            raise KeyboardInterrupt

    return progress


def test_a_forget_writes_a_full_generation_and_deletes_the_bases(
    tmp_path: Path, turns: list[Utterance]
) -> None:
    builder = _five_then_six(tmp_path, turns)
    builder.forget(ForgetRequest(sessions=("session_6",)))
    assert sorted(p.name for p in tmp_path.glob("g*")) == ["g000003"]
    assert _delta_base(tmp_path, 3) is None
    _assert_same_as_built(tmp_path, builder)


def test_a_kb_whose_order_a_delta_cannot_keep_is_saved_whole(tmp_path: Path, turns: list[Utterance]) -> None:
    builder = _builder(tmp_path)
    builder.add(_sessions(turns, 1, 2, 3, 4, 5))
    kb, vectors = builder.kb, builder.vectors
    first = next(iter(kb.events))
    kb.events[first] = kb.events.pop(first)  # an old event moved last: not the order of base + delta
    changed = KBChanges()
    changed.note("events", [first])
    store = AnchorStore(tmp_path, delta_share=1.0)
    store.save(kb, vectors, changed=changed)
    assert _delta_base(tmp_path, 2) is None
    assert list(store.load().kb.events) == list(kb.events)


def test_a_save_without_its_changes_and_a_share_of_zero_write_full_generations(
    tmp_path: Path, turns: list[Utterance]
) -> None:
    builder = _builder(tmp_path)
    builder.add(_sessions(turns, 1, 2, 3, 4, 5))
    changed = KBChanges()
    changed.note("events", list(builder.kb.events)[:1])
    AnchorStore(tmp_path).save(builder.kb, builder.vectors)
    AnchorStore(tmp_path, delta_share=0).save(builder.kb, builder.vectors, changed=changed)
    assert _delta_base(tmp_path, 2) is None and _delta_base(tmp_path, 3) is None
    AnchorStore(tmp_path, delta_share=1.0).save(builder.kb, builder.vectors, changed=changed)
    assert _delta_base(tmp_path, 4) == 3
    with pytest.raises(ConfigurationError, match="delta_share"):
        AnchorStore(tmp_path, delta_share=1.5)
