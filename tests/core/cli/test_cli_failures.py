"""Issue #16: every ``gravity`` failure is one line and exit 1, and a failed build leaves no folder.

Also the command's own surface: ``--version``, ``-h`` beside ``--help``, one metavar vocabulary,
and ``query --json`` naming an anchor's kind ``"kind"``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import gravity_core
from gravity_core.cli import main
from gravity_core.llm.retry import as_provider_error, missing_key_variable

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "examples" / "sample_conversation.jsonl"
LOCOMO = REPO / "tests" / "fixtures" / "locomo_tiny.json"  # two samples: demo-1, demo-2
LONGMEMEVAL = REPO / "tests" / "fixtures" / "longmemeval_tiny.json"  # two instances: q_001, q_002_abs
TURN = {"speaker": "Maya", "text": "I'm a nurse now.", "session": "s1", "timestamp": "2024-01-08T10:00:00Z"}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
        raise SystemExit(0)
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out, out.err


def one_line(code: int, err: str, *needles: str) -> str:
    """Exit 1 and exactly one ``gravity: error:`` line on stderr, holding every needle."""
    assert code == 1, err
    assert err.count("\n") == 1 and err.startswith("gravity: error: "), err
    for needle in needles:
        assert needle in err, (needle, err)
    return err.strip()


def gravity_process(
    *argv: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gravity_core", *argv], capture_output=True, text=True, cwd=cwd, env=env
    )


# -- the command's surface --------------------------------------------------------------------------


def test_version_is_the_packages(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--version"], capsys)
    assert (code, out, err) == (0, f"gravity {gravity_core.__version__}\n", "")
    # One source: pyproject reads gravity_core.__version__ (hatch), so the installed metadata agrees.
    assert version("gravity-memory") == gravity_core.__version__


COMMANDS = [
    [],
    ["build"],
    ["stats"],
    ["query"],
    ["show"],
    ["sgmem"],
    ["sgmem", "build"],
    ["sgmem", "query"],
    ["eval"],
    ["eval", "locomo"],
    ["eval", "longmemeval"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "gravity")
def test_dash_h_is_help_on_every_command(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, short, _ = run([*command, "-h"], capsys)
    assert code == 0 and short.startswith(f"Usage: {' '.join(['gravity', *command])} ")
    assert run([*command, "--help"], capsys)[:2] == (0, short)
    assert "-h, --help" in short


USAGES = {
    "build": "gravity build [OPTIONS] [INPUT]",
    "stats": "gravity stats [OPTIONS] {KB_DIR}",
    "query": "gravity query [OPTIONS] {KB_DIR} {QUESTION}",
    "show": "gravity show [OPTIONS] {KB_DIR}",
    "sgmem build": "gravity sgmem build [OPTIONS] {INPUT}",
    "sgmem query": "gravity sgmem query [OPTIONS] {SGMEM_DIR} {QUESTION}",
    "eval locomo": "gravity eval locomo [OPTIONS] {FILE}",
    "eval longmemeval": "gravity eval longmemeval [OPTIONS] {FILE}",
}


@pytest.mark.parametrize("command", sorted(USAGES))
def test_usage_metavars_are_one_vocabulary(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run([*command.split(), "-h"], capsys)
    assert out.splitlines()[0] == f"Usage: {USAGES[command]}"
    options = re.findall(r"^  (?:-\w, )?(--[\w-]+)(?: ([^\s]+))?", out, re.M)
    metavars = {name: metavar for name, metavar in options}
    # Values are named, never typed (<str>, <int range>), and the same value has the same name.
    assert not re.search(r"<(str|int|float|path)", out.split("Options:")[1]), out
    for name, expected in {
        "--output": {"build": "KB_DIR", "sgmem build": "SGMEM_DIR", "show": "FILE"}.get(command, "DIR"),
        "--model": "PROVIDER:NAME",
        "--sample": "ID",
        "--embedder": "NAME",
        "--batch-size": "N",
    }.items():
        if name in metavars:
            assert metavars[name] == expected, (command, name, metavars[name])


def test_bare_gravity_prints_its_help_as_it_is(tmp_path: Path) -> None:
    result = gravity_process(cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("Usage: gravity [OPTIONS] COMMAND [ARGS]...\n")
    assert "\nCommands:\n" in result.stderr and "gravity: error" not in result.stderr


# -- model and provider set-up ------------------------------------------------------------------------


def test_a_missing_api_key_is_one_line_before_anything_is_read_or_made(tmp_path: Path) -> None:
    pytest.importorskip("langchain_openai")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY")}
    result = gravity_process(
        "build", str(SAMPLE), "-o", "kbx", "--extractor", "llm", "--model", "openai:gpt-4o-mini",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    line = one_line(result.returncode, result.stderr)
    assert line == (
        "gravity: error: openai:gpt-4o-mini: cannot create the model: no API key: "
        "set the OPENAI_API_KEY environment variable"
    )
    assert "Traceback" not in result.stderr and not (tmp_path / "kbx").exists()
    # The key is checked first: a missing input file is not even looked at.
    missing = gravity_process(
        "build", "nope.jsonl", "-o", "kbx", "--extractor", "llm", "--model", "openai:gpt-4o-mini",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert "no API key" in missing.stderr and not (tmp_path / "kbx").exists()


def test_missing_key_messages_of_provider_sdks_are_recognised() -> None:
    new_openai = (
        "Missing credentials. Please pass an `api_key`, `workload_identity`, `admin_api_key`, or set the "
        "`OPENAI_API_KEY` or `OPENAI_ADMIN_KEY` environment variable."
    )
    old_openai = (
        "The api_key client option must be set either by passing api_key to the client or by setting "
        "the OPENAI_API_KEY environment variable"
    )
    for message in (new_openai, old_openai):
        assert missing_key_variable(RuntimeError(message)) == "OPENAI_API_KEY"
        error = as_provider_error(RuntimeError(message), "openai:x", doing="cannot create the model")
        assert (
            str(error)
            == "openai:x: cannot create the model: no API key: set the OPENAI_API_KEY environment variable"
        )
        assert error.retryable is False
    # A key that was sent and refused is not a missing one.
    assert (
        missing_key_variable(RuntimeError("Incorrect API key provided: sk-...; check OPENAI_API_KEY")) is None
    )

    class Refused(Exception):
        status_code = 401

    refused = as_provider_error(Refused("OPENAI_API_KEY is not set"), "openai:x")
    assert "refused the API key" in str(refused)


@pytest.mark.parametrize(
    ("model", "needle"),
    [
        ("nope:x", "unknown model provider 'nope' (known: "),
        ("openai", "is not of the form provider:model"),
        ("recorded:/no/such/answers.json", "cannot read recorded answers"),
    ],
)
def test_a_bad_model_is_one_line_and_makes_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, needle: str
) -> None:
    kb = tmp_path / "new" / "kb"
    argv = [
        "build",
        str(SAMPLE),
        "-o",
        str(kb),
        "--extractor",
        "llm",
        "--model",
        model,
        "--embedder",
        "hashing",
    ]
    code, _, err = run(argv, capsys)
    one_line(code, err, needle)
    assert not (tmp_path / "new").exists()


def _conversation(tmp_path: Path) -> Path:
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(TURN) + "\n")
    return path


def _recording(path: Path, *tasks: str) -> Path:
    answers = {"EntityExtraction": {"entities": []}, "EventExtraction": {"events": []}}
    answers |= {"TopicExtraction": {"topics": []}}
    path.write_text(
        json.dumps([{"match": [task, "[s1:1]"], "answer": json.dumps(answers[task])} for task in tasks])
    )
    return path


def test_a_first_build_that_fails_removes_its_folder_unless_it_holds_paid_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    convo = _conversation(tmp_path)
    base = ["build", str(convo), "--extractor", "llm", "--modules", "--max-concurrency", "1"]
    base += ["--embedder", "hashing", "-q"]
    # No answer at all: nothing was paid for, so nothing stays (nor the parent folders it made).
    nothing = _recording(tmp_path / "none.json")
    code, _, err = run([*base, "-o", str(tmp_path / "a" / "kb"), "--model", f"recorded:{nothing}"], capsys)
    one_line(code, err, "no recorded key matches")
    assert not (tmp_path / "a").exists()
    # One module answered, the next failed: the folder keeps that answer and no KB...
    kb = tmp_path / "kb"
    partial = _recording(tmp_path / "partial.json", "EntityExtraction")
    code, _, err = run([*base, "-o", str(kb), "--model", f"recorded:{partial}"], capsys)
    one_line(code, err, "no recorded key matches")
    assert not (kb / "manifest.json").exists() and list((kb / "cache").rglob("*.json"))
    # ...and a rerun builds on it (the entity answer comes from the cache: the recording lacks it).
    _recording(partial, "EventExtraction", "TopicExtraction")
    code, _, err = run([*base, "-o", str(kb), "--model", f"recorded:{partial}"], capsys)
    assert code == 0, err
    assert (kb / "manifest.json").is_file()


# -- outputs and inputs ----------------------------------------------------------------------------------


def test_an_output_that_is_a_file_is_one_line_naming_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    for argv, what in (
        (["build", str(SAMPLE), "-o", str(target), "--embedder", "hashing"], "KB"),
        (["sgmem", "build", str(SAMPLE), "-o", str(target), "--embedder", "hashing"], "SGMem"),
    ):
        code, _, err = run(argv, capsys)
        one_line(code, err, f"{target}: is not a folder; -o names the {what} folder to create or extend")
    assert target.read_text() == "mine"


@pytest.mark.parametrize("command", ["build", "sgmem build"])
def test_a_locomo_file_of_several_conversations_needs_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    out = tmp_path / "kb"
    code, _, err = run([*command.split(), str(LOCOMO), "-o", str(out), "--embedder", "hashing"], capsys)
    one_line(code, err, "2 conversations", "available: demo-1, demo-2", "--sample ID")
    assert not out.exists()
    code, _, err = run(
        [*command.split(), str(LOCOMO), "-o", str(out), "--sample", "demo-2", "--embedder", "hashing", "-q"],
        capsys,
    )
    assert code == 0, err


@pytest.mark.parametrize("command", ["build", "sgmem build"])
def test_a_longmemeval_file_of_several_instances_needs_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    out = tmp_path / "kb"
    argv = [*command.split(), str(LONGMEMEVAL), "-o", str(out), "--embedder", "hashing"]
    code, _, err = run(argv, capsys)
    one_line(code, err, "2 LongMemEval instances", "available: q_001, q_002_abs", "--sample ID")
    assert not out.exists()
    code, _, err = run([*argv, "--sample", "q_001", "-q"], capsys)
    assert code == 0, err


@pytest.mark.parametrize(
    "argv",
    [
        ["stats", "{dir}"],
        ["query", "{dir}", "where?"],
        ["show", "{dir}"],
        ["sgmem", "query", "{dir}", "where?"],
    ],
    ids=["stats", "query", "show", "sgmem query"],
)
def test_a_missing_folder_is_no_such_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    missing = tmp_path / "nosuchdir"
    code, _, err = run([a.replace("{dir}", str(missing)) for a in argv], capsys)
    assert one_line(code, err) == f"gravity: error: {missing}: no such folder"
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run([a.replace("{dir}", str(empty)) for a in argv], capsys)
    one_line(code, err, f"{empty / 'manifest.json'}: no ", "here (manifest.json missing)")


def test_query_json_names_the_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb = tmp_path / "kb"
    assert run(["build", str(SAMPLE), "-o", str(kb), "--embedder", "hashing", "-q"], capsys)[0] == 0
    code, out, err = run(["query", str(kb), "Where does Maya work now?", "--json"], capsys)
    assert code == 0, err
    anchors = json.loads(out)["anchors"]
    assert anchors and all("type" not in a and a["kind"] in {"entity", "event", "topic"} for a in anchors)
