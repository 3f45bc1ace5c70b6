"""Numeric timestamps in a ChatMessage's additional_kwargs: a usable Unix time, else an InputDataError (#19).

``1e20``, NaN, the infinities and year 10000 escaped as ``OverflowError`` / ``ValueError``; now
every unusable value (a bool too) is an error naming the message (``messages[i]``), the field and
what was expected.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import InputDataError
from gravity_llamaindex import build_kb_from_chat_messages, utterances_from_chat_messages
from tests.bad_timestamps import BAD_NUMBERS, GOOD_NUMBERS

SAID = datetime(2024, 3, 9, 10, 0, tzinfo=UTC)


def _chat(value: object) -> list[ChatMessage]:
    return [
        ChatMessage(role=MessageRole.SYSTEM, content="You are helpful."),
        ChatMessage(role=MessageRole.USER, content="fine", additional_kwargs={"timestamp": 1710000000}),
        ChatMessage(role=MessageRole.ASSISTANT, content="broken", additional_kwargs={"timestamp": value}),
    ]


@pytest.mark.parametrize("value", BAD_NUMBERS.values(), ids=BAD_NUMBERS.keys())
def test_an_unusable_number_names_the_message_and_field(value: object) -> None:
    with pytest.raises(InputDataError) as raised:
        utterances_from_chat_messages(_chat(value), session="s", default_time=SAID)
    error = raised.value
    assert error.record == "messages[2] (id 's:2')"  # the index counts the system message too
    assert error.field == 'additional_kwargs["timestamp"]'
    message = str(error)
    assert message.startswith("""record messages[2] (id 's:2'), field 'additional_kwargs["timestamp"]': """)
    assert "Unix time in seconds from -62135596800 to 253402300799 (years 1-9999)" in message


def test_the_build_refuses_it_before_writing_anything(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    with pytest.raises(InputDataError, match=r"messages\[2\]"):
        build_kb_from_chat_messages(_chat(float("nan")), kb, embedder=HashingEmbedder(), default_time=SAID)
    assert not kb.exists()


@pytest.mark.parametrize(("value", "expected"), GOOD_NUMBERS.values(), ids=GOOD_NUMBERS.keys())
def test_a_unix_time_in_years_1_to_9999_is_read_in_utc(value: object, expected: datetime) -> None:
    turns = utterances_from_chat_messages(_chat(value), default_time=SAID)
    assert turns[1].timestamp == expected
