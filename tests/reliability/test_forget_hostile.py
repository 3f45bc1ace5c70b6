"""Forget deletes only what is the KB's own, and leaves nothing of what it forgot (issue #39).

Each test replays a case of the hostile run against ``gravity forget`` / ``gravity build`` / the
store: a cache folder that is a symbolic link, an LLM answer cache shared by two KBs, speakers whose
names differ only by Unicode folding, a damaged generation marker, the explorer page, a manifest
replaced by a folder, and a forget run twice."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.build.forget import ForgetRequest
from gravity_core.extract.llm import LLMExtractor
from gravity_core.llm.cache import ResponseCache
from gravity_core.schema import AnchorKind, KnowledgeBase
from gravity_core.storage.anchor_vectors import anchor_texts
from gravity_core.storage.generation_dirs import MARKER
from gravity_core.storage.store import AnchorStore
from gravity_core.testing import FakeChatModel
from tests.core.build.test_forget import EMBEDDER, chat, fused_answer
from tests.core.cli.test_cli_forget import error_line, run, run_ok

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "sample_conversation.jsonl"
FORGOTTEN = "session_2"
#: Words only session 2 of the sample says: none of them may stay anywhere after it is forgotten.
ONLY_IN_SESSION_2 = ("paediatric", "landlord", "terrifying", "resistance", "volunteers")


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (not following links) with its bytes."""
    found = {}
    for base, _, files in os.walk(folder, followlinks=False):
        for name in files:
            path = Path(base) / name
            if path.is_file() and not path.is_symlink():
                found[str(path.relative_to(folder))] = path.read_bytes()
    return found


def files_holding(folder: Path, word: str) -> list[str]:
    needles = [word.encode(enc) for enc in ("utf-8", "utf-16-le", "utf-32-le")]
    return sorted(name for name, data in snapshot(folder).items() if any(n in data for n in needles))


def utterance_count(kb: Path) -> int:
    return len(AnchorStore(kb).load(vector_kinds=()).kb.utterances)


@pytest.fixture(scope="module")
def built_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gravity_core.cli import main

    kb = tmp_path_factory.mktemp("sample") / "kb"
    with pytest.raises(SystemExit) as done:
        main(["build", str(SAMPLE), "-o", str(kb), "--embedder", "hashing", "-q"])
        raise SystemExit(0)
    assert not done.value.code
    return kb


@pytest.fixture
def kb(built_sample: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "kb"
    shutil.copytree(built_sample, copy, symlinks=True)
    return copy


# -- 1. a cache folder that is a link --------------------------------------------------------------


@pytest.mark.parametrize("linked", ["cache", "cache/parses"])
def test_a_forget_through_a_linked_cache_deletes_nothing_and_names_the_link(
    kb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], linked: str
) -> None:
    """The cache moved to a bigger disk: the forget refuses before rebuilding, the link's target
    (and a file of the user's next to the cache's) and the KB stay byte for byte."""
    shared = tmp_path / "shared"
    shutil.move(kb / linked, shared)
    (shared / "precious.txt").write_text("my notes")
    (kb / linked).symlink_to(shared, target_is_directory=True)
    target_before, kb_before = snapshot(shared), snapshot(kb)

    line = error_line(["forget", str(kb), "--session", FORGOTTEN, "-q"], capsys)

    assert str(kb / linked) in line and "symbolic link" in line
    assert snapshot(shared) == target_before
    assert snapshot(kb) == kb_before
    assert utterance_count(kb) == 96


def test_a_build_into_a_kb_whose_cache_is_a_link_writes_nothing_through_it(
    kb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = tmp_path / "shared"
    shutil.move(kb / "cache", shared)
    (kb / "cache").symlink_to(shared, target_is_directory=True)
    before = snapshot(shared)
    more = tmp_path / "more.jsonl"
    turn = {"session": "session_9", "speaker": "Maya", "text": "Harbourside hired a new nurse today."}
    more.write_text(json.dumps({**turn, "timestamp": "2024-09-01T10:00:00Z"}) + "\n")

    line = error_line(["build", str(more), "-o", str(kb), "--embedder", "hashing", "-q"], capsys)

    assert str(kb / "cache") in line and "symbolic link" in line
    assert snapshot(shared) == before


# -- 2. an LLM answer cache shared with another KB --------------------------------------------------


def test_a_forget_never_prunes_an_llm_answer_cache_outside_the_kb(tmp_path: Path) -> None:
    """Two KBs share one ResponseCache folder; forgetting a session of one deletes nothing there,
    so the other KB's next build asks the model nothing."""
    shared = tmp_path / "answers"
    utterances = chat()

    def builder(folder: Path, model: FakeChatModel) -> AnchorBuilder:
        extractor = LLMExtractor(model, fused=True, cache=ResponseCache(shared))
        return AnchorBuilder(extractor, EMBEDDER, batch_size=4, store=AnchorStore(folder))

    for name in ("kb1", "kb2"):
        built = builder(tmp_path / name, FakeChatModel(fused_answer))
        for session in ("session_1", "session_2", "session_3"):
            built.add([u for u in utterances if u.session == session])
    (shared / "README.txt").write_text("answers paid for by two KBs")
    before = snapshot(shared)

    report = builder(tmp_path / "kb1", FakeChatModel(fused_answer)).forget(
        ForgetRequest(sessions=("session_2",))
    )

    assert report.forgotten == 4 and report.caches_not_pruned == [shared]
    assert snapshot(shared).items() >= before.items()  # the rebuild may add an answer, never remove one
    again = FakeChatModel(fused_answer)
    rebuilt = builder(tmp_path / "kb2-again", again)
    for session in ("session_1", "session_2", "session_3"):
        rebuilt.add([u for u in utterances if u.session == session])
    assert again.calls == []


def test_the_cli_says_a_cache_outside_the_kb_was_left_as_it_is(tmp_path: Path) -> None:
    from gravity_core.build.forget import ForgetReport
    from gravity_core.cli.forget_cmd import _summary

    report = ForgetReport(forgotten=1, remaining=2, generation=3, caches_not_pruned=[tmp_path / "answers"])
    line = _summary(tmp_path / "kb", report)
    assert f"the cache {tmp_path / 'answers'} is outside the KB folder and was left as it is" in line


# -- 3. speakers are matched exactly -----------------------------------------------------------------


@pytest.fixture
def two_grosses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """Grosse and Große (equal under str.casefold) and the Kelvin sign's twin: three people."""
    rows = []
    for n, (speaker, text) in enumerate(
        [
            ("Grosse", "I moved to Leipzig last spring."),
            ("Große", "My sister Anna teaches chemistry in Dresden."),
            ("Grosse", "The Leipzig flat has a balcony."),
            ("Große", "Anna visited Dresden museums with me."),
            ("\u212aai", "Kai here, I run the bakery on Main Street."),
        ]
    ):
        rows.append(
            {"session": "s1", "speaker": speaker, "text": text, "timestamp": f"2024-05-0{n + 1}T10:00:00Z"}
        )
    source = tmp_path / "grosse.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    kb = tmp_path / "kb"
    run_ok(["build", str(source), "-o", str(kb), "--embedder", "hashing", "-q"], capsys)
    return kb


def speakers_left(kb: Path) -> list[str]:
    return [u.speaker for u in AnchorStore(kb).load(vector_kinds=()).kb.utterances.values()]


def test_forgetting_grosse_keeps_grosse_with_sharp_s(
    two_grosses: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = run_ok(["forget", str(two_grosses), "--speaker", "Grosse"], capsys)

    assert speakers_left(two_grosses) == ["Große", "Große", "\u212aai"]
    plan = err.index("forgetting 2 utterance(s) (speaker 'Grosse': 2)")
    assert plan < err.index("forgot 2 utterance(s)")  # what goes is printed before it goes


def test_a_folded_speaker_name_is_refused_and_the_other_speaker_named(
    two_grosses: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = error_line(["forget", str(two_grosses), "--speaker", "GROSSE"], capsys)
    assert "no speaker 'GROSSE'" in line and "matched exactly" in line and "'Grosse'" in line
    line = error_line(["forget", str(two_grosses), "--speaker", "Kai"], capsys)  # not the Kelvin sign
    assert "no speaker 'Kai'" in line
    assert len(speakers_left(two_grosses)) == 5


def test_dry_run_prints_the_plan_and_changes_nothing(
    two_grosses: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(two_grosses)
    err = run_ok(["forget", str(two_grosses), "--speaker", "Große", "--dry-run"], capsys)
    assert "forgetting 2 utterance(s) (speaker 'Große': 2) (dry run: nothing removed)" in err
    assert snapshot(two_grosses) == before


# -- 4. the generation marker -------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["deleted", "garbled"])
def test_a_damaged_marker_is_reported_and_rollback_restores_it(
    kb: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    markers = sorted(kb.glob(f"g*/{MARKER}"))
    marker = markers[-1]
    if damage == "deleted":
        marker.unlink()
    else:
        marker.write_text('{"not": "a marker"')

    line = error_line(["stats", str(kb)], capsys)
    assert str(marker) in line and "--rollback" in line

    run_ok(["build", "-o", str(kb), "--rollback"], capsys)
    assert marker.is_file()
    assert utterance_count(kb) == 96  # the damaged generation itself, not an older, partial one
    code, _, err = run(["stats", str(kb)], capsys)
    assert code == 0, err


# -- 5. derived files ------------------------------------------------------------------------------


def test_show_then_forget_leaves_no_byte_of_the_forgotten_session(
    kb: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_ok(["show", str(kb)], capsys)
    page = kb / "anchors.html"
    assert all(files_holding(kb, word) for word in ONLY_IN_SESSION_2)
    assert any(page.name in name for name in files_holding(kb, "paediatric"))

    run_ok(["forget", str(kb), "--session", FORGOTTEN, "-q"], capsys)

    assert not page.exists()
    for word in ONLY_IN_SESSION_2:
        assert files_holding(kb, word) == [], word


def test_a_page_written_elsewhere_or_by_the_user_is_not_removed(
    kb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = kb / "anchors.html"
    mine.write_text("<html>my own page</html>")
    elsewhere = tmp_path / "page.html"
    run_ok(["show", str(kb), "-o", str(elsewhere)], capsys)
    run_ok(["forget", str(kb), "--session", FORGOTTEN, "-q"], capsys)
    assert mine.read_text() == "<html>my own page</html>"
    assert elsewhere.exists()  # outside the KB folder: the user's to delete


# -- 11. messages --------------------------------------------------------------------------------------


def test_rollback_names_the_folder_in_the_way_of_the_manifest(
    kb: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = kb / "manifest.json"
    manifest.unlink()
    manifest.mkdir()
    (manifest / "something").write_text("x")

    assert "--rollback" in error_line(["stats", str(kb)], capsys)
    line = error_line(["build", "-o", str(kb), "--rollback"], capsys)
    assert str(manifest) in line and ".tmp" not in line
    assert (manifest / "something").read_text() == "x"


def test_a_forget_run_again_says_it_is_done_and_exits_0(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_ok(["forget", str(kb), "--session", FORGOTTEN, "-q"], capsys)
    before = snapshot(kb)

    err = run_ok(["forget", str(kb), "--session", FORGOTTEN], capsys)

    assert re.search(r"nothing to forget: the KB holds no session 'session_2'.*already forgotten", err), err
    assert snapshot(kb) == before


def test_a_typo_is_still_an_error_when_the_last_save_was_not_a_forget(
    kb: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = error_line(["forget", str(kb), "--session", "session_22"], capsys)
    assert "no session 'session_22'" in line


# -- the whole flow, as a user runs it: each command a process of its own -------------------------


def gravity(*argv: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gravity_core", *argv],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_after_show_and_forget_neither_the_kb_nor_its_chroma_folder_holds_a_byte_of_it(
    kb: Path, tmp_path: Path
) -> None:
    """Byte search (raw, UTF-8/16/32, decompressed streams; vector rows as float32, normalised or
    float16, exact or within rounding) of the KB folder and of the embedded Chroma folder the
    queries synced, after ``gravity show`` and ``gravity forget``."""
    from tests.core.query.test_chroma_forget import forgotten_between, leftovers, rows_of

    chroma = tmp_path / "chroma"
    question = "Where does Maya work?"
    gravity("query", str(kb), question, "--chroma-path", str(chroma))
    gravity("show", str(kb))
    before = AnchorStore(kb).load()
    texts_before = [u.text for u in before.kb.utterances.values()] + all_anchor_texts(before.kb)

    shutil.copytree(chroma, tmp_path / "chroma-before")
    shutil.copytree(kb, tmp_path / "kb-before")

    gravity("forget", str(kb), "--session", FORGOTTEN, "-q")
    gravity("query", str(kb), question, "--chroma-path", str(chroma))

    after = AnchorStore(kb).load()
    texts_after = [u.text for u in after.kb.utterances.values()] + all_anchor_texts(after.kb)
    forgotten = forgotten_between(rows_of(before.vectors), after.vectors, texts_before, texts_after)
    forgotten.strings |= {u for u in before.kb.utterances if u not in after.kb.utterances}
    assert set(ONLY_IN_SESSION_2) <= forgotten.strings and forgotten.rows
    assert leftovers(kb, forgotten) == []
    assert leftovers(chroma, forgotten) == []
    # Not vacuous: the same search finds the forgotten text, ids and rows in the folders before.
    for folder in ("kb-before", "chroma-before"):
        found = leftovers(tmp_path / folder, forgotten)
        assert any("(utf-8)" in f for f in found) and any("rows" in f or "exact" in f for f in found), folder


def all_anchor_texts(kb: KnowledgeBase) -> list[str]:
    return [text for kind in AnchorKind for text in anchor_texts(kb, kind).values()]
