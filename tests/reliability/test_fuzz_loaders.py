"""Malformed input: the loaders, fuzzed, let only GravityErrors out, and the CLI says so in one line.

Property, for every generated file: a loader returns valid utterances (unique ids, aware timestamps,
text that can be written as UTF-8 JSON) or raises :class:`~gravity_core.errors.InputDataError` /
:class:`~gravity_core.errors.ConfigurationError` whose message names the file. Nothing else
(``KeyError``, ``TypeError``, ``UnicodeDecodeError``, ``RecursionError``, ``ValueError`` ...) escapes.

The generated files: arbitrary JSON values; LoCoMo, LongMemEval and utterance records with fields
removed, mistyped, duplicated, made huge or given lone surrogates; valid files re-encoded (UTF-16,
UTF-32, Latin-1), truncated or with bytes flipped; binary garbage; deep nesting and huge numbers;
other formats (CSV, YAML, XML, gzip, .npy). Each test runs a fixed, derandomized campaign; the
``slow`` tests run a larger one. ``pytest --hypothesis-show-statistics`` shows the cases tried and
how each family split between loaded and rejected.
"""

from __future__ import annotations

import copy
import gzip
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gravity_core.cli import main
from gravity_core.errors import ConfigurationError, GravityError, InputDataError
from gravity_core.loaders import (
    load_conversation,
    load_locomo,
    load_longmemeval,
    load_utterances,
    locomo_sample_ids,
)
from gravity_core.schema import Utterance

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOCOMO = json.loads((FIXTURES / "locomo_tiny.json").read_text(encoding="utf-8"))
LONGMEMEVAL = json.loads((FIXTURES / "longmemeval_tiny.json").read_text(encoding="utf-8"))
UTTERANCES = json.loads((FIXTURES / "utterances.json").read_text(encoding="utf-8"))

FAST_EXAMPLES = 200
SLOW_EXAMPLES = 1500


def campaign(examples: int) -> settings:
    """A fixed campaign: derandomized (same cases every run), no deadline, ``examples`` cases."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
            HealthCheck.filter_too_much,
        ],
    )


# ----- strategies -------------------------------------------------------------------------------------

# Strings that matter to the loaders: timestamps of every accepted form and broken ones, ids,
# blanks, lone surrogates (valid in JSON, not in UTF-8), line and paragraph separators.
TRICKY_STRINGS = st.sampled_from(
    [
        "",
        " ",
        "\u2028",
        "\x85",
        "\ud800",
        "a\udfffb",
        "\x00",
        "2024-03-09T16:45:00Z",
        "2024-03-09",
        "0001-01-01T00:00:00+05:00",
        "9999-12-31T23:59:59-05:00",
        "1:56 pm on 8 May, 2023",
        "1:56 pm on 31 February, 2023",
        "25:99 pm on 8 May, 99999",
        "2023/05/20 (Sat) 02:21",
        "2023/13/45 (Sat) 99:99",
        "yesterday",
        "9" * 5000,
        "D1:1",
        "session_1",
        "user",
        "assistant",
        "../../etc/passwd",
    ]
)
TEXT = st.one_of(st.text(max_size=40), TRICKY_STRINGS)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(TEXT, children, max_size=5),
    max_leaves=25,
)

JsonPath = tuple[Any, ...]


def _paths(value: Any, prefix: JsonPath = ()) -> list[JsonPath]:
    """Every position in a JSON tree (the root is ``()``)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(_paths(child, (*prefix, index)))
    return found


def _mutate(document: Any, data: st.DataObject) -> Any:
    """One random change at a random position: delete, retype, replace, enlarge, duplicate, rename."""
    path = data.draw(st.sampled_from(_paths(document)), label="path")
    if not path:
        return data.draw(JSON_VALUES, label="new root")
    *parents, last = path
    parent = document
    for step in parents:
        parent = parent[step]
    current = parent[last]
    action = data.draw(
        st.sampled_from(["delete", "replace", "retype", "huge", "duplicate", "rename"]), label="action"
    )
    if action == "delete":
        del parent[last]
    elif action == "replace":
        parent[last] = data.draw(st.one_of(TRICKY_STRINGS, JSON_VALUES), label="value")
    elif action == "retype":
        retyped = {str: 7, int: "7", float: "7.5", bool: "true", list: {"0": current}, dict: [current]}
        parent[last] = retyped.get(type(current), "null")
    elif action == "huge":
        size = data.draw(st.sampled_from([10_000, 300_000]), label="size")
        parent[last] = data.draw(st.sampled_from(["x", "é", "\u2028", "<", " "]), label="char") * size
    elif action == "duplicate" and isinstance(parent, list):
        parent.insert(last, copy.deepcopy(current))
    elif action == "rename" and isinstance(parent, dict):
        parent[data.draw(TEXT, label="new key")] = parent.pop(last)
    else:
        parent[last] = None
    return document


def _mutants(template: Any, family: str) -> st.SearchStrategy[tuple[str, str, bytes]]:
    @st.composite
    def build(draw: st.DrawFn) -> tuple[str, str, bytes]:
        document = copy.deepcopy(template)
        data = draw(st.data())
        for _ in range(draw(st.integers(0, 3), label="mutations")):
            document = _mutate(document, data)
        as_lines = isinstance(document, list) and draw(st.booleans(), label="jsonl")
        if as_lines:
            text = "\n".join(json.dumps(item, ensure_ascii=False) for item in document)
        else:
            text = json.dumps(document, ensure_ascii=draw(st.booleans(), label="ascii"))
        return family, ".jsonl" if as_lines else ".json", text.encode("utf-8", "surrogatepass")

    return build()


@st.composite
def _arbitrary_json(draw: st.DrawFn) -> tuple[str, str, bytes]:
    value = draw(JSON_VALUES)
    if isinstance(value, list) and value and draw(st.booleans()):
        text = "\n".join(json.dumps(item, ensure_ascii=False) for item in value)
        return "json", ".jsonl", text.encode("utf-8", "surrogatepass")
    return "json", ".json", json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


_VALID = {
    "locomo": json.dumps(LOCOMO, ensure_ascii=False),
    "longmemeval": json.dumps(LONGMEMEVAL, ensure_ascii=False),
    "utterances": json.dumps(UTTERANCES + [{**UTTERANCES[0], "id": "u-é", "text": "café ☕ — ok"}]),
}


@st.composite
def _bad_bytes(draw: st.DrawFn) -> tuple[str, str, bytes]:
    """Valid files re-encoded, truncated or corrupted; binary garbage; empty files."""
    text = _VALID[draw(st.sampled_from(sorted(_VALID)))]
    how = draw(
        st.sampled_from(
            ["utf-16", "utf-16-le", "utf-32", "latin-1", "bom-only", "truncate", "flip", "garbage", "blank"]
        )
    )
    if how in ("utf-16", "utf-16-le", "utf-32"):
        data = text.encode(how)
    elif how == "latin-1":
        data = text.encode("latin-1", "replace")
    elif how == "bom-only":
        data = draw(st.sampled_from([b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf  \n"]))
    elif how == "truncate":
        raw = text.encode("utf-8")
        data = raw[: draw(st.integers(0, len(raw) - 1))]
    elif how == "flip":
        raw = bytearray(text.encode("utf-8"))
        for _ in range(draw(st.integers(1, 4))):
            raw[draw(st.integers(0, len(raw) - 1))] = draw(st.integers(0, 255))
        data = bytes(raw)
    elif how == "garbage":
        data = draw(st.binary(max_size=300))
    else:
        data = draw(st.sampled_from([b"", b"\n\n", b"   \t", b"\r\n"]))
    return f"bytes:{how}", draw(st.sampled_from([".json", ".jsonl", ".txt"])), data


@st.composite
def _extremes(draw: st.DrawFn) -> tuple[str, str, bytes]:
    """Nesting deeper than the parser's recursion limit, numbers too long for int(), huge files."""
    kind = draw(st.sampled_from(["deep-list", "deep-object", "long-int", "huge-text", "many-lines"]))
    if kind == "deep-list":
        depth = draw(st.integers(500, 100_000))
        text = "[" * depth + "]" * depth
    elif kind == "deep-object":
        depth = draw(st.integers(500, 20_000))
        text = '{"a":' * depth + "1" + "}" * depth
    elif kind == "long-int":
        digits = draw(st.integers(4000, 20_000))
        text = json.dumps([{**UTTERANCES[0], "session": 1}])[:-2] + ', "n": ' + "7" * digits + "}]"
    elif kind == "huge-text":
        text = json.dumps([{**UTTERANCES[0], "text": "word " * 400_000}])
    else:
        text = "\n".join(json.dumps({**UTTERANCES[0], "id": f"u{n}"}) for n in range(20_000))
    return f"extreme:{kind}", ".json", text.encode("utf-8")


OTHER_FORMATS = {
    "csv": b"speaker,text,session,timestamp\nMaya,hi,s1,2024-01-01\n",
    "yaml": b"- speaker: Maya\n  text: hi\n  session: s1\n  timestamp: 2024-01-01\n",
    "xml": b"<?xml version='1.0'?><conversation><turn speaker='Maya'>hi</turn></conversation>",
    "gzip": gzip.compress(_VALID["utterances"].encode("utf-8")),
    "npy": b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" + b" " * 40,
    "python-literal": b"[{'speaker': 'Maya', 'text': 'hi', 'session': 's1', 'timestamp': '2024-01-01'}]",
    "markdown": b"# Conversation\n\n- Maya: hi\n",
    "kb-manifest": b'{"schema_version": 3, "generation": 1, "counts": {}}',
    "nan": b'[{"speaker": "Maya", "text": NaN, "session": "s1", "timestamp": Infinity}]',
}


@st.composite
def _other_formats(draw: st.DrawFn) -> tuple[str, str, bytes]:
    name = draw(st.sampled_from(sorted(OTHER_FORMATS)))
    return f"format:{name}", draw(st.sampled_from([".json", ".jsonl", ".csv"])), OTHER_FORMATS[name]


MALFORMED = st.one_of(
    _arbitrary_json(),
    _mutants(LOCOMO, "locomo"),
    _mutants(LONGMEMEVAL, "longmemeval"),
    _mutants(UTTERANCES, "utterances"),
    _bad_bytes(),
    _extremes(),
    _other_formats(),
)

LOADERS: dict[str, Callable[..., object]] = {
    "auto": load_conversation,
    "locomo": load_locomo,
    "longmemeval": load_longmemeval,
    "utterances": load_utterances,
    "sample_ids": locomo_sample_ids,
}
CALLS = st.tuples(
    st.sampled_from(sorted(LOADERS)),
    st.one_of(st.none(), st.sampled_from(["demo-1", "q_001", "s1"]), st.text(max_size=8)),
)


# ----- the property -----------------------------------------------------------------------------------


def _check_utterances(result: object) -> None:
    if isinstance(result, list) and result and isinstance(result[0], str):
        return  # locomo_sample_ids
    assert isinstance(result, list)
    assert all(isinstance(u, Utterance) for u in result)
    assert len({u.id for u in result}) == len(result)
    assert all(u.timestamp.tzinfo is not None for u in result)
    # What a build writes: must serialize as UTF-8 JSON.
    json.dumps([u.model_dump(mode="json") for u in result], ensure_ascii=False).encode("utf-8")


def load_case(path: Path, loader: str, sample: str | None) -> tuple[str, BaseException | None]:
    """Run one loader on ``path``; returns ``("loaded" | "rejected", the GravityError or None)``.

    Any exception that is not a GravityError propagates: that is the failure the fuzzer looks for.
    """
    function = LOADERS[loader]
    try:
        if loader == "auto":
            result = function(path, sample=sample)
        elif loader in ("locomo", "longmemeval"):
            result = function(path, sample)
        else:
            result = function(path)
    except GravityError as exc:
        assert isinstance(exc, InputDataError | ConfigurationError), repr(exc)
        message = str(exc)
        assert str(path) in message, message
        assert message.strip() and len(message) < 5000, message[:300]
        if isinstance(exc, InputDataError):
            assert exc.path == str(path)
        return "rejected", exc
    _check_utterances(result)
    return "loaded", None


def run_case(
    tmp_path: Path, case: tuple[str, str, bytes], call: tuple[str, str | None], seen: Counter[str]
) -> None:
    family, suffix, data = case
    path = tmp_path / f"conversation{suffix}"
    path.write_bytes(data)
    outcome, _ = load_case(path, *call)
    group = family.split(":")[0]
    event(f"{group}: {outcome}")
    seen[f"{group}: {outcome}"] += 1


def assert_both_outcomes(seen: Counter[str], *, every_family: bool) -> None:
    """The campaign reached the loaders' success path and their error paths.

    Every main family must have been rejected somewhere; loaded too with ``every_family`` (the long
    campaign), else in at least one family (the short one draws few unbroken files).
    """
    families = ("locomo", "longmemeval", "utterances")
    for group in families:
        assert seen[f"{group}: rejected"] > 0, seen
    loaded = [group for group in families if seen[f"{group}: loaded"] > 0]
    if every_family:
        assert loaded == list(families), seen
    else:
        assert loaded, seen
    assert seen["bytes: rejected"] > 0 and seen["json: rejected"] > 0, seen


def test_fuzzed_files_load_or_raise_a_gravity_error(tmp_path: Path) -> None:
    seen: Counter[str] = Counter()

    @campaign(FAST_EXAMPLES)
    @given(case=MALFORMED, call=CALLS)
    def fuzz(case: tuple[str, str, bytes], call: tuple[str, str | None]) -> None:
        run_case(tmp_path, case, call, seen)

    fuzz()
    assert sum(seen.values()) >= FAST_EXAMPLES
    assert_both_outcomes(seen, every_family=False)


@pytest.mark.slow
def test_fuzzed_files_load_or_raise_a_gravity_error_long_campaign(tmp_path: Path) -> None:
    seen: Counter[str] = Counter()

    @campaign(SLOW_EXAMPLES)
    @given(case=MALFORMED, call=CALLS)
    def fuzz(case: tuple[str, str, bytes], call: tuple[str, str | None]) -> None:
        run_case(tmp_path, case, call, seen)

    fuzz()
    assert sum(seen.values()) >= SLOW_EXAMPLES
    assert_both_outcomes(seen, every_family=True)


# ----- valid input survives: any text round-trips ---------------------------------------------------

VALID_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=60)


@campaign(FAST_EXAMPLES)
@given(
    texts=st.lists(VALID_TEXT, min_size=1, max_size=6),
    speakers=st.lists(VALID_TEXT.filter(str.strip), min_size=1, max_size=3),
    ascii_only=st.booleans(),
    lines=st.booleans(),
)
def test_any_valid_text_round_trips_through_json_and_jsonl(
    tmp_path: Path, texts: list[str], speakers: list[str], ascii_only: bool, lines: bool
) -> None:
    records = [
        {
            "speaker": speakers[i % len(speakers)],
            "text": text,
            "session": "s1",
            "timestamp": f"2024-03-{i + 1:02d}T10:00:00Z",
        }
        for i, text in enumerate(texts)
    ]
    path = tmp_path / ("c.jsonl" if lines else "c.json")
    if lines:
        path.write_text("\n".join(json.dumps(r, ensure_ascii=ascii_only) for r in records), encoding="utf-8")
    else:
        path.write_text(json.dumps(records, ensure_ascii=ascii_only), encoding="utf-8")
    loaded = load_conversation(path)
    assert [(u.speaker, u.text) for u in loaded] == [(r["speaker"], r["text"]) for r in records]


# ----- targeted regressions (each was an escape before the loaders were fixed) ------------------------

UTTERANCE = {"speaker": "Maya", "text": "hi", "session": "s1", "timestamp": "2024-01-01T10:00:00Z"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
        ('{"a":' * 3000 + "1" + "}" * 3000, "nested too deeply"),
        (json.dumps([UTTERANCE])[:-2] + ', "n": ' + "1" * 5000 + "}]", "4300 digits"),
        (json.dumps([{**UTTERANCE, "text": "\ud800"}]), "field 'text': invalid Unicode: lone surrogate"),
        (
            json.dumps([{**UTTERANCE, "timestamp": "0001-01-01T00:00:00+05:00"}]),
            "out of the representable range",
        ),
        (
            json.dumps(
                [
                    {
                        "sample_id": "x",
                        "conversation": {
                            "session_" + "9" * 5000: [{"speaker": "A", "dia_id": "D", "text": "t"}]
                        },
                    }
                ]
            ),
            "session_9999",
        ),
        (
            json.dumps(
                [
                    {
                        "question_id": "q",
                        "haystack_session_ids": ["\udc00"],
                        "haystack_dates": ["2023/05/20 (Sat) 02:21"],
                        "haystack_sessions": [[]],
                    }
                ]
            ),
            "field 'haystack_session_ids[0]': invalid Unicode",
        ),
    ],
    ids=[
        "deep-list",
        "deep-object",
        "long-int",
        "surrogate",
        "tz-overflow",
        "locomo-huge-session",
        "lme-surrogate",
    ],
)
def test_former_escapes_are_input_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content.encode("utf-8", "surrogatepass"))
    with pytest.raises(InputDataError, match="file .*bad.json") as error:
        load_conversation(path)
    assert message in str(error.value)


def test_locomo_sessions_with_huge_numbers_sort_by_value(tmp_path: Path) -> None:
    turn = {"speaker": "A", "dia_id": "D{n}", "text": "t"}
    conversation: dict[str, Any] = {}
    for key in ("session_" + "1" + "0" * 5000, "session_10", "session_9", "session_0009"):
        conversation[key] = [{**turn, "dia_id": f"D-{key[-4:]}-{len(key)}"}]
        conversation[f"{key}_date_time"] = "1:56 pm on 8 May, 2023"
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([{"sample_id": "x", "conversation": conversation}]), encoding="utf-8")
    sessions = [u.session for u in load_locomo(path, "x")]
    assert sessions == ["session_9", "session_0009", "session_10", "session_1" + "0" * 5000]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"])
def test_utf16_and_utf32_files_are_read(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "c.json"
    path.write_bytes(json.dumps([{**UTTERANCE, "text": "café ☕"}], ensure_ascii=False).encode(encoding))
    assert [u.text for u in load_conversation(path)] == ["café ☕"]


def test_jsonl_text_may_hold_unicode_line_separators(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    texts = ["a\u2028b", "c\x85d", "e\u2029f\x1dg"]
    path.write_text(
        "\n".join(json.dumps({**UTTERANCE, "text": t}, ensure_ascii=False) for t in texts), encoding="utf-8"
    )
    assert [u.text for u in load_conversation(path)] == texts


# ----- the CLI: exit code 1 and one line --------------------------------------------------------------

CLI_CASES = {
    "binary": b"\x00\x01\x02\xff\xfe garbage",
    "latin-1": '[{"speaker": "Zoë"}]'.encode("latin-1"),
    "deep": b"[" * 5000 + b"]" * 5000,
    "surrogate": json.dumps([{**UTTERANCE, "text": "\ud800"}]).encode(),
    "missing-field": json.dumps([{"speaker": "Maya", "text": "hi", "session": "s1"}]).encode(),
    "mistyped": json.dumps([{**UTTERANCE, "speaker": ["Maya"]}]).encode(),
    "empty": b"",
    "csv": OTHER_FORMATS["csv"],
    "locomo-no-date": json.dumps(
        [{"sample_id": "x", "conversation": {"session_1": [{"speaker": "A", "dia_id": "D1", "text": "t"}]}}]
    ).encode(),
}


@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_cli_build_of_a_malformed_file_fails_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    source = tmp_path / f"{name}.json"
    source.write_bytes(CLI_CASES[name])
    kb = tmp_path / "kb"
    with pytest.raises(SystemExit) as exit_info:
        main(["build", str(source), "-o", str(kb), "--embedder", "hashing", "--quiet"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gravity: error: file ") and str(source) in lines[0]
    assert not (kb / "manifest.json").exists()  # nothing half-built


@pytest.mark.parametrize("name", ["binary", "surrogate"])
def test_cli_process_exits_non_zero_with_one_line(tmp_path: Path, name: str) -> None:
    source = tmp_path / f"{name}.json"
    source.write_bytes(CLI_CASES[name])
    result = subprocess.run(
        [sys.executable, "-m", "gravity_core", "build", str(source), "-o", str(tmp_path / "kb")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gravity: error:"), result.stderr
    assert "Traceback" not in result.stderr
