"""Every OS error of a KB or SGMem folder is one line naming the path and what to do (#19).

A folder where ``manifest.json`` or ``.writer.lock`` should be, a symlinked lock, a read-only
folder, a full disk, an output that is a file, ``/dev/null``, a path through a file, a folder
under ``/proc`` or a 300-character name: ``gravity build`` (and ``--rollback``, and ``gravity
sgmem build``) exits 1 with one line on stderr, no traceback, and the KB that was there loads as
before. In Python the same is a :class:`StorageAccessError` (an :class:`AnchorStoreError`).

Also: a vector file and ``vectors.json`` that disagree are reported naming the file at fault, and
every write (build, its checkpoints, ``--retry-failed``, ``--rollback``, a store's save, an SGMem
save) takes the writer lock, so it fails with one line while another process holds it.

The full disk and, for root (whom no folder mode stops), the read-only folder are fakes of the OS
calls only (``tests/reliability/_os_fakes.py``).
"""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from gravity_core.build.builder import AnchorBuilder
from gravity_core.cli import main
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import AnchorStoreError, StorageAccessError
from gravity_core.extract.llm import LLMExtractor
from gravity_core.sgmem import SGMem
from gravity_core.storage.anchor_vectors import KindVectors
from gravity_core.storage.generation_dirs import WRITER_LOCK, generation_folder
from gravity_core.storage.os_errors import describe_os_error
from gravity_core.storage.store import MANIFEST, AnchorStore
from gravity_core.testing import FakeChatModel
from tests.reliability._build_helpers import conversation, good_answer
from tests.reliability._os_fakes import disk_full, read_only, refuse_writes

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "sample_conversation.jsonl"
EMBEDDER = HashingEmbedder(dim=32)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
        raise SystemExit(0)
    return int(exit_info.value.code or 0), capsys.readouterr().err


def one_line_failure(code: int, err: str, *needles: str) -> None:
    """Exit 1, exactly one line on stderr (the error), no traceback, each needle in it."""
    assert code == 1, err
    assert err.count("\n") == 1 and err.startswith("gravity: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)


def build_args(source: Path, kb: Path, *extra: str) -> list[str]:
    return ["build", str(source), "-o", str(kb), "--embedder", "hashing:32", "-q", *extra]


def no_leftovers(kb: Path) -> None:
    """No staging folder or temp file left by the failed write."""
    left = [p.name for p in kb.iterdir() if p.name.startswith(".") and p.name != WRITER_LOCK]
    assert not left, left


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sample's first 8 turns, and its first 16 (a later build adds 8)."""
    folder = tmp_path_factory.mktemp("inputs")
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    first, more = folder / "first.jsonl", folder / "more.jsonl"
    first.write_text("\n".join(lines[:8]) + "\n", encoding="utf-8")
    more.write_text("\n".join(lines[:16]) + "\n", encoding="utf-8")
    return first, more


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, inputs: tuple[Path, Path]) -> Path:
    """A KB of two generations built by the CLI (the first 8 turns, then 8 more)."""
    kb = tmp_path_factory.mktemp("built") / "kb"
    for source in inputs:
        with pytest.raises(SystemExit) as done:
            main(build_args(source, kb))
            raise SystemExit(0)
        assert done.value.code in (0, None)
    assert AnchorStore(kb).generations() == [1, 2]
    return kb


@pytest.fixture
def kb(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "kb"
    shutil.copytree(built, copy)
    return copy


def snapshot(kb: Path) -> tuple[int, dict[str, object]]:
    loaded = AnchorStore(kb).load()
    return loaded.generation, loaded.kb.to_dict()


# -- a folder or a link where the store writes a file ----------------------------------------------


def test_manifest_replaced_by_a_folder_is_one_line_and_every_generation_still_loads(
    kb: Path, inputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    (kb / MANIFEST).unlink()
    (kb / MANIFEST).mkdir()
    one_line_failure(*run_cli(build_args(inputs[1], kb), capsys), "manifest.json", "move it away")
    one_line_failure(
        *run_cli(["build", "-o", str(kb), "--rollback"], capsys), "manifest.json", "move it away"
    )
    assert (kb / MANIFEST).is_dir()
    for generation in (1, 2):
        assert AnchorStore(kb).load(generation).generation == generation
    no_leftovers(kb)


def test_a_first_save_whose_manifest_is_a_folder_is_not_adopted_over_it(
    tmp_path: Path, inputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    kb = tmp_path / "kb"
    assert run_cli(build_args(inputs[0], kb), capsys)[0] == 0
    (kb / MANIFEST).unlink()
    (kb / MANIFEST).mkdir()
    one_line_failure(*run_cli(build_args(inputs[1], kb), capsys), "manifest.json", "move it away")
    assert AnchorStore(kb).load(1).generation == 1


@pytest.mark.parametrize("lock", ["folder", "dangling link", "link to a file"])
def test_a_writer_lock_that_is_not_a_plain_file_is_one_line_and_the_kb_is_intact(
    kb: Path, tmp_path: Path, inputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], lock: str
) -> None:
    before = snapshot(kb)
    victim = tmp_path / "victim.txt"
    victim.write_text("not GRAVITY's")
    (kb / WRITER_LOCK).unlink(missing_ok=True)
    if lock == "folder":
        (kb / WRITER_LOCK).mkdir()
    else:
        (kb / WRITER_LOCK).symlink_to(victim if lock == "link to a file" else tmp_path / "nowhere")
    expected = "a folder stands where" if lock == "folder" else "symbolic link"
    one_line_failure(*run_cli(build_args(inputs[1], kb), capsys), WRITER_LOCK, expected)
    one_line_failure(*run_cli(["build", "-o", str(kb), "--rollback"], capsys), WRITER_LOCK, expected)
    assert snapshot(kb) == before
    assert victim.read_text() == "not GRAVITY's"


# -- read-only folders -----------------------------------------------------------------------------


def test_a_build_into_a_read_only_kb_is_one_line_before_any_work(
    kb: Path, inputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(kb)
    with read_only(monkeypatch, kb):
        code, err = run_cli(build_args(inputs[1], kb), capsys)
        rollback = run_cli(["build", "-o", str(kb), "--rollback"], capsys)
    one_line_failure(code, err, f"cannot write KB folder {kb}", "make it writable")
    one_line_failure(*rollback, f"cannot write KB folder {kb}", "make it writable")
    assert snapshot(kb) == before
    no_leftovers(kb)


def test_a_write_refused_at_the_first_save_is_one_line_and_the_previous_generation_stays(
    kb: Path, inputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder looked writable (``os.access``) but the OS refuses the save itself."""
    before = snapshot(kb)
    more = inputs[1].parent / "even_more.jsonl"
    more.write_text("\n".join(SAMPLE.read_text(encoding="utf-8").splitlines()[:24]) + "\n")
    refuse_writes(monkeypatch, kb, access=False)
    code, err = run_cli(build_args(more, kb), capsys)
    rollback = run_cli(["build", "-o", str(kb), "--rollback"], capsys)
    monkeypatch.undo()
    one_line_failure(code, err, f"KB folder {kb}", "Permission denied", "make it writable")
    one_line_failure(*rollback, f"KB folder {kb}", "Permission denied")
    assert snapshot(kb) == before
    no_leftovers(kb)


# -- a full disk -----------------------------------------------------------------------------------


@pytest.mark.parametrize("victim", [".json", ".npy", "manifest.json"])
def test_a_full_disk_is_one_line_and_the_previous_generation_stays_current(
    kb: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    victim: str,
) -> None:
    before = snapshot(kb)
    source = kb.parent / "all.jsonl"
    shutil.copy(SAMPLE, source)
    disk_full(
        monkeypatch, kb, only=lambda path: Path(path).name.endswith(victim) or victim in Path(path).name
    )
    code, err = run_cli(build_args(source, kb), capsys)
    monkeypatch.undo()
    one_line_failure(code, err, f"KB folder {kb}", "No space left on device", "free some space")
    assert snapshot(kb) == before
    no_leftovers(kb)
    assert run_cli(build_args(source, kb), capsys)[0] == 0, "with space again, the build completes"
    assert len(AnchorStore(kb).load().kb.utterances) == 96


def test_numpys_short_write_is_told_as_a_full_disk() -> None:
    message = describe_os_error(OSError("1536 requested and 0 written"), Path("/x/kb"))
    assert message.startswith("cannot write KB folder /x/kb: 1536 requested and 0 written")
    assert "disk is probably full" in message


def test_the_store_raises_a_storage_access_error_naming_file_folder_and_errno(
    kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = AnchorStore(kb).load()
    disk_full(monkeypatch, kb)
    with pytest.raises(StorageAccessError) as caught:
        AnchorStore(kb).save(loaded.kb, loaded.vectors)
    assert isinstance(caught.value, AnchorStoreError)
    assert caught.value.errno == errno.ENOSPC and caught.value.folder == str(kb)
    assert Path(caught.value.path).parent.parent == kb  # a file in the staging folder


# -- outputs that cannot be KB folders ------------------------------------------------------------


def _outputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    (tmp / "file.txt").write_text("a file")
    return {
        "a regular file": (tmp / "file.txt", "is not a folder"),
        "/dev/null": (Path("/dev/null"), "is not a folder"),
        "a path through a file": (tmp / "file.txt" / "kb", "a part of the path is a file"),
        "a folder under /proc": (Path("/proc/self/kb"), "cannot write"),
        "a 300-character name": (tmp / ("k" * 300), "too long"),
    }


OUTPUTS = [
    "a regular file",
    "/dev/null",
    "a path through a file",
    "a folder under /proc",
    "a 300-character name",
]


@pytest.mark.parametrize("output", OUTPUTS)
def test_an_output_that_cannot_be_a_kb_folder_is_one_line(
    tmp_path: Path, inputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], output: str
) -> None:
    path, needle = _outputs(tmp_path)[output]
    if output == "a folder under /proc" and not Path("/proc/self").is_dir():
        pytest.skip("no /proc")
    one_line_failure(*run_cli(build_args(inputs[0], path), capsys), needle)
    one_line_failure(*run_cli(["build", "-o", str(path), "--rollback"], capsys))
    one_line_failure(
        *run_cli(["sgmem", "build", str(inputs[0]), "-o", str(path), "--embedder", "hashing:32"], capsys),
        needle,
    )
    assert (tmp_path / "file.txt").read_text() == "a file"


# -- SGMem -----------------------------------------------------------------------------------------


@pytest.fixture
def sgmem_dir(tmp_path: Path, inputs: tuple[Path, Path]) -> Iterator[Path]:
    folder = tmp_path / "sg"
    memory = SGMem(EMBEDDER)
    from gravity_core.loaders import load_conversation

    memory.add(load_conversation(inputs[0]))
    memory.save(folder)
    yield folder


@pytest.mark.parametrize("fault", ["read-only", "disk full", "manifest is a folder"])
def test_sgmem_write_errors_are_one_line_and_the_index_is_intact(
    sgmem_dir: Path,
    inputs: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
) -> None:
    before = SGMem.load(sgmem_dir).stats()
    argv = ["sgmem", "build", str(inputs[1]), "-o", str(sgmem_dir), "-q"]
    if fault == "manifest is a folder":
        saved = (sgmem_dir / MANIFEST).read_bytes()
        (sgmem_dir / MANIFEST).unlink()
        (sgmem_dir / MANIFEST).mkdir()
        one_line_failure(*run_cli(argv, capsys), "manifest.json")
        (sgmem_dir / MANIFEST).rmdir()
        (sgmem_dir / MANIFEST).write_bytes(saved)
    elif fault == "read-only":
        with read_only(monkeypatch, sgmem_dir):
            code, err = run_cli(argv, capsys)
        one_line_failure(code, err, f"cannot write SGMem folder {sgmem_dir}", "make it writable")
    else:
        disk_full(monkeypatch, sgmem_dir, only=lambda path: path.endswith(".npy"))
        code, err = run_cli(argv, capsys)
        monkeypatch.undo()
        one_line_failure(code, err, f"SGMem folder {sgmem_dir}", "No space left on device")
    assert SGMem.load(sgmem_dir).stats() == before
    no_leftovers(sgmem_dir)


# -- vectors.json and a vector file that disagree --------------------------------------------------


def _kb_with_vectors(folder: Path, ids: list[str], rows: int) -> AnchorStore:
    """A saved KB of the small conversation whose entity vectors list ``ids`` for ``rows`` rows."""
    builder = AnchorBuilder(LLMExtractor(FakeChatModel(good_answer)), EMBEDDER, batch_size=4)
    builder.add(conversation(sessions=1))
    builder.save()
    vectors = builder.vectors
    entity = vectors.get("entity")
    matrix = np.resize(entity.matrix, (rows, EMBEDDER.dim)).astype(np.float32)
    vectors.kinds["entity"] = KindVectors(ids=ids, digests=["0" * 16] * len(ids), matrix=matrix)
    store = AnchorStore(folder)
    store.save(builder.kb, vectors)
    return store


def test_a_stale_vectors_json_is_named_not_the_vector_file(tmp_path: Path) -> None:
    """Copied from an older generation, vectors.json fails its digest: that is the error."""
    kb = tmp_path / "kb"
    builder = AnchorBuilder(
        LLMExtractor(FakeChatModel(good_answer)), EMBEDDER, batch_size=4, store=AnchorStore(kb)
    )
    builder.add(conversation(sessions=1))
    builder.add(conversation(sessions=3))
    old, new = generation_folder(kb, 1), generation_folder(kb, 2)
    rows = lambda folder: len(json.loads((folder / "vectors.json").read_text())["kinds"]["event"]["ids"])  # noqa: E731
    assert rows(old) != rows(new), "the older generation has fewer events"
    shutil.copy(old / "vectors.json", new / "vectors.json")
    with pytest.raises(AnchorStoreError) as caught:
        AnchorStore(kb).load()
    assert caught.value.path == str(new / "vectors.json")
    assert "vectors-event.npy" not in str(caught.value).split(";")[0]


def test_without_digests_the_file_that_disagrees_with_the_kb_is_named(tmp_path: Path) -> None:
    # ids agree with the KB's entities, rows do not: the vector file is at fault.
    probe = AnchorBuilder(LLMExtractor(FakeChatModel(good_answer)), EMBEDDER, batch_size=4)
    probe.add(conversation(sessions=1))
    entity_ids = list(probe.kb.entities)
    store = _kb_with_vectors(tmp_path / "a", entity_ids, len(entity_ids) + 2)
    with pytest.raises(AnchorStoreError) as caught:
        store.load()
    assert caught.value.path is not None and caught.value.path.endswith("vectors-entity.npy")
    # rows agree with the KB, the ids do not: vectors.json is at fault.
    store = _kb_with_vectors(tmp_path / "b", entity_ids[:-1], len(entity_ids))
    with pytest.raises(AnchorStoreError) as caught:
        store.load()
    assert caught.value.path is not None and caught.value.path.endswith("vectors.json")
    assert "stale" in str(caught.value)
    # neither agrees: both are named.
    store = _kb_with_vectors(tmp_path / "c", entity_ids[:-1], len(entity_ids) + 3)
    with pytest.raises(AnchorStoreError, match=r"vectors\.json lists .* but vectors-entity\.npy has"):
        store.load()


# -- every write takes the writer lock ------------------------------------------------------------

HOLD = """
import sys
from pathlib import Path
from gravity_core.storage.generation_dirs import writer_lock
with writer_lock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def held(kb: Path) -> Iterator[Path]:
    """``kb`` with its writer lock held by another process."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(kb)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    try:
        yield kb
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def test_every_cli_write_fails_in_one_line_while_another_process_holds_the_lock(
    held: Path, inputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(held)
    source = held.parent / "all.jsonl"
    shutil.copy(SAMPLE, source)
    one_line_failure(*run_cli(build_args(source, held), capsys), "another build is writing this KB")
    one_line_failure(*run_cli(["build", "-o", str(held), "--rollback"], capsys), "another build is writing")
    assert snapshot(held) == before


def test_every_python_write_fails_while_another_process_holds_the_lock(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    builder = AnchorBuilder(
        LLMExtractor(FakeChatModel(good_answer)), EMBEDDER, batch_size=4, store=AnchorStore(kb)
    )
    builder.add(conversation(sessions=1))
    memory = SGMem(EMBEDDER)
    memory.add(conversation(sessions=1))
    memory.save(tmp_path / "sg")
    holders = [
        subprocess.Popen(
            [sys.executable, "-c", HOLD, str(folder)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for folder in (kb, tmp_path / "sg")
    ]
    try:
        for holder in holders:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        store = AnchorStore(kb)
        loaded = store.load()
        writes = {
            "add": lambda: builder.add(conversation(sessions=2)),
            "retry_failed": builder.retry_failed,
            "builder.save": builder.save,
            "store.save": lambda: store.save(loaded.kb, loaded.vectors),
            "store.checkpoint": lambda: store.checkpoint(b"", base=loaded.generation, at=0),
            "rollback": store.rollback,
            "sgmem save": lambda: memory.save(tmp_path / "sg"),
        }
        for name, write in writes.items():
            with pytest.raises(AnchorStoreError, match="another build is writing"):
                write()
                pytest.fail(f"{name} wrote while another process held the lock")
        assert AnchorStore(kb).generations() == [1] and SGMem.load(tmp_path / "sg").stats()["turns"] == 4
    finally:
        for holder in holders:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(timeout=30)


def test_the_lock_is_reentrant_only_for_the_thread_that_holds_it(tmp_path: Path) -> None:
    import threading

    store = AnchorStore(tmp_path / "kb")
    caught: list[BaseException] = []

    def other() -> None:
        try:
            with store.writer():
                pass
        except AnchorStoreError as exc:
            caught.append(exc)

    with store.writer():
        with store.writer():  # a save inside a build
            pass
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert len(caught) == 1 and "another build is writing" in str(caught[0])
