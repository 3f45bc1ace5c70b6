"""Checkpoints that cost what changed (#19): the journal, its patches and the merge index.

A build of 50,000 utterances did not finish in 600 s: every checkpoint rewrote the whole KB, and
every batch's merge rebuilt its lookups and relinked every event. Now a checkpoint appends what
changed to ``journal.jsonl`` (patches for the anchors the build keeps changing), a whole generation
is saved only when the journal holds as much as the current one, and merging keeps its index
across batches. These tests check that nothing is lost by it: every checkpoint replays to exactly
the builder's KB, the incremental merge gives exactly what a fresh one gives, torn and damaged
journal records are cut off, and readers see whole generations only. Speed itself is measured by
``python -m benchmarks --only long_build`` (no timing here).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gravity_core.build.builder import AnchorBuilder, plan_batches
from gravity_core.build.merge import apply_update
from gravity_core.build.names import NameIndex
from gravity_core.build.trails import TrailIndex, link_trails
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import StorageAccessError
from gravity_core.extract.llm import LLMExtractor
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.llm.base import Message
from gravity_core.loaders import load_conversation
from gravity_core.schema import (
    AnchorUpdate,
    EntityAnchor,
    EntityType,
    EventAnchor,
    KnowledgeBase,
    TimeRef,
    Utterance,
)
from gravity_core.storage.json_patch import apply, diff
from gravity_core.storage.store import JOURNAL, AnchorStore
from gravity_core.testing import FakeChatModel
from tests.reliability._build_helpers import batch_ids, comparable, conversation, good_answer
from tests.reliability._os_fakes import disk_full

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "sample_conversation.jsonl"
EMBEDDER = HashingEmbedder(dim=32)


def ordered(kb: KnowledgeBase, *, build: bool = True) -> str:
    """The KB as JSON text: content and the order of every dict and list (``build=False``: no build log)."""
    data = kb.to_dict()
    if not build:
        del data["build"]
    return json.dumps(data)


def llm_builder(
    folder: Path, model: FakeChatModel | None = None, *, batch_size: int = 3, **kwargs: Any
) -> AnchorBuilder:
    """A fused LLM build; its batches may span sessions, so the tests that count batches use a batch
    size that divides their sessions (3 for 6-turn sessions, 2 for 4-turn ones): two per session."""
    extractor = LLMExtractor(model or FakeChatModel(good_answer), fused=True)
    return AnchorBuilder(extractor, EMBEDDER, batch_size=batch_size, store=AnchorStore(folder), **kwargs)


@pytest.fixture
def never_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every checkpoint goes to the journal (only the end of a build saves a generation)."""
    monkeypatch.setattr(AnchorStore, "journal_outgrows_generation", lambda self, end: False)


class Replays:
    """After every journaled checkpoint, what a resuming build would read, next to the builder's KB."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
        self.folder = folder
        self.builder: AnchorBuilder | None = None
        self.compared = 0
        self.patched = 0
        real = AnchorStore.checkpoint

        def checkpoint(store: AnchorStore, line: bytes, **kwargs: Any) -> int:
            end = real(store, line, **kwargs)
            self.patched += b'"patch":{}' not in line
            assert self.builder is not None
            resumed = AnchorStore(self.folder).resume()
            assert resumed is not None and resumed.journal_end == end
            assert ordered(resumed.kb) == ordered(self.builder.kb)
            self.compared += 1
            return end

        monkeypatch.setattr(AnchorStore, "checkpoint", checkpoint)


def test_every_checkpoint_of_an_offline_build_replays_to_the_builders_kb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, never_fold: None
) -> None:
    utterances = load_conversation(SAMPLE)
    replays = Replays(monkeypatch, tmp_path / "kb")
    builder = AnchorBuilder(
        OfflineExtractor(EMBEDDER),
        EMBEDDER,
        batch_size=4,
        store=AnchorStore(tmp_path / "kb"),
        checkpoint_every=1,
    )
    replays.builder = builder
    builder.add(utterances[:60])
    builder.add(utterances)  # a second add journals on top of the first one's generation
    assert replays.compared >= 20 and replays.patched >= 5, (replays.compared, replays.patched)
    assert ordered(AnchorStore(tmp_path / "kb").load().kb) == ordered(builder.kb)
    assert not (tmp_path / "kb" / JOURNAL).exists(), "the last save folds the journal in"


def test_every_checkpoint_of_a_build_with_failures_and_retries_replays_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, never_fold: None
) -> None:
    phase = {"retrying": False}

    def answer(messages: Sequence[Message]) -> str:
        first = batch_ids(messages)[0]
        if first in ("S3:1", "S5:4") and not phase["retrying"]:
            return "not JSON"
        return good_answer(messages)

    replays = Replays(monkeypatch, tmp_path / "kb")
    builder = llm_builder(tmp_path / "kb", FakeChatModel(answer), checkpoint_every=1)
    replays.builder = builder
    builder.add(conversation(sessions=8, turns=6))
    assert len(builder.kb.build.failed_batches) == 2
    phase["retrying"] = True
    builder.retry_failed()
    assert replays.compared >= 10 and replays.patched >= 3


def test_a_resumed_build_equals_an_uninterrupted_one_after_journaled_checkpoints(
    tmp_path: Path, never_fold: None
) -> None:
    utterances = conversation(sessions=8, turns=6)
    reference = llm_builder(tmp_path / "ref")
    reference.add(utterances)

    class Stop(BaseException):
        pass

    calls = {"n": 0}

    def dies_later(messages: Sequence[Message]) -> str:
        calls["n"] += 1
        if calls["n"] == 9:
            raise Stop  # as SIGKILL would: nothing saved after the last checkpoint
        return good_answer(messages)

    with pytest.raises(Stop):
        llm_builder(tmp_path / "kb", FakeChatModel(dies_later), checkpoint_every=2).add(utterances)
    assert (tmp_path / "kb" / JOURNAL).exists()
    resumed = llm_builder(tmp_path / "kb")
    assert len(resumed.kb.utterances) == 24, "8 batches done, checkpointed every 2"
    resumed.add(utterances)
    assert comparable(AnchorStore(tmp_path / "kb").load().kb) == comparable(reference.kb)


def test_readers_see_the_last_generation_not_the_journal(tmp_path: Path, never_fold: None) -> None:
    folder = tmp_path / "kb"
    llm_builder(folder).add(conversation(sessions=2))
    generation = AnchorStore(folder).load()
    seen: list[int] = []
    real = AnchorStore.checkpoint

    def checkpoint(store: AnchorStore, line: bytes, **kwargs: Any) -> int:
        end = real(store, line, **kwargs)
        loaded = AnchorStore(folder).load()
        assert loaded.generation == generation.generation
        assert ordered(loaded.kb) == ordered(generation.kb)
        seen.append(end)
        return end

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AnchorStore, "checkpoint", checkpoint)
        llm_builder(folder, checkpoint_every=1).add(conversation(sessions=6))
    assert len(seen) >= 5
    assert len(AnchorStore(folder).load().kb.utterances) == 24


# -- the journal's own safety ---------------------------------------------------------------------


def halves_builder(folder: Path, model: FakeChatModel | None = None, **kwargs: Any) -> AnchorBuilder:
    """:func:`llm_builder` for the 4-turn sessions of this section: two batches a session."""
    return llm_builder(folder, model, batch_size=2, **kwargs)


@pytest.fixture
def journaled(tmp_path: Path, never_fold: None) -> Iterator[Path]:
    """A KB folder with a generation and a journal of several records after it (a build stopped)."""
    folder = tmp_path / "kb"
    halves_builder(folder).add(conversation(sessions=1))

    class Stop(BaseException):
        pass

    calls = {"n": 0}

    def stops(messages: Sequence[Message]) -> str:
        calls["n"] += 1
        if calls["n"] > 8:
            raise Stop
        return good_answer(messages)

    with pytest.raises(Stop):
        halves_builder(folder, FakeChatModel(stops), checkpoint_every=1).add(conversation(sessions=6))
    yield folder


def records(folder: Path) -> list[bytes]:
    return (folder / JOURNAL).read_bytes().splitlines(keepends=True)


def test_a_torn_last_record_is_ignored_and_cut_by_the_next_checkpoint(journaled: Path) -> None:
    whole = AnchorStore(journaled).resume()
    assert whole is not None and len(records(journaled)) == 8
    with open(journaled / JOURNAL, "ab") as handle:
        handle.write(records(journaled)[-1][:50])  # half a record, as a killed append leaves it
    resumed = AnchorStore(journaled).resume()
    assert resumed is not None and ordered(resumed.kb) == ordered(whole.kb)
    assert resumed.journal_end == whole.journal_end
    after_next: list[list[bytes]] = []
    real = AnchorStore.checkpoint

    def checkpoint(store: AnchorStore, line: bytes, **kwargs: Any) -> int:
        end = real(store, line, **kwargs)
        after_next.append(records(journaled))
        return end

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AnchorStore, "checkpoint", checkpoint)
        halves_builder(journaled, checkpoint_every=1).add(conversation(sessions=6))
    first = after_next[0]
    assert len(first) == 9 and all(line.endswith(b"\n") for line in first), "the torn half is gone"


def test_a_damaged_record_stops_the_replay_at_the_records_before_it(journaled: Path) -> None:
    lines = records(journaled)
    damaged = bytearray(lines[3])
    damaged[len(damaged) // 2] ^= 0x20
    (journaled / JOURNAL).write_bytes(b"".join([*lines[:3], bytes(damaged), *lines[4:]]))
    resumed = AnchorStore(journaled).resume()
    assert resumed is not None and resumed.journal_end == sum(len(line) for line in lines[:3])
    (journaled / JOURNAL).write_bytes(b"".join(lines[:3]))
    first_three = AnchorStore(journaled).resume()
    assert first_three is not None and ordered(resumed.kb) == ordered(first_three.kb)
    (journaled / JOURNAL).write_bytes(b"".join([*lines[:3], bytes(damaged), *lines[4:]]))
    finished = halves_builder(journaled)
    finished.add(conversation(sessions=6))
    reference = halves_builder(journaled.parent / "ref")
    reference.add(conversation(sessions=1))
    reference.add(conversation(sessions=6))
    assert comparable(AnchorStore(journaled).load().kb) == comparable(reference.kb)


def test_a_journal_of_another_generation_is_ignored_and_removed_by_the_next_save(journaled: Path) -> None:
    stale = (journaled / JOURNAL).read_bytes()
    halves_builder(journaled).add(conversation(sessions=6))  # resumes, ends with a save
    assert not (journaled / JOURNAL).exists()
    (journaled / JOURNAL).write_bytes(stale)  # its records follow the generation before
    resumed = AnchorStore(journaled).resume()
    assert resumed is not None and resumed.journal_end == 0
    assert ordered(resumed.kb) == ordered(AnchorStore(journaled).load().kb)
    halves_builder(journaled).add(conversation(sessions=7))
    assert not (journaled / JOURNAL).exists()


def test_a_full_disk_at_a_checkpoint_keeps_the_journal_and_the_build_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, never_fold: None
) -> None:
    folder = tmp_path / "kb"
    halves_builder(folder).add(conversation(sessions=1))
    calls = {"n": 0}
    real = AnchorStore.checkpoint

    def fills_up(store: AnchorStore, line: bytes, **kwargs: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 4:
            disk_full(monkeypatch, folder, only=lambda path: path.endswith(JOURNAL))
        return real(store, line, **kwargs)

    monkeypatch.setattr(AnchorStore, "checkpoint", fills_up)
    with pytest.raises(StorageAccessError, match=r"journal\.jsonl in KB folder .*No space left on device"):
        halves_builder(folder, checkpoint_every=1).add(conversation(sessions=4))
    monkeypatch.undo()
    assert len(records(folder)) == 3
    halves_builder(folder).add(conversation(sessions=4))
    reference = halves_builder(tmp_path / "ref")
    reference.add(conversation(sessions=1))
    reference.add(conversation(sessions=4))
    assert comparable(AnchorStore(folder).load().kb) == comparable(reference.kb)


# -- what a checkpoint costs (in bytes and saves, not seconds) -----------------------------------


def test_generations_are_saved_geometrically_and_records_stay_the_size_of_their_batches(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "kb"
    saves: list[int] = []
    lines: list[int] = []
    real_save, real_checkpoint = AnchorStore.save, AnchorStore.checkpoint

    def save(store: AnchorStore, kb: KnowledgeBase, vectors: Any, **kwargs: Any) -> int:
        saves.append(len(kb.utterances))
        return real_save(store, kb, vectors, **kwargs)

    def checkpoint(store: AnchorStore, line: bytes, **kwargs: Any) -> int:
        lines.append(len(line))
        return real_checkpoint(store, line, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AnchorStore, "save", save)
        patch.setattr(AnchorStore, "checkpoint", checkpoint)
        llm_builder(folder, checkpoint_every=1).add(conversation(sessions=40, turns=6))
    batches = 80
    assert len(saves) + len(lines) == batches
    assert len(saves) <= 9, f"{len(saves)} generations for {batches} checkpoints: {saves}"
    steady = sorted(lines[5:15])[5]
    assert max(lines[-10:]) <= 2 * steady, "a record holds its batches, not the KB's hub anchors again"


# -- the merge index gives what a fresh merge gives ------------------------------------------------


class Twin:
    """An extractor that also merges every update into a second KB with a fresh index each batch."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reference = KnowledgeBase()
        self.builder_kb: KnowledgeBase | None = None
        self.compared = 0

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def turn_embedder(self) -> str:
        return str(self.inner.turn_embedder)

    def use_turn_vectors(self, vectors: Any) -> None:
        self.inner.use_turn_vectors(vectors)

    def extract(self, batch: Sequence[Utterance], kb: KnowledgeBase) -> AnchorUpdate:
        assert ordered(kb, build=False) == ordered(self.reference, build=False), "the merges differ"
        self.compared += 1
        update = self.inner.extract(batch, kb)
        apply_update(self.reference, update.model_copy(deep=True), list(batch))
        return update


def test_the_merge_index_merges_exactly_as_a_fresh_index_would() -> None:
    twin = Twin(OfflineExtractor(EMBEDDER))
    builder = AnchorBuilder(twin, EMBEDDER, batch_size=4)  # type: ignore[arg-type]
    builder.add(load_conversation(SAMPLE))
    assert ordered(builder.kb, build=False) == ordered(twin.reference, build=False)
    assert twin.compared == len(plan_batches(load_conversation(SAMPLE), 4)) and len(builder.kb.events) > 10


def _event(n: int, who: list[str], topic: str | None, day: date) -> EventAnchor:
    said = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=n)
    return EventAnchor(
        id=f"ev-{n:06d}",
        who=who,
        who_ids=who,
        what=f"thing {n}",
        when=TimeRef.mentioned_on(day),
        said_at=said,
        session="s",
        sources=[f"u{n}"],
        topic_id=topic,
    )


def test_the_trail_index_links_as_a_full_relink_does() -> None:
    rng = random.Random(7)
    kb, fresh = KnowledgeBase(), KnowledgeBase()
    trails = TrailIndex(kb)
    people, topics = ["ann", "bo", "cy"], [None, "tp-1", "tp-2"]
    for batch in range(40):
        added = []
        for _ in range(rng.randint(0, 4)):
            n = len(kb.events) + 1
            who = rng.sample(people, rng.randint(0, 2))
            event = _event(n, who, rng.choice(topics), date(2024, 1, 1) + timedelta(days=rng.randint(0, 60)))
            kb.events[event.id] = event
            fresh.events[event.id] = event.model_copy(deep=True)
            added.append(event.id)
        before = copy.deepcopy(kb.to_dict()["events"])
        changed = trails.add(kb, added)
        link_trails(fresh)
        assert ordered(kb) == ordered(fresh), f"batch {batch}"
        after = kb.to_dict()["events"]
        assert {i for i in after if before.get(i) != after[i]} <= changed


def test_a_name_two_entities_share_belongs_to_the_first_as_in_a_fresh_index() -> None:
    kb = KnowledgeBase()
    seen = datetime(2024, 1, 1, tzinfo=UTC)
    for entity_id, name in (("lena", "Lena"), ("lena-fischer", "Lena Fischer"), ("biscuit", "Biscuit")):
        kb.entities[entity_id] = EntityAnchor(
            id=entity_id, name=name, type=EntityType.PERSON, first_seen=seen, last_seen=seen
        )
    kept = NameIndex(kb)
    kb.entities["lena"].aliases.append("Biscuit")  # the earlier entity gains the later one's name
    kept.add(kb.entities["lena"])
    kb.entities["lena-fischer"].type = EntityType.PET  # a person's first name no longer finds it
    kept.add(kb.entities["lena-fischer"])
    fresh = NameIndex(kb)
    for name in ("Lena", "Biscuit", "Lena Fischer", "lena", "nobody"):
        assert kept.find(name) == fresh.find(name), name
    assert {"biscuit", "lena"} <= kept.changed


def test_patches_rebuild_the_new_value_and_leave_the_old_one_alone() -> None:
    rng = random.Random(11)

    def value(depth: int = 0) -> Any:
        roll = rng.random()
        if depth > 3 or roll < 0.3:
            return rng.choice([0, 1, 2, None, "a", "b"])
        if roll < 0.65:
            return {rng.choice("abcde"): value(depth + 1) for _ in range(rng.randint(0, 4))}
        return [value(depth + 1) for _ in range(rng.randint(0, 4))]

    def changed(v: Any, depth: int = 0) -> Any:
        if isinstance(v, dict) and rng.random() < 0.8:
            out = {
                k: changed(x, depth + 1) if rng.random() < 0.3 else x
                for k, x in v.items()
                if rng.random() > 0.1
            }
            if rng.random() < 0.3:
                out[rng.choice("fghij")] = value(depth + 1)
            return out
        if isinstance(v, list) and rng.random() < 0.8:
            out_list = [changed(x, depth + 1) if rng.random() < 0.3 else x for x in v]
            out_list += [value(depth + 1) for _ in range(rng.randint(0, 2))]
            return out_list[1:] if out_list and rng.random() < 0.1 else out_list
        return value(depth)

    for _ in range(5000):
        old = value()
        new = changed(old)
        frozen = json.dumps(old)
        patch = diff(old, new)
        rebuilt = old if patch is None else apply(old, json.loads(json.dumps(patch)))
        assert json.dumps(rebuilt) == json.dumps(new)
        assert json.dumps(old) == frozen
    grown = {"sources": [f"u{i}" for i in range(1000)], "co": {"a": 1}}
    later = {"sources": [*grown["sources"], "u1000"], "co": {"a": 2, "b": 1}}
    assert len(json.dumps(diff(grown, later))) < 100, "an appended item costs its own size"
