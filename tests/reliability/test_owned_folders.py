"""A store touches only what it wrote: a build never deletes a folder it did not write, a non-empty
folder that is not a KB is refused, and a lost manifest never makes a build discard the KB.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gravity_core.build.builder import AnchorBuilder
from gravity_core.cli import main
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import AnchorStoreError
from gravity_core.extract.llm import LLMExtractor
from gravity_core.schema import Utterance
from gravity_core.sgmem import SGMem
from gravity_core.storage.generation_dirs import MARKER
from gravity_core.storage.store import MANIFEST, WRITER_LOCK, AnchorStore
from gravity_core.testing import FakeChatModel
from tests.reliability._build_helpers import conversation, good_answer

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "sample_conversation.jsonl"
EMBEDDER = HashingEmbedder(dim=32)
# Folders a user may keep next to (or in) a KB folder; the old prune's '.g*' glob and the
# generation pattern matched every one of them.
USER_FOLDERS = (".git", ".github", ".gnupg", ".gradle", "g000042", ".g000001.abcdefgh", ".gfoo")


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
        raise SystemExit(0)
    return int(exit_info.value.code or 0), capsys.readouterr().err


def plant(folder: Path) -> None:
    for name in USER_FOLDERS:
        (folder / name).mkdir(parents=True)
        (folder / name / "keep.txt").write_text("the user's own")


def planted_intact(folder: Path) -> bool:
    return all((folder / name / "keep.txt").read_text() == "the user's own" for name in USER_FOLDERS)


def builder(folder: Path) -> AnchorBuilder:
    extractor = LLMExtractor(FakeChatModel(good_answer), fused=True)
    return AnchorBuilder(extractor, EMBEDDER, batch_size=4, store=AnchorStore(folder))


def test_a_build_into_a_folder_that_is_not_a_kb_is_refused_in_one_line_and_deletes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(tmp_path)
    code, err = run_cli(["build", str(SAMPLE), "-o", str(tmp_path)], capsys)
    assert code == 1
    assert err.count("\n") == 1 and "is not empty and holds no GRAVITY KB" in err
    assert planted_intact(tmp_path)
    assert not (tmp_path / MANIFEST).exists()


def test_user_folders_inside_a_kb_survive_every_later_build(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    builder(kb).add(conversation(sessions=1))
    plant(kb)  # put there after the KB was made
    for sessions in (2, 3, 4):
        builder(kb).add(conversation(sessions=sessions))
    assert planted_intact(kb)
    # Numbers go past the user's g000042 (never written into), and its own old generations are pruned.
    assert AnchorStore(kb).generations() == [44, 45]


def test_a_staging_folder_of_a_crashed_save_is_removed_only_with_its_marker(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    builder(kb).add(conversation(sessions=1))
    crashed = kb / ".g000009.zzzzzzzz"
    crashed.mkdir()
    (crashed / MARKER).write_text(json.dumps({"format": "gravity-kb", "generation": 9}))
    (kb / ".g000008.yyyyyyyy").mkdir()  # killed before the marker: empty
    foreign = kb / ".g000007.xxxxxxxx"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not ours")
    builder(kb).add(conversation(sessions=2))
    assert not crashed.exists() and not (kb / ".g000008.yyyyyyyy").exists()
    assert (foreign / "notes.txt").read_text() == "not ours"


@pytest.mark.parametrize("marker_text", ["", '{"format": "gravity-kb", "gener'])
def test_a_save_killed_while_writing_its_marker_leaves_nothing_after_the_next_save(
    tmp_path: Path, marker_text: str
) -> None:
    """The marker is the first file a save writes: a folder holding only a torn one is a killed save's."""
    kb = tmp_path / "kb"
    kb.mkdir()
    torn = kb / ".g000001.98a08b20"
    torn.mkdir()
    (torn / MARKER).write_text(marker_text)
    builder(kb).add(conversation(sessions=1))
    assert not torn.exists()
    assert AnchorStore(kb).generations() == [1]  # the killed save's number, free again


def test_a_torn_marker_next_to_other_files_is_not_taken_for_the_stores(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    builder(kb).add(conversation(sessions=1))
    other = kb / ".g000009.abcdef12"
    other.mkdir()
    (other / MARKER).write_text("")
    (other / "notes.txt").write_text("not ours")
    builder(kb).add(conversation(sessions=2))
    assert (other / "notes.txt").read_text() == "not ours"


def test_a_build_with_nothing_to_save_still_removes_a_crashed_saves_leftovers(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    turns = conversation(sessions=1)
    builder(kb).add(turns)
    crashed = kb / ".g000005.zzzzzzzz"
    crashed.mkdir()
    (crashed / MARKER).write_text(json.dumps({"format": "gravity-kb", "generation": 5}))
    (crashed / "entities.json").write_text("[")
    before = AnchorStore(kb).generations()
    builder(kb).add(turns)  # every turn is in the KB already
    assert AnchorStore(kb).generations() == before
    assert not crashed.exists()


def test_a_lost_manifest_makes_build_refuse_and_rollback_restores_the_whole_kb(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = tmp_path / "kb"
    code, _ = run_cli(["build", str(SAMPLE), "-o", str(kb)], capsys)
    assert code == 0
    before = AnchorStore(kb).load().kb
    (kb / MANIFEST).unlink()
    extra = tmp_path / "extra.jsonl"
    extra.write_text(
        json.dumps(
            {"speaker": "Maya", "text": "I moved to Leeds.", "session": "s9", "timestamp": "2024-09-01"}
        )
        + "\n"
    )

    code, err = run_cli(["build", str(extra), "-o", str(kb)], capsys)
    assert code == 1 and err.count("\n") == 1
    assert "manifest.json is missing" in err and "--rollback" in err
    code, err = run_cli(["stats", str(kb)], capsys)
    assert code == 1 and "--rollback" in err

    code, _ = run_cli(["build", "-o", str(kb), "--rollback"], capsys)
    assert code == 0
    restored = AnchorStore(kb).load().kb
    assert len(restored.utterances) == len(before.utterances) == 96
    code, _ = run_cli(["build", str(extra), "-o", str(kb)], capsys)
    assert code == 0
    assert len(AnchorStore(kb).load().kb.utterances) == 97


def test_save_with_a_lost_manifest_is_refused_by_the_store_itself(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    first = builder(kb)
    first.add(conversation(sessions=1))
    (kb / MANIFEST).unlink()
    with pytest.raises(AnchorStoreError, match="manifest.json is missing"):
        AnchorStore(kb).save(first.kb, first.vectors)
    assert AnchorStore(kb).generations() == [1]


def test_a_generation_is_pruned_only_after_a_manifest_named_it(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    for sessions in (1, 2, 3):
        builder(kb).add(conversation(sessions=sessions))
    manifest = json.loads((kb / MANIFEST).read_text())
    assert manifest["generation"] == 3 and manifest["generations"] == [1, 2, 3]
    assert AnchorStore(kb).generations() == [2, 3]


def test_a_one_save_kb_without_manifest_is_adopted_not_discarded(tmp_path: Path) -> None:
    """A first build killed between its two renames looks the same: its generation is made current."""
    kb = tmp_path / "kb"
    builder(kb).add(conversation(sessions=1))
    saved = AnchorStore(kb).load().kb
    (kb / MANIFEST).unlink()
    second = builder(kb)  # reads the folder
    assert AnchorStore(kb).current_generation() == 1
    assert second.kb.utterances == saved.utterances
    second.add(conversation(sessions=2))
    assert len(AnchorStore(kb).load().kb.utterances) == len(conversation(sessions=2))


def test_sgmem_refuses_a_foreign_folder_and_keeps_user_folders(
    tmp_path: Path, sample: list[Utterance]
) -> None:
    memory = SGMem(HashingEmbedder(dim=32))
    memory.add(sample[:20])
    plant(tmp_path / "busy")
    with pytest.raises(AnchorStoreError, match="is not empty and holds no GRAVITY KB"):
        memory.save(tmp_path / "busy")
    assert planted_intact(tmp_path / "busy")

    index = tmp_path / "index"
    memory.save(index)
    plant(index)
    for _ in range(3):
        memory.save(index)
    assert planted_intact(index)
    assert sorted(p.name for p in index.iterdir() if (p / MARKER).exists()) == ["g000044", "g000045"]


def test_sgmem_with_a_lost_manifest_refuses_to_save(tmp_path: Path, sample: list[Utterance]) -> None:
    memory = SGMem(HashingEmbedder(dim=32))
    memory.add(sample[:20])
    memory.save(tmp_path)
    (tmp_path / MANIFEST).unlink()
    with pytest.raises(AnchorStoreError, match="manifest.json is missing"):
        memory.save(tmp_path)
    assert (tmp_path / "g000001" / MARKER).exists()


@pytest.fixture(scope="module")
def sample() -> list[Utterance]:
    from gravity_core.loaders import load_conversation

    return load_conversation(SAMPLE)


def test_rollback_takes_the_writer_lock(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    for sessions in (1, 2):
        builder(kb).add(conversation(sessions=sessions))
    with AnchorStore(kb).writer(), pytest.raises(AnchorStoreError, match="another build is writing"):
        AnchorStore(kb).rollback()
    assert AnchorStore(kb).current_generation() == 2


class _Killed(BaseException):
    """Stands for SIGKILL in the middle of a prune (not an Exception: nothing may catch it)."""


def test_a_prune_killed_half_way_is_finished_by_the_next_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marker goes last: a delete cut short leaves a folder still provably the store's.

    The kill comes at the first removal after the marker's (or at the folder's own removal):
    deleted in directory order, the marker could go first and leave the other files for good.
    """
    kb = tmp_path / "kb"
    for sessions in (1, 2):
        builder(kb).add(conversation(sessions=sessions))
    real_unlink, real_rmdir = os.unlink, os.rmdir
    marker_gone = {"yes": False}

    def unlink(path: Any, *args: Any, **kwargs: Any) -> None:
        if marker_gone["yes"]:
            raise _Killed
        real_unlink(path, *args, **kwargs)
        marker_gone["yes"] = (
            os.fspath(path).endswith(MARKER) or kwargs.get("dir_fd") is not None and path == MARKER
        )

    def rmdir(path: Any, *args: Any, **kwargs: Any) -> None:
        if marker_gone["yes"]:
            raise _Killed
        real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.setattr(os, "rmdir", rmdir)
    with pytest.raises(_Killed):
        builder(kb).add(conversation(sessions=3))  # its save prunes g000001
    monkeypatch.undo()
    builder(kb).add(conversation(sessions=4))
    assert sorted(p.name for p in kb.iterdir() if p.name not in (WRITER_LOCK, "cache")) == sorted(
        [MANIFEST, "g000003", "g000004"]
    )
