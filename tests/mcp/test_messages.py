"""The remember tool's messages as utterances: the one message adapter's rules, the tool's own defaults."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from gravity_core.errors import ConfigurationError, InputDataError
from gravity_mcp.messages import DEFAULT_REMEMBER_SESSION, MemoryMessage, utterances_from_memory_messages

NOW = datetime(2024, 6, 9, 8, 30, tzinfo=UTC)


def message(**fields: object) -> MemoryMessage:
    return MemoryMessage.model_validate(fields)


def test_speaker_session_and_time_default_as_documented() -> None:
    (user, bot, maya) = utterances_from_memory_messages(
        [
            message(content="My sister is visiting."),
            message(role="assistant", content="Say hi to Lena!"),
            message(speaker="Maya", role="ai", content="Hi!", session="s9", timestamp="2024-03-09T18:30:00Z"),
        ],
        now=NOW,
    )
    assert (user.speaker, user.session, user.timestamp) == ("User", DEFAULT_REMEMBER_SESSION, NOW)
    assert (bot.speaker, bot.text) == ("Assistant", "Say hi to Lena!")
    assert (maya.speaker, maya.session, maya.timestamp) == (
        "Maya",
        "s9",
        datetime(2024, 3, 9, 18, 30, tzinfo=UTC),
    )


def test_a_unix_time_is_read_as_seconds() -> None:
    (turn,) = utterances_from_memory_messages([message(content="hi", timestamp=1710009000)], now=NOW)
    assert turn.timestamp == datetime(2024, 3, 9, 18, 30, tzinfo=UTC)


def test_ids_are_stable_for_the_same_message_and_distinct_for_others() -> None:
    said = message(speaker="Maya", content="Biscuit ate my sock.", timestamp="2024-06-01T10:00:00Z")
    first = utterances_from_memory_messages([said], now=NOW)[0].id
    assert first.startswith("mcp-") and len(first) == len("mcp-") + 16
    # Another call, another clock: a message with its own time keeps its id.
    assert utterances_from_memory_messages([said], now=datetime(2025, 1, 1, tzinfo=UTC))[0].id == first
    others = [
        said.model_copy(update={"content": "Biscuit ate my other sock."}),
        said.model_copy(update={"speaker": "Jonas"}),
        said.model_copy(update={"session": "s2"}),
        said.model_copy(update={"timestamp": "2024-06-02T10:00:00Z"}),
    ]
    ids = [u.id for u in utterances_from_memory_messages(others, now=NOW)]
    assert len(set(ids)) == 4 and first not in ids
    # Two calls of one message each never share the adapter's "<session>:1" id.
    one = utterances_from_memory_messages([message(content="first")], now=NOW)[0].id
    two = utterances_from_memory_messages([message(content="second")], now=NOW)[0].id
    assert one != two


def test_a_given_id_is_kept_and_a_blank_one_counts_as_none() -> None:
    kept, blank = utterances_from_memory_messages(
        [message(content="a", id="turn-7"), message(content="b", id="  ")], now=NOW
    )
    assert kept.id == "turn-7" and blank.id.startswith("mcp-")


def test_system_tool_and_empty_messages_are_skipped_by_the_adapter() -> None:
    kept = utterances_from_memory_messages(
        [
            message(role="system", content="You are helpful."),
            message(role="tool", content="{}"),
            message(content="   "),
            message(role="human", content="Hello"),
        ],
        now=NOW,
    )
    assert [(u.speaker, u.text) for u in kept] == [("User", "Hello")]


def test_an_unreadable_field_names_the_message_and_the_field() -> None:
    with pytest.raises(InputDataError) as caught:
        utterances_from_memory_messages(
            [message(content="ok"), message(content="x", timestamp="whenever")], now=NOW
        )
    assert "messages[1]" in str(caught.value) and caught.value.field == 'message["timestamp"]'


def test_a_blank_speaker_or_session_counts_as_not_given() -> None:
    (turn,) = utterances_from_memory_messages([message(content="x", speaker=" ", session="\n")], now=NOW)
    assert (turn.speaker, turn.session) == ("User", DEFAULT_REMEMBER_SESSION)


def test_the_message_schema_is_strict() -> None:
    for bad in (
        {"text": "hi"},
        {"content": 3},
        {"content": "hi", "timestamp": True},
        {"content": "hi", "x": 1},
    ):
        with pytest.raises(ValidationError):
            MemoryMessage.model_validate(bad)


def test_now_must_carry_a_time_zone() -> None:
    with pytest.raises(ConfigurationError, match="aware"):
        utterances_from_memory_messages([message(content="hi")], now=datetime(2024, 6, 9))
