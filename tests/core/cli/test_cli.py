"""The ``gravity`` command: build, stats, idempotent rebuild, the LLM path, one-line errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gravity_core.cli import main

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "examples" / "sample_conversation.jsonl"
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out, out.err


def stats(kb: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, int]:
    code, out, _ = run(["stats", str(kb), "--json"], capsys)
    assert code == 0
    return json.loads(out)


def test_build_sample_then_stats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb = tmp_path / "kb"
    code, _, err = run(["build", str(SAMPLE), "-o", str(kb), "--embedder", "hashing"], capsys)
    assert code == 0, err
    assert "+96 utterances" in err
    counts = stats(kb, capsys)
    for key in ("entities", "events", "topics", "utterances", "events_with_date", "max_topic_sessions"):
        assert key in counts
    assert counts["utterances"] == 96 and counts["speakers"] == 2
    assert counts["entities"] > 2 and counts["events"] > 10 and counts["topics"] > 0
    code, _, err = run(["build", str(SAMPLE), "-o", str(kb), "--embedder", "hashing"], capsys)
    assert code == 0 and "+0 utterances (96 already in the KB)" in err
    assert stats(kb, capsys) == counts


def test_a_build_into_a_kb_saves_a_delta_unless_asked_for_full_generations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    five = tmp_path / "five.jsonl"
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    five.write_text("\n".join(x for x in lines if json.loads(x)["session"] != "session_6") + "\n")
    for folder, flags in (("delta", []), ("full", ["--full-generations"])):
        kb = tmp_path / folder
        for source in (five, SAMPLE):
            code, _, err = run(["build", str(source), "-o", str(kb), "--embedder", "hashing", *flags], capsys)
            assert code == 0, err
    assert json.loads((tmp_path / "delta" / "g000002" / "delta.json").read_text())["base"] == 1
    assert not list((tmp_path / "full" / "g000002").glob("base-*"))
    assert stats(tmp_path / "delta", capsys) == stats(tmp_path / "full", capsys)


def test_default_embedder_builds_the_readme_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb = tmp_path / "kb"
    code, _, err = run(["build", str(SAMPLE), "-o", str(kb)], capsys)
    assert code == 0, err
    manifest = json.loads((kb / "manifest.json").read_text())
    assert manifest["embedder"] == "minilm-l6-v2-int8"
    counts = stats(kb, capsys)
    assert counts["max_topic_sessions"] >= 2


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not beside the repo")
def test_build_locomo_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb = tmp_path / "kb"
    code, _, err = run(
        ["build", str(LOCOMO), "--sample", "conv-26", "-o", str(kb), "--embedder", "hashing"], capsys
    )
    assert code == 0, err
    counts = stats(kb, capsys)
    assert counts["utterances"] == 419 and counts["sessions"] == 19
    assert counts["events_with_date"] > counts["events"] / 2


def _recorded_answers(path: Path) -> None:
    entities = {
        "entities": [
            {
                "name": "Maya",
                "type": "person",
                "is_speaker": True,
                "sources": ["s1:1"],
                "attributes": [
                    {"name": "occupation", "value": "nurse", "exclusive": True, "sources": ["s1:1"]}
                ],
            }
        ],
        "events": [],
        "topics": [],
    }
    path.write_text(json.dumps([{"match": ["FusedExtraction", "[s1:1]"], "answer": json.dumps(entities)}]))


def test_llm_extractor_path_caches_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    convo = tmp_path / "c.jsonl"
    convo.write_text(
        json.dumps(
            {
                "speaker": "Maya",
                "text": "I'm a nurse now.",
                "session": "s1",
                "timestamp": "2024-01-08T10:00:00Z",
            }
        )
        + "\n"
    )
    answers = tmp_path / "answers.json"
    _recorded_answers(answers)
    kb = tmp_path / "kb"
    argv = [
        "build",
        str(convo),
        "-o",
        str(kb),
        "--extractor",
        "llm",
        "--model",
        f"recorded:{answers}",
        "--embedder",
        "hashing",
    ]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    loaded = json.loads(next(kb.glob("g*/entities.json")).read_text())
    assert loaded["maya"]["attributes"][0]["value"] == "nurse"
    # A build from scratch into the same folder (KB removed, cache kept) answers from the cache.
    (kb / "manifest.json").unlink()
    for generation in kb.glob("g0*"):
        shutil.rmtree(generation)
    answers.write_text("[]")
    code, _, err = run(argv, capsys)
    assert code == 0, err
    assert (
        json.loads(next(iter(sorted(kb.glob("g*/entities.json")))).read_text())["maya"]["attributes"][0][
            "value"
        ]
        == "nurse"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["build", "missing.jsonl", "-o", "{tmp}/kb"], "missing.jsonl"),
        (["build", str(SAMPLE), "-o", "{tmp}/kb", "--sample", "x"], "sample"),
        (["build", str(SAMPLE), "-o", "{tmp}/kb", "--extractor", "llm"], "--model"),
        (
            ["build", str(SAMPLE), "-o", "{tmp}/kb", "--extractor", "llm", "--model", "nope:x"],
            "unknown model provider 'nope'",
        ),
        (["build", str(SAMPLE), "-o", "{tmp}/kb", "--batch-size", "0"], "batch-size"),
        (["build", str(SAMPLE), "-o", "{tmp}/kb", "--embedder", "word2vec"], "unknown embedder"),
        (["stats", "{tmp}"], "manifest.json"),
        (["frobnicate"], "No such command"),
    ],
)
def test_bad_input_exits_non_zero_with_one_line(tmp_path: Path, argv: list[str], message: str) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    result = subprocess.run(
        [sys.executable, "-m", "gravity_core", *args], capture_output=True, text=True, cwd=tmp_path
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gravity: error:") and message in lines[0]
    assert "Traceback" not in result.stderr
