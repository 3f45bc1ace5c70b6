"""Numeric timestamps in LangChain message metadata: a usable Unix time, else an InputDataError (#19).

``1e20``, NaN, the infinities and year 10000 escaped as ``OverflowError`` / ``ValueError``; now
every unusable value (a bool too) is an error naming the message (``messages[i]``), the field and
what was expected.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from gravity_core.errors import InputDataError
from gravity_langchain import utterances_from_messages
from tests.bad_timestamps import BAD_NUMBERS, GOOD_NUMBERS

DAY = datetime(2024, 3, 9, 16, 45, tzinfo=UTC)


@pytest.mark.parametrize("value", BAD_NUMBERS.values(), ids=BAD_NUMBERS.keys())
def test_an_unusable_number_in_additional_kwargs_names_the_message_and_field(value: object) -> None:
    messages = [
        HumanMessage("fine", additional_kwargs={"timestamp": 1710000000}),
        AIMessage("fine too"),
        HumanMessage("broken", id="m3", additional_kwargs={"timestamp": value}),
    ]
    with pytest.raises(InputDataError) as raised:
        utterances_from_messages(messages, default_time=DAY)
    error = raised.value
    assert error.record == "messages[2] (id 'm3')"
    assert error.field == 'additional_kwargs["timestamp"]'
    message = str(error)
    assert message.startswith("""record messages[2] (id 'm3'), field 'additional_kwargs["timestamp"]': """)
    assert "Unix time in seconds from -62135596800 to 253402300799 (years 1-9999)" in message


@pytest.mark.parametrize("key", ["timestamp", "time", "created_at"])
def test_the_field_named_is_the_one_read(key: str) -> None:
    message = AIMessage("hi", response_metadata={key: float("inf")})
    with pytest.raises(InputDataError) as raised:
        utterances_from_messages([message], default_time=DAY)
    assert raised.value.field == f'response_metadata["{key}"]'
    assert raised.value.record == "messages[0] (id 'session_1:1')"


@pytest.mark.parametrize(("value", "expected"), GOOD_NUMBERS.values(), ids=GOOD_NUMBERS.keys())
def test_a_unix_time_in_years_1_to_9999_is_read_in_utc(value: object, expected: datetime) -> None:
    [utterance] = utterances_from_messages([HumanMessage("x", additional_kwargs={"timestamp": value})])
    assert utterance.timestamp == expected


def test_a_datetime_with_no_utc_equivalent_is_an_input_error() -> None:
    value = datetime.fromisoformat("0001-01-01T00:00:00+05:00")
    with pytest.raises(InputDataError, match="out of the representable range"):
        utterances_from_messages([HumanMessage("x", additional_kwargs={"timestamp": value})])
