"""``gravity forget KB_DIR``: what it forgets, that the result is a build without it, one-line errors."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gravity_core.cli import main
from gravity_core.schema import KnowledgeBase
from gravity_core.storage.store import AnchorStore

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "examples" / "sample_conversation.jsonl"
#: The first turns of three sessions of the sample (30 turns, two speakers): entities with sources
#: in several sessions, events and topics, and a build in about half a second.
SESSIONS = ("session_1", "session_2", "session_3")
TURNS_PER_SESSION = 10
FORGOTTEN = "session_2"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out, out.err


def run_ok(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, _, err = run(argv, capsys)
    assert code == 0, err
    return err


def error_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a failing command writes on stderr (exit code 1)."""
    code, _, err = run(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1, err
    assert lines[0].startswith("gravity: error: ")
    return lines[0]


def write_conversation(path: Path, skip_session: str | None = None) -> Path:
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    taken: Counter[str] = Counter()
    kept = []
    for row in rows:
        if row["session"] in SESSIONS and taken[row["session"]] < TURNS_PER_SESSION:
            taken[row["session"]] += 1
            if row["session"] != skip_session:
                kept.append(row)
    path.write_text("".join(json.dumps(r) + "\n" for r in kept))
    return path


def stored(kb_dir: Path) -> KnowledgeBase:
    return AnchorStore(kb_dir).load().kb


@pytest.fixture(scope="module", autouse=True)
def one_pipeline(nlp: Any) -> Iterator[None]:
    """Every command of this module parses with the session's spaCy pipeline: loading it is most
    of the time of a small build (the commands still make their own offline extractor)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("gravity_core.extract.offline.load_pipeline", lambda name=None: nlp)
        yield


@pytest.fixture(scope="module")
def built(one_pipeline: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A KB of :data:`SESSIONS`; tests that change it work on a copy (:func:`kb_copy`)."""
    folder = tmp_path_factory.mktemp("built")
    convo = write_conversation(folder / "convo.jsonl")
    kb = folder / "kb"
    assert main_ok(["build", str(convo), "-o", str(kb), "--embedder", "hashing", "-q"])
    return kb


def main_ok(argv: list[str]) -> bool:
    """Run a command outside a test's capsys (for module fixtures)."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
        raise SystemExit(0)
    return not exit_info.value.code


@pytest.fixture
def kb_copy(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "kb"
    shutil.copytree(built, copy)
    return copy


@pytest.fixture(scope="module")
def session_forgotten(built: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A copy of the KB after ``gravity forget --session session_2``, and what the command said."""
    kb = tmp_path_factory.mktemp("forgotten") / "kb"
    shutil.copytree(built, kb)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main_ok(["forget", str(kb), "--session", FORGOTTEN])
    return kb, err.getvalue()


def test_forget_session_removes_its_utterances_and_keeps_one_generation(
    built: Path, session_forgotten: tuple[Path, str]
) -> None:
    before = stored(built)
    named = [u.id for u in before.utterances.values() if u.session == FORGOTTEN]
    assert named, "the fixture conversation must hold the session"
    kb_dir, err = session_forgotten
    after = stored(kb_dir)
    assert not [u for u in after.utterances.values() if u.session == FORGOTTEN]
    assert len(after.utterances) == len(before.utterances) - len(named)
    assert f"{kb_dir}: forgot {len(named)} utterance(s) ({len(after.utterances)} remain); " in err
    assert f"entities {len(before.entities)} -> {len(after.entities)}" in err
    assert f"events {len(before.events)} -> {len(after.events)}" in err
    generations = AnchorStore(kb_dir).generations()
    assert len(generations) == 1
    assert f"generation {generations[0]} (earlier generations deleted)" in err
    for anchors in (after.entities, after.events, after.topics):
        for anchor in anchors.values():
            assert not set(anchor.sources) & set(named), anchor


def test_forget_equals_a_build_without_the_session(
    session_forgotten: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    convo = write_conversation(tmp_path / "without.jsonl", skip_session=FORGOTTEN)
    rebuilt = tmp_path / "kb"
    run_ok(["build", str(convo), "-o", str(rebuilt), "--embedder", "hashing", "-q"], capsys)
    forgotten, expected = AnchorStore(session_forgotten[0]).load(), AnchorStore(rebuilt).load()
    assert forgotten.kb.events and forgotten.kb.topics, "the comparison must cover every kind"
    assert forgotten.kb.to_dict() == expected.kb.to_dict()
    # The vectors too: those the forget reused from the old KB are those a build computes.
    assert forgotten.vectors.kinds.keys() == expected.vectors.kinds.keys()
    for kind, vectors in expected.vectors.kinds.items():
        mine = forgotten.vectors.kinds[kind]
        assert (mine.ids, mine.digests) == (vectors.ids, vectors.digests), kind
        np.testing.assert_allclose(mine.matrix, vectors.matrix, atol=1e-6, err_msg=kind)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--speaker", "Jonas"], lambda u: u.speaker == "Jonas"),
        (
            ["--utterance", "session_1:2", "--utterance", "session_3:5"],
            lambda u: u.id in {"session_1:2", "session_3:5"},
        ),
        (["--before", "2024-02-04"], lambda u: u.timestamp < datetime(2024, 2, 4, tzinfo=UTC)),
        (
            ["--before", "2024-01-14T19:08:00+00:00"],
            lambda u: u.timestamp < datetime(2024, 1, 14, 19, 8, tzinfo=UTC),
        ),
    ],
    ids=["speaker", "utterances", "before-date", "before-datetime"],
)
def test_each_flag_forgets_what_it_names(
    kb_copy: Path, flags: list[str], named: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert callable(named)
    before = stored(kb_copy)
    expected = [u.id for u in before.utterances.values() if not named(u)]
    assert 0 < len(expected) < len(before.utterances), "the flag must name some but not all turns"
    err = run_ok(["forget", str(kb_copy), *flags, "-q"], capsys)
    assert err == ""  # --quiet
    assert list(stored(kb_copy).utterances) == expected


def test_nothing_left_to_forget_leaves_the_kb_alone(
    kb_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generation = AnchorStore(kb_copy).current_generation()
    err = run_ok(["forget", str(kb_copy), "--before", "2020-01-01"], capsys)
    assert "nothing to forget" in err and "the KB is unchanged" in err
    assert AnchorStore(kb_copy).current_generation() == generation


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--session", "nope"], "no session 'nope' in this KB; it holds: session_1, session_2, session_3"),
        (["--speaker", "Nobody"], "no speaker 'Nobody' in this KB"),
        ([], "--utterance, --session, --speaker or --before"),
        (["--before", "notadate"], "--before 'notadate': expected an ISO date"),
        (["--before", "2024-02-04T10:00"], "--before '2024-02-04T10:00' has no timezone"),
        (["--session", FORGOTTEN, "--embedder", "hashing:64"], "embedded with 'hashing-256'"),
        (["--session", FORGOTTEN, "--model", "recorded:x.json"], "--model is for --extractor llm"),
    ],
    ids=[
        "unknown-session",
        "unknown-speaker",
        "nothing-named",
        "bad-before",
        "naive-before",
        "embedder",
        "model",
    ],
)
def test_bad_request_is_one_line_and_changes_nothing(
    built: Path, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    stamp = AnchorStore(built).stamp()
    line = error_line(["forget", str(built), *flags], capsys)
    assert message in line
    assert AnchorStore(built).stamp() == stamp


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_kb_dir_without_a_kb(tmp_path: Path, make: str, capsys: pytest.CaptureFixture[str]) -> None:
    kb_dir = tmp_path / "kb"
    if make == "empty":
        kb_dir.mkdir()
    line = error_line(["forget", str(kb_dir), "--session", "s1"], capsys)
    assert "KB_DIR holds no KB" in line
    assert make == "empty" or not kb_dir.exists()


def test_rollback_cannot_bring_the_session_back(
    session_forgotten: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb_dir = tmp_path / "kb"
    shutil.copytree(session_forgotten[0], kb_dir)
    generation = AnchorStore(kb_dir).current_generation()
    line = error_line(["build", "-o", str(kb_dir), "--rollback"], capsys)
    why = f"(generation {generation} is a forget's: the generations before it were deleted)"
    assert f"no earlier generation loads {why}" in line
    assert AnchorStore(kb_dir).current_generation() == generation
    assert FORGOTTEN not in stored(kb_dir).sessions()


def _fused_answer(name: str, source: str, attribute: str, value: str) -> str:
    entity = {
        "name": name,
        "type": "person",
        "is_speaker": True,
        "sources": [source],
        "attributes": [{"name": attribute, "value": value, "exclusive": True, "sources": [source]}],
    }
    return json.dumps({"entities": [entity], "events": [], "topics": []})


@pytest.fixture
def llm_kb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    """A KB the recorded model built from two one-turn sessions, and its ``--model``."""
    convo = tmp_path / "c.jsonl"
    rows = [
        {"speaker": "Maya", "text": "I'm a nurse now.", "session": "s1", "timestamp": "2024-01-08T10:00:00Z"},
        {
            "speaker": "Jonas",
            "text": "I moved to Lisbon.",
            "session": "s2",
            "timestamp": "2024-02-08T10:00:00Z",
        },
    ]
    convo.write_text("".join(json.dumps(r) + "\n" for r in rows))
    answers = tmp_path / "answers.json"
    answers.write_text(
        json.dumps(
            [
                {
                    "match": ["FusedExtraction", "[s1:1]"],
                    "answer": _fused_answer("Maya", "s1:1", "job", "nurse"),
                },
                {
                    "match": ["FusedExtraction", "[s2:1]"],
                    "answer": _fused_answer("Jonas", "s2:1", "city", "Lisbon"),
                },
            ]
        )
    )
    kb = tmp_path / "kb"
    model = f"recorded:{answers}"
    argv = [
        "build",
        str(convo),
        "-o",
        str(kb),
        "--extractor",
        "llm",
        "--model",
        model,
        "--embedder",
        "hashing",
        # One batch per session: the answers are recorded per session (the fused default of 40
        # turns would put both one-turn sessions in one batch).
        "--batch-size",
        "1",
    ]
    run_ok([*argv, "-q"], capsys)
    return kb, model


def test_llm_kb_needs_its_model_and_drops_the_forgotten_answers(
    llm_kb: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    kb_dir, model = llm_kb
    line = error_line(["forget", str(kb_dir), "--session", "s2"], capsys)
    assert f"forget with --extractor llm --model {model}" in line
    assert "s2" in stored(kb_dir).sessions()
    cached = sorted(p for p in AnchorStore(kb_dir).cache_dir.rglob("*") if p.is_file())
    assert len(cached) == 2
    err = run_ok(["forget", str(kb_dir), "--session", "s2", "--extractor", "llm", "--model", model], capsys)
    assert "forgot 1 utterance(s) (1 remain); entities 2 -> 1" in err
    assert "1 cached file(s) of the old build removed" in err
    kb = stored(kb_dir)
    assert list(kb.utterances) == ["s1:1"] and [e.name for e in kb.entities.values()] == ["Maya"]
    assert len([p for p in AnchorStore(kb_dir).cache_dir.rglob("*") if p.is_file()]) == 1
