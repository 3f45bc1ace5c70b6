"""Conversation loaders: LoCoMo, LongMemEval, plain utterances, auto-detection and bad input."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gravity_core.cli import main
from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.loaders import (
    load_conversation,
    load_locomo,
    load_longmemeval,
    load_utterances,
    locomo_sample_ids,
)
from gravity_core.schema import Utterance

TESTS = Path(__file__).resolve().parents[2]
FIXTURES = TESTS / "fixtures"
REPO = TESTS.parent
LOCOMO = FIXTURES / "locomo_tiny.json"
LONGMEMEVAL = FIXTURES / "longmemeval_tiny.json"
UTTERANCES_JSONL = FIXTURES / "utterances.jsonl"
UTTERANCES_JSON = FIXTURES / "utterances.json"
SAMPLE_CONVERSATION = REPO / "examples" / "sample_conversation.jsonl"
LOCOMO_DEV = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"


def _sessions(utterances: list[Utterance]) -> list[str]:
    """Session ids in order of first appearance."""
    return list(dict.fromkeys(u.session for u in utterances))


def _assert_conversation_order(utterances: list[Utterance]) -> None:
    """Each session is contiguous and sessions start in time order."""
    sessions = _sessions(utterances)
    blocks = [
        session
        for i, session in enumerate(u.session for u in utterances)
        if i == 0 or utterances[i - 1].session != session
    ]
    assert blocks == sessions, "a session is split into several blocks"
    starts = [min(u.timestamp for u in utterances if u.session == s) for s in sessions]
    assert starts == sorted(starts)
    assert all(u.timestamp.tzinfo is not None for u in utterances)


# --- LoCoMo -----------------------------------------------------------------------------------


def test_locomo_one_sample_keeps_dia_ids_and_session_names() -> None:
    utterances = load_locomo(LOCOMO, sample="demo-1")

    assert [u.id for u in utterances] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert [u.session for u in utterances] == ["session_1"] * 3 + ["session_2"] * 2
    assert [u.speaker for u in utterances[:2]] == ["Ada", "Ben"]
    assert utterances[0].text == "Morning Ben! I finally finished the bookshelf."
    assert utterances[0].timestamp == datetime(2023, 3, 2, 9, 15, tzinfo=UTC)
    assert utterances[3].timestamp == datetime(2023, 3, 17, 18, 40, tzinfo=UTC)
    _assert_conversation_order(utterances)


def test_locomo_photo_turn_gets_caption_attachment_and_plain_turns_none() -> None:
    by_id = {u.id: u for u in load_locomo(LOCOMO, sample="demo-1")}

    assert by_id["D2:1"].attachments == ["photo: a photo of a canoe on a calm lake"]
    assert by_id["D2:2"].attachments == []  # an image url without caption gives nothing to read
    assert by_id["D1:1"].attachments == []


def test_locomo_never_reads_annotations_or_qa() -> None:
    utterances = [u for sample in locomo_sample_ids(LOCOMO) for u in load_locomo(LOCOMO, sample)]

    assert not any("ANNOTATION-SENTINEL" in u.full_text() for u in utterances)
    assert not any(u.text == "sage green" for u in utterances)


def test_locomo_sessions_in_time_order_whatever_the_key_order() -> None:
    utterances = load_locomo(LOCOMO, sample="demo-2")  # session_2 is written before session_1

    assert [u.id for u in utterances] == ["D1:1", "D1:2", "D2:1", "D2:2"]
    _assert_conversation_order(utterances)


def test_locomo_file_of_several_samples_needs_one_chosen() -> None:
    # One KB of several LoCoMo conversations mixes unrelated people: no silent merge.
    for load in (load_locomo, load_conversation):
        with pytest.raises(InputDataError) as caught:
            load(LOCOMO)
        message = str(caught.value)
        assert "2 conversations" in message and "available: demo-1, demo-2" in message
        assert str(LOCOMO) in message and caught.value.field == "sample_id"


def test_locomo_file_of_one_sample_loads_without_choosing(tmp_path: Path) -> None:
    one = tmp_path / "one.json"
    one.write_text(json.dumps(json.loads(LOCOMO.read_text(encoding="utf-8"))[:1]), encoding="utf-8")

    utterances = load_locomo(one)

    assert [u.text for u in utterances] == [u.text for u in load_locomo(LOCOMO, "demo-1")]
    assert utterances[0].id == "demo-1/D1:1" and utterances[0].session == "demo-1/session_1"
    assert load_conversation(one) == utterances


def test_locomo_sample_ids_in_file_order() -> None:
    assert locomo_sample_ids(LOCOMO) == ["demo-1", "demo-2"]


def test_locomo_unknown_sample_lists_available_ids() -> None:
    with pytest.raises(InputDataError) as caught:
        load_locomo(LOCOMO, sample="conv-99")

    message = str(caught.value)
    assert "conv-99" in message
    assert "demo-1, demo-2" in message
    assert str(LOCOMO) in message
    assert caught.value.field == "sample_id"


# --- LongMemEval ------------------------------------------------------------------------------


def test_longmemeval_one_instance_sorted_by_session_date() -> None:
    utterances = load_longmemeval(LONGMEMEVAL, question_id="q_001")

    # answer_a1 (20 May) comes before sess_b (22 May) although the file lists it second.
    assert [u.id for u in utterances] == ["answer_a1:1", "answer_a1:2", "answer_a1:3", "sess_b:1", "sess_b:2"]
    assert [u.speaker for u in utterances] == ["user", "assistant", "user", "user", "assistant"]
    assert utterances[0].session == "answer_a1"
    assert utterances[0].text == "My border collie Rex keeps chewing the sofa."
    assert utterances[0].timestamp == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    assert utterances[-1].timestamp == datetime(2023, 5, 22, 18, 30, tzinfo=UTC)
    _assert_conversation_order(utterances)


def test_longmemeval_file_of_several_instances_needs_one_chosen() -> None:
    # Each instance is its own user's history: one KB must not mix them.
    with pytest.raises(InputDataError) as caught:
        load_longmemeval(LONGMEMEVAL)

    assert caught.value.field == "question_id"
    assert "2 LongMemEval instances" in str(caught.value)
    assert "available: q_001, q_002_abs" in str(caught.value)


def test_longmemeval_file_of_one_instance_prefixes_ids_with_its_question_id(tmp_path: Path) -> None:
    one = tmp_path / "one.json"
    one.write_text(json.dumps(json.loads(LONGMEMEVAL.read_text())[1:]))

    utterances = load_longmemeval(one)

    assert [u.id for u in utterances] == ["q_002_abs/sess_b:1", "q_002_abs/sess_b:2"]
    assert _sessions(utterances) == ["q_002_abs/sess_b"]
    assert utterances == load_conversation(one)


def test_longmemeval_session_repeated_word_for_word_is_kept_once_at_its_first_date(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # LongMemEval-S lists a few sessions twice, with the same turns under a later date.
    instance = json.loads(LONGMEMEVAL.read_text())[0]
    first = instance["haystack_session_ids"].index("sess_b")
    instance["haystack_session_ids"].append("sess_b")
    instance["haystack_dates"].append("2023/06/01 (Thu) 10:00")
    instance["haystack_sessions"].append(instance["haystack_sessions"][first])
    path = tmp_path / "repeat.json"
    path.write_text(json.dumps([instance]))

    with caplog.at_level(logging.WARNING, logger="gravity_core.loaders.longmemeval"):
        utterances = load_longmemeval(path)

    # A one-instance file prefixes the ids with its question id.
    assert [u.id for u in utterances] == [
        f"q_001/{u.id}" for u in load_longmemeval(LONGMEMEVAL, question_id="q_001")
    ]
    assert "repeats session 'sess_b'" in caplog.text and "kept once" in caplog.text


def test_longmemeval_unknown_question_lists_available_ids() -> None:
    with pytest.raises(InputDataError) as caught:
        load_longmemeval(LONGMEMEVAL, question_id="q_404")

    assert "q_404" in str(caught.value)
    assert "q_001, q_002_abs" in str(caught.value)


# --- plain utterances -------------------------------------------------------------------------


def test_jsonl_utterances_default_ids_order_and_timestamps() -> None:
    utterances = load_utterances(UTTERANCES_JSONL)

    # s1 starts earlier, so it comes first although s2 opens the file; the blank line is skipped.
    assert [u.id for u in utterances] == ["s1:1", "s1:2", "photo-1", "s2:1", "s2:2"]
    assert [u.session for u in utterances] == ["s1"] * 3 + ["s2"] * 2
    assert utterances[0].timestamp == datetime(2024, 2, 1, tzinfo=UTC)  # a plain date: midnight UTC
    assert utterances[1].timestamp == datetime(2024, 2, 1, 9, 31, tzinfo=UTC)
    assert utterances[3].timestamp == datetime(2024, 2, 10, 7, 0, tzinfo=UTC)  # +01:00 kept as an instant
    assert utterances[3].text == "The new job starts tomorrow!"
    # "3:05 pm on 10 February, 2024", read by gravity_core.temporal.parse_timestamp
    assert utterances[4].timestamp == datetime(2024, 2, 10, 15, 5, tzinfo=UTC)
    assert utterances[2].attachments == ["photo: a grey kitten in a shoebox"]
    assert utterances[0].attachments == []
    _assert_conversation_order(utterances)


def test_json_list_utterances() -> None:
    utterances = load_utterances(str(UTTERANCES_JSON))  # a str path works as well as a Path

    assert [u.id for u in utterances] == ["a:1", "a:2", "b:1"]
    assert [u.speaker for u in utterances] == ["Kim", "Lou", "Kim"]
    assert utterances[2].timestamp == datetime(2024, 5, 14, 19, 0, tzinfo=UTC)


def test_single_line_jsonl_and_utf8_bom_and_crlf(tmp_path: Path) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text('{"session": "s", "speaker": "A", "text": "hi", "timestamp": "2024-01-01"}\n')
    two = tmp_path / "two.jsonl"
    two.write_bytes(
        b'\xef\xbb\xbf{"session": "s", "speaker": "A", "text": "caf\xc3\xa9", "timestamp": "2024-01-01"}\r\n'
        b'{"session": "s", "speaker": "B", "text": "yes", "timestamp": "2024-01-01T10:00:00Z"}\r\n'
    )

    assert [u.id for u in load_utterances(one)] == ["s:1"]
    loaded = load_utterances(two)
    assert [u.text for u in loaded] == ["café", "yes"]


# --- auto-detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "direct"),
    [
        (UTTERANCES_JSONL, load_utterances),
        (UTTERANCES_JSON, load_utterances),
    ],
    # LoCoMo: test_locomo_file_of_one_sample_loads_without_choosing; LongMemEval:
    # test_longmemeval_file_of_one_instance_prefixes_ids_with_its_question_id
    ids=["jsonl", "json"],
)
def test_auto_detect_matches_the_direct_loader(path: Path, direct: Callable[[Path], list[Utterance]]) -> None:
    assert load_conversation(path) == direct(path)


def test_load_conversation_passes_sample_to_the_benchmark_loaders() -> None:
    assert load_conversation(LOCOMO, sample="demo-2") == load_locomo(LOCOMO, sample="demo-2")
    assert load_conversation(LONGMEMEVAL, sample="q_001") == load_longmemeval(LONGMEMEVAL, "q_001")
    assert load_conversation(LOCOMO, sample="demo-2", fmt="locomo")[0].id == "D1:1"


@pytest.mark.parametrize("fmt", ["auto", "utterances"])
def test_sample_on_plain_utterances_is_a_configuration_error(fmt: Any) -> None:
    with pytest.raises(ConfigurationError, match="no samples"):
        load_conversation(UTTERANCES_JSONL, sample="s1", fmt=fmt)


def test_unknown_format_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="unknown conversation format 'csv'"):
        load_conversation(UTTERANCES_JSONL, fmt="csv")  # type: ignore[arg-type]


def test_forced_format_that_does_not_fit_is_an_input_error() -> None:
    with pytest.raises(InputDataError) as caught:
        load_conversation(LOCOMO, fmt="longmemeval")

    assert caught.value.field == "question_id"
    assert caught.value.record == "item 1"


# --- bad input --------------------------------------------------------------------------------

_GOOD = {"session": "s1", "speaker": "A", "text": "hello", "timestamp": "2024-01-01T10:00:00Z"}


def _jsonl(*records: dict[str, Any]) -> bytes:
    return "\n".join(json.dumps(r) for r in records).encode()


def _without(record: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != key}


def _locomo(turns: Any, date: Any = "1:56 pm on 8 May, 2023", **extra: Any) -> bytes:
    conversation: dict[str, Any] = {"speaker_a": "A", "speaker_b": "B", "session_1": turns, **extra}
    if date is not None:
        conversation["session_1_date_time"] = date
    return json.dumps([{"sample_id": "x-1", "conversation": conversation}], indent=1).encode()


def _lme(**overrides: Any) -> bytes:
    instance: dict[str, Any] = {
        "question_id": "q1",
        "haystack_session_ids": ["s1"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21"],
        "haystack_sessions": [[{"role": "user", "content": "hi"}]],
        **overrides,
    }
    return json.dumps([instance]).encode()


_TURN = {"speaker": "A", "dia_id": "D1:1", "text": "hi"}

# (case id, file name, content (None: a directory), expected record, expected field)
BAD_INPUTS: list[tuple[str, str, bytes | None, str | None, str | None]] = [
    ("missing field", "c.jsonl", _jsonl(_GOOD, _without(_GOOD, "speaker")), "line 2", "speaker"),
    ("missing timestamp", "c.jsonl", _jsonl(_without(_GOOD, "timestamp")), "line 1", "timestamp"),
    ("wrong type", "c.jsonl", _jsonl({**_GOOD, "text": 42}), "line 1", "text"),
    ("empty speaker", "c.jsonl", _jsonl(_GOOD, {**_GOOD, "speaker": " "}), "line 2", "speaker"),
    ("attachment not text", "c.jsonl", _jsonl({**_GOOD, "attachments": [3]}), "line 1", "attachments[0]"),
    (
        "bad timestamp",
        "c.json",
        json.dumps([_GOOD, {**_GOOD, "timestamp": "2024-13-45T10:00"}]).encode(),
        "item 2",
        "timestamp",
    ),
    ("timestamp not text", "c.jsonl", _jsonl({**_GOOD, "timestamp": 1704103200}), "line 1", "timestamp"),
    ("item not an object", "c.json", b"[7]", "item 1", None),
    ("invalid JSON", "c.json", b'[\n {"session": "s1",\n  "speaker": "A" "text": "x"}\n]', "line 3", None),
    ("invalid JSON line", "c.jsonl", _jsonl(_GOOD) + b'\n{"session": "s1", oops}\n', "line 2", None),
    ("not UTF-8", "c.jsonl", _jsonl(_GOOD) + b'\n{"session": "s1", "text": "caf\xe9"}', "line 2", None),
    ("empty file", "c.jsonl", b"", None, None),
    ("blank file", "c.jsonl", b" \n\n  \n", None, None),
    ("empty list", "c.json", b"[]", None, None),
    ("a directory", "dir.jsonl", None, None, None),
    ("duplicate ids", "c.jsonl", _jsonl({**_GOOD, "id": "u1"}, {**_GOOD, "id": "u1"}), "line 2", "id"),
    ("duplicate default ids", "c.jsonl", _jsonl({**_GOOD, "id": "s1:2"}, _GOOD), "line 2", "id"),
    (
        "locomo missing dia_id",
        "l.json",
        _locomo([_TURN, _without(_TURN, "dia_id")]),
        "x-1 session_1 turn 2",
        "dia_id",
    ),
    (
        "locomo wrong turn type",
        "l.json",
        _locomo([_TURN, {**_TURN, "text": ["x"]}]),
        "x-1 session_1 turn 2",
        "text",
    ),
    ("locomo session not a list", "l.json", _locomo({"D1:1": "hi"}), "x-1 session_1", "session_1"),
    (
        "locomo bad date",
        "l.json",
        _locomo([_TURN], date="sometime in spring-ish"),
        "x-1 session_1",
        "session_1_date_time",
    ),
    ("locomo missing date", "l.json", _locomo([_TURN], date=None), "x-1 session_1", "session_1_date_time"),
    ("locomo duplicate dia_id", "l.json", _locomo([_TURN, _TURN]), "x-1 session_1 turn 2", "dia_id"),
    (
        "locomo no sessions",
        "l.json",
        json.dumps([{"sample_id": "x-1", "conversation": {}}]).encode(),
        "x-1",
        "conversation",
    ),
    ("locomo no sample_id", "l.json", json.dumps([{"conversation": {}}]).encode(), "item 1", "sample_id"),
    (
        "lme bad role",
        "m.json",
        _lme(haystack_sessions=[[{"role": "system", "content": "x"}]]),
        "q1 session s1 turn 1",
        "role",
    ),
    (
        "lme missing content",
        "m.json",
        _lme(haystack_sessions=[[{"role": "user"}]]),
        "q1 session s1 turn 1",
        "content",
    ),
    ("lme dates mismatch", "m.json", _lme(haystack_dates=[]), "q1", "haystack_dates"),
    ("lme bad date", "m.json", _lme(haystack_dates=["2023/02/30 (Thu) 10:00"]), "q1", "haystack_dates[0]"),
    ("lme session not a list", "m.json", _lme(haystack_sessions=["hi"]), "q1", "haystack_sessions[0]"),
    (
        "lme duplicate session ids with other turns",
        "m.json",
        _lme(
            haystack_session_ids=["s1", "s1"],
            haystack_dates=["2023/05/20 (Sat) 02:21"] * 2,
            haystack_sessions=[[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]],
        ),
        "q1",
        "haystack_session_ids[1]",
    ),
]


@pytest.mark.parametrize(
    ("name", "content", "record", "field"),
    [(f, c, r, fl) for _, f, c, r, fl in BAD_INPUTS],
    ids=[case[0] for case in BAD_INPUTS],
)
def test_bad_input_names_file_record_and_field(
    tmp_path: Path, name: str, content: bytes | None, record: str | None, field: str | None
) -> None:
    path = tmp_path / name
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)

    with pytest.raises(InputDataError) as caught:
        load_conversation(path)

    error = caught.value
    message = str(error)
    assert error.path == str(path)
    assert str(path) in message
    assert error.record == record
    if record is not None:
        assert f"record {record}" in message
    assert error.field == field
    if field is not None:
        assert f"field '{field}'" in message


def test_syntax_and_encoding_errors_say_where_and_chain_the_cause(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_bytes(b'[\n {"a": 1,}\n]')
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"text": "caf\xe9"}')

    with pytest.raises(InputDataError, match=r"invalid JSON: .* \(line 2, column 10\)") as syntax:
        load_utterances(broken)
    with pytest.raises(InputDataError, match="not UTF-8") as encoding:
        load_utterances(latin)

    assert isinstance(syntax.value.__cause__, json.JSONDecodeError)
    assert isinstance(encoding.value.__cause__, UnicodeDecodeError)


@pytest.mark.parametrize(
    "loader",
    [load_conversation, load_locomo, load_longmemeval, load_utterances, locomo_sample_ids],
    ids=["conversation", "locomo", "longmemeval", "utterances", "sample_ids"],
)
def test_missing_file_is_an_input_error(tmp_path: Path, loader: Callable[[Path], object]) -> None:
    missing = tmp_path / "nope.json"

    with pytest.raises(InputDataError, match="no such file") as caught:
        loader(missing)

    assert caught.value.path == str(missing)


def test_utterance_file_is_not_a_locomo_file() -> None:
    with pytest.raises(InputDataError) as caught:
        load_locomo(UTTERANCES_JSON)

    assert caught.value.field == "sample_id"
    assert caught.value.record == "item 1"


# --- the shipped example ----------------------------------------------------------------------


def test_sample_conversation_is_a_rich_demo_input() -> None:
    utterances = load_conversation(SAMPLE_CONVERSATION)
    sessions = _sessions(utterances)
    text = " ".join(u.full_text() for u in utterances)

    assert sessions == [f"session_{n}" for n in range(1, 7)]
    assert all(12 <= sum(u.session == s for u in utterances) <= 20 for s in sessions)
    assert {u.speaker for u in utterances} == {"Maya", "Jonas"}
    assert all(u.timestamp.utcoffset() is not None and u.timestamp.year == 2024 for u in utterances)
    assert (utterances[-1].timestamp - utterances[0].timestamp).days >= 140
    assert len({u.timestamp.time() for u in utterances}) > 50  # real times of day, not just dates
    _assert_conversation_order(utterances)
    assert [u.attachments for u in utterances if u.attachments] == [["photo: a dog on a beach at sunset"]]
    for cue in (
        "sister Lena",
        "Biscuit",
        "Northwind",
        "nurse",
        "Leeds",
        "Bristol",
        "I love pottery",
        "yesterday",
        "last weekend",
        "two weeks ago",
        "next month",
        "in March",
        "last year",
        "Half Marathon",
    ):
        assert cue in text, cue
    # the move is a state change across sessions: Leeds first, Bristol as home later
    first = " ".join(u.text for u in utterances if u.session == "session_1")
    later = " ".join(u.text for u in utterances if u.session == "session_4")
    assert "Leeds" in first and "Bristol! I'm officially a resident" in later


# --- the real LoCoMo data, read from ../shared (never copied) ---------------------------------


@pytest.mark.skipif(not LOCOMO_DEV.is_file(), reason="LoCoMo dev data not present at ../shared/data/locomo")
def test_real_locomo_conv26() -> None:
    utterances = load_locomo(LOCOMO_DEV, sample="conv-26")
    sessions = _sessions(utterances)

    assert len(sessions) == 19
    assert sessions[0] == "session_1"
    assert utterances[0].id == "D1:1"
    assert all(re.fullmatch(r"D\d+:\d+", u.id) for u in utterances)
    assert 300 < len(utterances) < 600
    assert len({u.id for u in utterances}) == len(utterances)
    assert {u.speaker for u in utterances} == {"Caroline", "Melanie"}
    assert utterances[0].timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert sum(bool(u.attachments) for u in utterances) > 10
    assert all(a.startswith("photo: ") for u in utterances for a in u.attachments)
    _assert_conversation_order(utterances)
    assert "conv-26" in locomo_sample_ids(LOCOMO_DEV)


EMPTY_CONVERSATIONS = {
    "locomo-empty-sessions": [
        {
            "sample_id": "x",
            "conversation": {
                "speaker_a": "A",
                "speaker_b": "B",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [],
            },
            "qa": [],
        }
    ],
    "longmemeval-empty-haystack": [
        {
            "question_id": "q1",
            "question_type": "single-session-user",
            "question": "?",
            "answer": "!",
            "question_date": "2023/05/20 (Sat) 02:21",
            "haystack_session_ids": [],
            "haystack_dates": [],
            "haystack_sessions": [],
            "answer_session_ids": [],
        }
    ],
}


@pytest.mark.parametrize("name", sorted(EMPTY_CONVERSATIONS))
def test_a_conversation_without_utterances_is_refused(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It used to build an empty KB and exit 0."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(EMPTY_CONVERSATIONS[name]))
    with pytest.raises(InputDataError, match=r"holds no utterance"):
        load_conversation(path)
    with pytest.raises(SystemExit) as exit_info:
        main(["build", str(path), "-o", str(tmp_path / "kb")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and err.count("\n") == 1 and str(path) in err
    assert not (tmp_path / "kb").exists()
