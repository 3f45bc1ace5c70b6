"""An engine follows its KB (#16): a build by another process, or a builder's add, reaches the next query.

The KB folders here are written by ``gravity build`` in a subprocess (the way another process adds a
session) or by an :class:`AnchorBuilder` with a store, with the hashing embedder, so nothing is faked:
the engine reads the folder the CLI wrote. A question about Biscuit has no anchor from session 3
(where Maya adopts him) until session 3 is in the KB; the provenance ids in the injected text
(``[session_3:12]``) say which session an anchor came from.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import AnchorStoreError, ConfigurationError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.config import ContextMode, QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import ChromaAnchorIndex, NumpyAnchorIndex
from gravity_core.query.live import LiveKB, StoreSource, first_reading
from gravity_core.query.state import KBSnapshot
from gravity_core.query.types import AnchorContext
from gravity_core.schema import AnchorKind, Utterance
from gravity_core.storage.anchor_vectors import ANCHOR_KINDS, AnchorVectors
from gravity_core.storage.store import AnchorStore, LoadedKB
from gravity_core.text.tokens import TokenCounter

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "examples" / "sample_conversation.jsonl"
BISCUIT = "What happened with Biscuit the terrier?"
QUESTIONS = (BISCUIT, "Where does Maya work now?", "When did Jonas ship the game?")


def session_file(folder: Path, *numbers: int) -> Path:
    """A JSONL file holding sessions ``numbers`` of the sample conversation, as recorded."""
    wanted = {f"session_{n}" for n in numbers}
    lines = [
        line
        for line in SAMPLE.read_text(encoding="utf-8").splitlines()
        if json.loads(line)["session"] in wanted
    ]
    path = folder / f"sessions-{'-'.join(map(str, numbers))}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def gravity_build(kb: Path, conversation: Path) -> None:
    """``gravity build CONVERSATION -o KB --embedder hashing`` in another process."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gravity_core",
            "build",
            str(conversation),
            "-o",
            str(kb),
            "--embedder",
            "hashing",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def sessions(*numbers: int) -> list[Utterance]:
    wanted = {f"session_{n}" for n in numbers}
    return [u for u in load_conversation(SAMPLE) if u.session in wanted]


def builder_of(kb: Path | None, embedder: HashingEmbedder) -> AnchorBuilder:
    store = AnchorStore(kb) if kb is not None else None
    return AnchorBuilder(OfflineExtractor(embedder), embedder, store=store)


def from_session(context: AnchorContext, number: int) -> bool:
    """Whether an injected anchor cites a turn of session ``number`` (its provenance ids)."""
    return f"session_{number}:" in context.text


def count_calls(monkeypatch: pytest.MonkeyPatch, *names: str) -> dict[str, int]:
    """Counts the calls of these ``AnchorStore`` methods (which still run)."""
    calls = dict.fromkeys(names, 0)
    for name in names:
        real = getattr(AnchorStore, name)

        def counted(
            self: AnchorStore, *args: Any, _real: Any = real, _name: str = name, **kwargs: Any
        ) -> Any:
            calls[_name] += 1
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(AnchorStore, name, counted)
    return calls


@pytest.fixture
def hashing() -> HashingEmbedder:
    return HashingEmbedder()  # 'hashing-256', as `gravity build --embedder hashing` writes


@pytest.fixture
def kb_12(tmp_path: Path) -> Path:
    """A KB of sessions 1 and 2, written by the CLI."""
    kb = tmp_path / "kb"
    gravity_build(kb, session_file(tmp_path, 1, 2))
    return kb


def test_a_gravity_build_in_another_process_reaches_the_next_query(
    kb_12: Path, tmp_path: Path, hashing: HashingEmbedder
) -> None:
    engine = GravityEngine.from_dir(kb_12, embedder=hashing)
    snapshot = GravityEngine.from_dir(kb_12, embedder=hashing, follow=False)
    before = engine.query(BISCUIT)
    assert not from_session(before, 3)
    assert (engine.generation, engine.revision, engine.follows) == (1, 0, True)

    gravity_build(kb_12, session_file(tmp_path, 3))

    after = engine.query(BISCUIT)
    assert from_session(after, 3), after.text
    assert "Biscuit" in after.text
    assert (engine.generation, engine.revision) == (2, 1)
    assert len(engine.kb.utterances) == len(sessions(1, 2, 3))
    # The same answer as an engine loaded from the folder now.
    assert after == GravityEngine.from_dir(kb_12, embedder=hashing, follow=False).query(BISCUIT)
    # follow=False keeps the generation it loaded.
    assert snapshot.query(BISCUIT) == before
    assert (snapshot.generation, snapshot.follows, snapshot.refresh()) == (1, False, False)


def test_an_unchanged_kb_costs_one_stat_per_query_and_no_read(
    kb_12: Path, hashing: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = GravityEngine.from_dir(kb_12, embedder=hashing)
    calls = count_calls(monkeypatch, "stamp", "current_version", "load_packed")
    for question in QUESTIONS * 10:
        engine.query(question)
    assert calls == {"stamp": 30, "current_version": 0, "load_packed": 0}
    frozen = GravityEngine.from_dir(kb_12, embedder=hashing, follow=False)
    calls.update(stamp=0, current_version=0, load_packed=0)
    for question in QUESTIONS:
        frozen.query(question)
    assert calls == {"stamp": 0, "current_version": 0, "load_packed": 0}


def test_a_manifest_written_again_for_the_same_generation_reads_no_kb(
    kb_12: Path, hashing: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = GravityEngine.from_dir(kb_12, embedder=hashing)
    manifest = kb_12 / "manifest.json"
    copy = kb_12 / "manifest.copy"
    shutil.copy(manifest, copy)
    copy.replace(manifest)  # same content, new inode: the stamp moves
    calls = count_calls(monkeypatch, "current_version", "load_packed")
    engine.query(BISCUIT)
    engine.query(BISCUIT)
    assert calls == {"current_version": 1, "load_packed": 0} and engine.revision == 0


def test_a_reader_never_sees_a_torn_kb_while_builds_run(
    kb_12: Path, tmp_path: Path, hashing: HashingEmbedder
) -> None:
    """A thread queries without pause while three CLI builds add sessions 3, 4 and 5.

    Every answer it gets must be the answer of one whole generation (computed afterwards by
    snapshot engines of each), and the generations it sees never go back.
    """
    engine = GravityEngine.from_dir(kb_12, embedder=hashing)
    expected = {1: {q: engine.query(q) for q in QUESTIONS}}
    seen: list[tuple[str, AnchorContext, int | None]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def hammer() -> None:
        try:
            while not stop.is_set():
                for question in QUESTIONS:
                    context = engine.query(question)
                    seen.append((question, context, engine.generation))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    reader = threading.Thread(target=hammer)
    reader.start()
    try:
        for number in (3, 4, 5):
            gravity_build(kb_12, session_file(tmp_path, number))
            now = GravityEngine.from_dir(kb_12, embedder=hashing, follow=False)
            assert now.generation is not None
            expected[now.generation] = {q: now.query(q) for q in QUESTIONS}
        seen_before_stop = len(seen)
        deadline = time.monotonic() + 60
        while len(seen) < seen_before_stop + len(QUESTIONS) * 2 and reader.is_alive():  # a few more queries
            assert time.monotonic() < deadline, "the reader stopped answering"
            stop.wait(0.01)
    finally:
        stop.set()
        reader.join(timeout=60)
    assert not errors, errors
    assert set(expected) == {1, 2, 3, 4}
    latest = 0
    for question, context, _ in seen:
        whole = [g for g, answers in expected.items() if answers[question] == context]
        assert whole, f"an answer to {question!r} matches no generation: {context.anchors}"
        assert max(whole) >= latest, "a reader went back to an older generation"
        latest = max(latest, min(whole))
    assert {g for _, _, g in seen} >= {1, 4}  # the reader lived through the builds
    assert seen[-1][1] == expected[4][seen[-1][0]]
    assert from_session(engine.query(BISCUIT), 3)


def test_journal_checkpoints_are_not_served_and_full_saves_are(
    tmp_path: Path, hashing: HashingEmbedder
) -> None:
    """Mid-build, a reader serves the generation the manifest names, never the journal's records."""
    kb = tmp_path / "kb"
    builder_of(kb, hashing).add(sessions(1))
    engine = GravityEngine.from_dir(kb, embedder=hashing)
    store = AnchorStore(kb)
    writer = AnchorBuilder(
        OfflineExtractor(hashing), hashing, store=AnchorStore(kb), batch_size=4, checkpoint_every=1
    )
    # (generation served, manifest's generation, utterances served, in the manifest, in the builder)
    served: list[tuple[int | None, int | None, int, int, int]] = []

    def progress(done: int, total: int) -> None:
        engine.query(BISCUIT)
        manifest = json.loads((kb / "manifest.json").read_text(encoding="utf-8"))
        served.append(
            (
                engine.generation,
                store.current_generation(),
                len(engine.kb.utterances),
                manifest["counts"]["utterances"],
                len(writer.kb.utterances),
            )
        )

    writer.add(sessions(2, 3, 4), progress=progress)
    assert len(served) > 5
    assert all(mine == theirs for mine, theirs, *_ in served)
    assert all(utterances == in_manifest for _, _, utterances, in_manifest, _ in served)
    # The builder held journaled turns the reader did not serve, and the reader saw full saves mid-build.
    assert any(in_builder > in_manifest for *_, in_manifest, in_builder in served)
    assert len({generation for generation, *_ in served}) > 2
    assert not (kb / "journal.jsonl").exists()  # the end of the build saved a generation
    engine.query(BISCUIT)
    assert engine.generation == store.current_generation()
    assert len(engine.kb.utterances) == len(sessions(1, 2, 3, 4))


def test_a_generation_that_cannot_be_read_leaves_the_loaded_one_served(
    kb_12: Path, tmp_path: Path, hashing: HashingEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    engine = GravityEngine.from_dir(kb_12, embedder=hashing)
    before = engine.query(BISCUIT)
    gravity_build(kb_12, session_file(tmp_path, 3))
    damaged = kb_12 / "g000002" / "entities.json"
    damaged.write_bytes(damaged.read_bytes() + b" ")  # still JSON, but its digest no longer matches

    with caplog.at_level(logging.WARNING, logger="gravity_core.query.live"):
        assert engine.query(BISCUIT) == before
    assert (engine.generation, engine.revision) == (1, 0)
    assert "cannot be read yet" in caplog.text and "still serving generation 1" in caplog.text
    with pytest.raises(AnchorStoreError):  # what a fresh load says of the folder
        GravityEngine.from_dir(kb_12, embedder=hashing)
    # The failed read waits before it is tried again: the next queries read nothing.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gravity_core.query.live"):
        for _ in range(5):
            assert engine.query(BISCUIT) == before
    assert caplog.text == ""

    AnchorStore(kb_12).rollback()  # generation 1 current again, then session 3 built anew
    gravity_build(kb_12, session_file(tmp_path, 3))
    assert engine.refresh()  # no need to wait for the retry interval
    assert from_session(engine.query(BISCUIT), 3)
    assert engine.generation == AnchorStore(kb_12).current_generation()


def test_a_kb_folder_removed_under_the_engine_is_served_no_more(
    kb_12: Path, hashing: HashingEmbedder
) -> None:
    engine = GravityEngine.from_dir(kb_12, embedder=hashing)
    assert engine.query("Where does Maya work now?").anchors
    shutil.rmtree(kb_12)
    gone = engine.query("Where does Maya work now?")
    assert (gone.anchors, gone.text, engine.generation, engine.revision) == ([], "", None, 1)
    assert engine.refresh() is False  # nothing more to read while the folder stays gone


def test_a_kb_made_again_in_its_folder_by_another_embedder_is_not_served_nor_the_old_one(
    kb_12: Path, tmp_path: Path, hashing: HashingEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    engine = GravityEngine.from_dir(kb_12, embedder=hashing)
    assert engine.query("Where does Maya work now?").anchors
    shutil.rmtree(kb_12)
    other = HashingEmbedder(64)
    builder_of(kb_12, other).add(sessions(1, 2, 3))  # the folder made again, by another embedder
    with caplog.at_level(logging.WARNING, logger="gravity_core.query.live"):
        after = engine.query("Where does Maya work now?")
    assert "hashing-64" in caplog.text and "now serving an empty KB" in caplog.text
    assert (after.anchors, engine.generation) == ([], None)  # another KB: the old one is not served


def test_a_new_generation_of_another_embedder_in_the_same_kb_is_not_served(
    kb_12: Path, hashing: HashingEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    engine = GravityEngine.from_dir(kb_12, embedder=hashing)
    before = engine.query(BISCUIT)
    store = AnchorStore(kb_12)
    loaded = store.load()
    vectors = AnchorVectors(embedder="hashing-64", dim=64)
    vectors.refresh(loaded.kb, HashingEmbedder(64))
    store.save(loaded.kb, vectors)  # generation 2 of the same KB, embedded by another embedder
    with caplog.at_level(logging.WARNING, logger="gravity_core.query.live"):
        assert engine.query(BISCUIT) == before
    assert "hashing-64" in caplog.text and "still serving generation 1" in caplog.text


def test_an_engine_from_a_builder_sees_what_the_builder_adds(hashing: HashingEmbedder) -> None:
    builder = builder_of(None, hashing)
    builder.add(sessions(1, 2))
    engine = GravityEngine.from_builder(builder)
    snapshot = GravityEngine.from_builder(builder, follow=False)
    before = engine.query(BISCUIT)
    assert not from_session(before, 3)

    builder.add(sessions(3))

    after = engine.query(BISCUIT)
    assert from_session(after, 3), after.text
    assert engine.revision == 1 and engine.generation is None
    again = builder.add(sessions(3))  # nothing new: no new version
    assert again.added == 0
    engine.query(BISCUIT)
    assert engine.revision == 1
    # The snapshot keeps a copy of what the builder held: the add changed none of it.
    assert snapshot.query(BISCUIT) == before
    assert len(snapshot.kb.utterances) == len(sessions(1, 2))
    assert snapshot.kb is not builder.kb and engine.kb is not builder.kb


def test_an_engine_over_a_builder_with_a_store_follows_its_adds(
    tmp_path: Path, hashing: HashingEmbedder
) -> None:
    builder = builder_of(tmp_path / "kb", hashing)
    engine = GravityEngine.from_builder(builder)  # before the first add: an empty KB
    assert engine.query(BISCUIT).anchors == []
    builder.add(sessions(1, 2, 3))
    assert from_session(engine.query(BISCUIT), 3)


def test_the_summaries_baseline_embeds_the_summaries_of_each_version(
    kb_12: Path, tmp_path: Path, hashing: HashingEmbedder
) -> None:
    engine = GravityEngine.from_dir(kb_12, embedder=hashing)
    summaries = QueryConfig(mode=ContextMode.SUMMARIES)
    first = engine.summary_vectors
    assert len(first.ids) == len(engine.kb.summaries)
    engine.query(BISCUIT, config=summaries)
    gravity_build(kb_12, session_file(tmp_path, 3))
    engine.query(BISCUIT, config=summaries)
    assert len(engine.summary_vectors.ids) == len(engine.kb.summaries) > len(first.ids)


def test_a_chroma_index_is_synced_with_each_new_version(
    kb_12: Path, tmp_path: Path, hashing: HashingEmbedder
) -> None:
    index = ChromaAnchorIndex.persistent(tmp_path / "chroma", "kb")
    engine = GravityEngine.from_dir(kb_12, embedder=hashing, index=index)
    events = index.count(AnchorKind.EVENT)
    gravity_build(kb_12, session_file(tmp_path, 3))
    after = engine.query(BISCUIT)
    assert from_session(after, 3)
    assert engine.index is index
    assert index.count(AnchorKind.EVENT) == len(engine.kb.events) > events
    numpy = GravityEngine.from_dir(kb_12, embedder=hashing, follow=False)
    assert [a.id for a in after.anchors] == [a.id for a in numpy.query(BISCUIT).anchors]


def test_following_needs_an_index_the_engine_can_bring_up_to_date(
    kb_12: Path, hashing: HashingEmbedder
) -> None:
    vectors = AnchorStore(kb_12).load(vector_kinds=ANCHOR_KINDS).vectors
    with pytest.raises(ConfigurationError, match="follow=False"):
        GravityEngine.from_dir(kb_12, embedder=hashing, index=NumpyAnchorIndex.from_vectors(vectors))
    fixed = GravityEngine.from_dir(
        kb_12, embedder=hashing, index=NumpyAnchorIndex.from_vectors(vectors), follow=False
    )
    assert fixed.query(BISCUIT).question == BISCUIT


def test_a_failed_read_is_retried_when_the_folder_moves_on_or_its_interval_ends(
    tmp_path: Path, hashing: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = tmp_path / "kb"
    builder_of(kb, hashing).add(sessions(1, 2))
    source = StoreSource(AnchorStore(kb))
    loaded, mark = first_reading(source)
    now = [100.0]

    def prepare(fresh: LoadedKB, revision: int) -> KBSnapshot:
        index = NumpyAnchorIndex.from_vectors(fresh.vectors)
        return KBSnapshot.of(
            fresh.kb, index, counter=TokenCounter(), generation=fresh.generation, revision=revision
        )

    live = LiveKB(source, prepare, prepare(loaded, 0), mark, clock=lambda: now[0])
    builder_of(kb, hashing).add(sessions(3))
    damaged = kb / "g000002" / "events.json"
    damaged.write_bytes(damaged.read_bytes() + b" ")
    loads = count_calls(monkeypatch, "load_packed")

    assert live.current().generation == 1 and loads == {"load_packed": 1}  # tried, failed, kept generation 1
    assert live.current().generation == 1 and loads == {"load_packed": 1}  # waits: nothing moved
    now[0] += 0.4
    assert live.current().generation == 1 and loads == {"load_packed": 1}
    now[0] += 0.2  # the first interval (0.5 s) is over
    assert live.current().generation == 1 and loads == {"load_packed": 2}
    now[0] += 0.6  # the next interval is twice as long
    assert live.current().generation == 1 and loads == {"load_packed": 2}

    AnchorStore(kb).rollback()  # the folder moves on: read again at once, whatever the interval
    builder_of(kb, hashing).add(sessions(3))
    snapshot = live.current()
    assert (snapshot.generation, snapshot.revision) == (3, 1)
    assert len(snapshot.kb.utterances) == len(sessions(1, 2, 3))
