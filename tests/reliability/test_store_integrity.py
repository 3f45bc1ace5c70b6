"""Store integrity: every KB file damaged in every way is reported by name, the last good generation is
kept and can be made current again, and readers racing a writer always see one whole generation.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gravity_core.build.builder import AnchorBuilder
from gravity_core.cli import main
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import AnchorStoreError
from gravity_core.extract.llm import LLMExtractor
from gravity_core.schema import KnowledgeBase
from gravity_core.storage.generation_dirs import MARKER
from gravity_core.storage.store import CHECKSUMS, MANIFEST, WRITER_LOCK, AnchorStore, LoadedKB
from gravity_core.testing import FakeChatModel
from tests.reliability._build_helpers import comparable, conversation, good_answer
from tests.reliability._store_readers import consistent_version, reader_loop, versioned_kb

REPO = Path(__file__).resolve().parents[2]
EMBEDDER = HashingEmbedder(dim=32)


def two_generations(folder: Path) -> tuple[KnowledgeBase, KnowledgeBase]:
    """A KB built in two runs (sessions 1-2, then 3): generations 1 and 2, both kept."""
    store = AnchorStore(folder)
    first = AnchorBuilder(
        LLMExtractor(FakeChatModel(good_answer), fused=True), EMBEDDER, batch_size=4, store=store
    )
    first.add(conversation(sessions=2))
    second = AnchorBuilder(
        LLMExtractor(FakeChatModel(good_answer), fused=True), EMBEDDER, batch_size=4, store=store
    )
    second.add(conversation(sessions=3))
    assert store.generations() == [1, 2]
    return first.kb, second.kb


def _flip(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]


CORRUPTIONS: dict[str, Callable[[Path], object]] = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
    "emptied": lambda p: p.write_bytes(b""),
    "one-bit-flip": lambda p: p.write_bytes(_flip(p.read_bytes())),
    "garbage": lambda p: p.write_bytes(random.Random(p.name).randbytes(len(p.read_bytes()))),
    "deleted": lambda p: p.unlink(),
}


def damaged_loads(
    pristine: Path, names: list[str], copy: Callable[[Path, Path], object]
) -> Iterator[tuple[str, str, AnchorStore, str]]:
    """For each file of generation 2 and each damage: a copy of ``pristine`` so damaged, whose load
    fails naming the file; yields the file, the damage, the copy's store and the error message."""
    for name in names:
        for damage, corrupt in CORRUPTIONS.items():
            folder = pristine.parent / f"{name}-{damage}"
            copy(pristine, folder)
            corrupt(folder / "g000002" / name)
            store = AnchorStore(folder)
            with pytest.raises(AnchorStoreError) as info:
                store.load()
            message = str(info.value)
            assert name in message, (name, damage, message)
            yield name, damage, store, message


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The files of one generation."""
    folder = tmp_path_factory.mktemp("probe")
    two_generations(folder)
    names = sorted(p.name for p in (folder / "g000002").iterdir() if p.name != MARKER)  # not KB content
    assert {"entities.json", "vectors.json", CHECKSUMS, "vectors-entity.npy"} <= set(names)
    return names


def test_every_file_and_damage_is_reported_by_name_and_the_previous_generation_restores(
    tmp_path: Path, files: list[str]
) -> None:
    first, _ = two_generations(tmp_path / "pristine")
    cases = 0
    for _, _, store, message in damaged_loads(tmp_path / "pristine", files, shutil.copytree):
        assert "g000001 is intact" in message and "--rollback" in message, message
        assert store.rollback() == 1
        assert comparable(store.load().kb) == comparable(first)
        cases += 1
    assert cases == len(files) * len(CORRUPTIONS)


def delta_over_first(folder: Path) -> KnowledgeBase:
    """Generation 1 (sessions 1-2) and generation 2, a delta over it (session 3); returns the first KB."""
    store = AnchorStore(folder, delta_share=1.0)
    first = AnchorBuilder(
        LLMExtractor(FakeChatModel(good_answer), fused=True), EMBEDDER, batch_size=4, store=store
    )
    first.add(conversation(sessions=2))
    AnchorBuilder(
        LLMExtractor(FakeChatModel(good_answer), fused=True), EMBEDDER, batch_size=4, store=store
    ).add(conversation(sessions=3))
    assert store.base_of(2) == 1
    return first.kb


def test_every_file_of_a_delta_generation_and_damage_is_reported_by_name(tmp_path: Path) -> None:
    """Its own files: the generation before restores. Its base's: that generation is damaged too.

    Folders are copied with ``cp -a``, which keeps hard links, so a damaged base file is damaged
    in every generation that links it, as on the user's disk.
    """
    first = delta_over_first(tmp_path / "pristine")
    names = sorted(p.name for p in (tmp_path / "pristine" / "g000002").iterdir() if p.name != MARKER)
    assert {"delta.json", "delta-events.json", "base-events.json", "base-vectors-event.npy"} <= set(names)
    cases = 0
    for name, damage, store, message in damaged_loads(tmp_path / "pristine", names, _copy_keeping_links):
        shared = name.startswith("base-") and damage != "deleted"  # deleting a link leaves the base's
        if shared:
            assert "is intact" not in message and "a link to a file of g000001" in message, message
            with pytest.raises(AnchorStoreError, match=name.removeprefix("base-")):
                store.load(generation=1)
        else:
            assert "g000001 is intact" in message and "--rollback" in message, message
            assert store.rollback() == 1
            assert comparable(store.load().kb) == comparable(first)
        cases += 1
    assert cases == len(names) * len(CORRUPTIONS)


def _copy_keeping_links(source: Path, target: Path) -> None:
    subprocess.run(["cp", "-a", str(source), str(target)], check=True)


@pytest.mark.parametrize("damage", sorted(CORRUPTIONS))
def test_a_damaged_manifest_is_named_and_the_newest_good_generation_restores(
    tmp_path: Path, damage: str
) -> None:
    _, second = two_generations(tmp_path / "kb")
    store = AnchorStore(tmp_path / "kb")
    CORRUPTIONS[damage](tmp_path / "kb" / MANIFEST)
    with pytest.raises(AnchorStoreError, match="manifest.json") as info:
        store.load()
    if damage != "deleted":
        assert "--rollback" in str(info.value)
    assert store.rollback() == 2
    assert comparable(store.load().kb) == comparable(second)


def test_the_cli_names_the_file_rolls_back_and_builds_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = tmp_path / "kb"
    first, _ = two_generations(kb)
    (kb / "g000002" / "events.json").write_text('{"ev-000001": ')

    def run(argv: list[str]) -> tuple[int, str]:
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
            raise SystemExit(0)
        return int(exit_info.value.code or 0), capsys.readouterr().err

    code, err = run(["stats", str(kb)])
    assert code == 1 and "g000002/events.json: corrupt JSON" in err and "g000001 is intact" in err
    code, err = run(["build", "-o", str(kb), "--rollback"])
    assert code == 0 and "generation 1 is current again" in err
    assert comparable(AnchorStore(kb).load().kb) == comparable(first)
    # Building on goes on from generation 1; the damaged generation 2 is pruned by the next save.
    builder = AnchorBuilder(
        LLMExtractor(FakeChatModel(good_answer), fused=True), EMBEDDER, batch_size=4, store=AnchorStore(kb)
    )
    builder.add(conversation(sessions=3))
    assert AnchorStore(kb).generations() == [1, 3]


def test_a_kb_written_before_checksums_still_loads(tmp_path: Path) -> None:
    _, second = two_generations(tmp_path / "kb")
    (tmp_path / "kb" / "g000002" / CHECKSUMS).unlink()
    manifest = json.loads((tmp_path / "kb" / MANIFEST).read_text())
    del manifest["checksums"], manifest["digest"]
    (tmp_path / "kb" / MANIFEST).write_text(json.dumps(manifest))
    assert comparable(AnchorStore(tmp_path / "kb").load().kb) == comparable(second)


def test_deleting_the_checksums_of_a_checksummed_kb_is_reported(tmp_path: Path) -> None:
    two_generations(tmp_path / "kb")
    (tmp_path / "kb" / "g000002" / CHECKSUMS).unlink()
    with pytest.raises(AnchorStoreError, match=rf"g000002/{CHECKSUMS}: file missing"):
        AnchorStore(tmp_path / "kb").load()


# -- readers racing a writer ----------------------------------------------------------------


def test_readers_racing_a_writer_see_one_whole_generation(tmp_path: Path) -> None:
    kbs = [versioned_kb(k) for k in range(1, 7)]
    folder, stop = tmp_path / "kb", tmp_path / "stop"
    store = AnchorStore(folder)
    store.save(*kbs[0])
    code = "import sys\nfrom tests.reliability._store_readers import reader_loop\nreader_loop(*sys.argv[1:])"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(folder), str(stop), str(tmp_path / f"process{n}.json")], cwd=REPO
        )
        for n in range(2)
    ]
    errors: list[BaseException] = []

    def thread_reader(n: int) -> None:
        try:
            reader_loop(str(folder), str(stop), str(tmp_path / f"thread{n}.json"))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            stop.touch()

    threads = [threading.Thread(target=thread_reader, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while not all(
        (tmp_path / f"{w}.json.ready").exists() for w in ("process0", "process1", "thread0", "thread1")
    ):
        assert time.monotonic() < deadline and all(p.poll() is None for p in processes), (
            "readers did not start"
        )
        time.sleep(0.01)
    saves, until = 0, time.monotonic() + 1.5
    while saves < 6 or (saves < 30 and time.monotonic() < until):
        store.save(*kbs[saves % len(kbs)])
        saves += 1
        time.sleep(0.01)
    stop.touch()
    for t in threads:
        t.join(timeout=30)
    assert [p.wait(timeout=60) for p in processes] == [0, 0]
    assert not errors, errors[0]
    reports = [
        json.loads((tmp_path / f"{w}.json").read_text())
        for w in ("process0", "process1", "thread0", "thread1")
    ]
    for seen in reports:
        assert sum(seen.values()) >= 3 and len(seen) >= 2, seen
    assert len(store.generations()) == 2, "old generations are pruned"
    assert not [p for p in folder.iterdir() if p.name.startswith(".") and p.name != WRITER_LOCK]


def test_a_reader_whose_generation_is_pruned_under_it_reads_the_new_one(tmp_path: Path) -> None:
    kbs = [versioned_kb(k) for k in (1, 2, 3)]
    writer = AnchorStore(tmp_path / "kb")
    writer.save(*kbs[0])

    class SlowReader(AnchorStore):
        """Pauses after reading the manifest while the writer saves twice (pruning generation 1)."""

        paused = False

        def _load_generation(self, generation: int, *args: Any) -> LoadedKB:
            if not self.paused:
                self.paused = True
                writer.save(*kbs[1])
                writer.save(*kbs[2])
                assert generation not in writer.generations()
            return super()._load_generation(generation, *args)

    loaded = SlowReader(tmp_path / "kb").load()
    assert loaded.generation == 3 and consistent_version(loaded) == 3


def test_vectors_never_mix_between_generations(tmp_path: Path) -> None:
    """Swapping in a file of another generation is caught (the digests chain to the manifest)."""
    store = AnchorStore(tmp_path / "kb")
    store.save(*versioned_kb(2))
    store.save(*versioned_kb(3))
    old, new = tmp_path / "kb" / "g000001", tmp_path / "kb" / "g000002"
    (new / "vectors-event.npy").write_bytes((old / "vectors-event.npy").read_bytes())
    with pytest.raises(AnchorStoreError, match="g000002/vectors-event.npy"):
        store.load()
    np.testing.assert_array_equal(store.load(generation=1).vectors.get("event").matrix.shape, (2, 32))
