"""JSON extraction from model answers, the bounded re-ask, and the test fakes."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from gravity_core.errors import ConfigurationError, UnexpectedModelOutput
from gravity_core.llm import REASK_TEMPLATE, ChatModel, Message, call_json, extract_json, parse_json_answer
from gravity_core.testing import FakeChatModel, FakeModelError, RecordedModel


class Answer(BaseModel):
    name: str
    count: int


PROMPT: list[Message] = [
    {"role": "system", "content": "You answer in JSON."},
    {"role": "user", "content": "Give me a name and a count."},
]
GOOD = '{"name": "Caroline", "count": 3}'


# -- extract_json ---------------------------------------------------------------------------------


def test_extract_plain_object() -> None:
    assert extract_json(GOOD) == {"name": "Caroline", "count": 3}


def test_extract_from_json_fence() -> None:
    text = 'Here you go:\n```json\n{\n  "name": "Mel",\n  "count": 1\n}\n```\n'
    assert extract_json(text) == {"name": "Mel", "count": 1}


def test_extract_skips_prose_with_braces_before_the_object() -> None:
    text = 'I filled the {schema} as asked. {"name": "Mel", "count": 2} Hope this helps {:}'
    assert extract_json(text) == {"name": "Mel", "count": 2}


def test_extract_tolerates_raw_newline_inside_string() -> None:
    assert extract_json('{"name": "two\nlines", "count": 0}')["name"] == "two\nlines"


def test_truncated_object_is_reported_as_incomplete() -> None:
    with pytest.raises(ValueError, match="incomplete"):
        extract_json('```json\n{"entities": [{"name": "Caroline"}, {"name": "Mel')


def test_truncated_object_does_not_yield_a_nested_object() -> None:
    # The inner {"name": "Caroline", "count": 1} is complete and would validate on its own,
    # but it is only part of an answer that was cut off.
    with pytest.raises(ValueError, match="incomplete"):
        parse_json_answer('{"items": [{"name": "Caroline", "count": 1}, {"name": "Me', Answer)


def test_answer_without_object() -> None:
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json("I cannot help with that.")
    with pytest.raises(ValueError, match="empty"):
        extract_json("   ")


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=60, deadline=None)
@given(
    obj=st.dictionaries(st.text(max_size=8), _json_values, min_size=1, max_size=4),
    before=st.text(alphabet=st.characters(blacklist_characters="{"), max_size=30),
    after=st.text(max_size=30),
    fenced=st.booleans(),
)
def test_extract_roundtrips_any_object_wrapped_in_prose(
    obj: dict[str, object], before: str, after: str, fenced: bool
) -> None:
    body = json.dumps(obj, indent=2)
    if fenced:
        body = f"```json\n{body}\n```"
    assert extract_json(f"{before}\n{body}\n{after}") == obj


def test_parse_reports_schema_errors_by_field() -> None:
    with pytest.raises(ValueError, match=r"count: .*integer"):
        parse_json_answer('{"name": "Mel", "count": "many"}', Answer)


# -- call_json ------------------------------------------------------------------------------------


def test_valid_first_answer_makes_one_call() -> None:
    model = FakeChatModel([f"```json\n{GOOD}\n```"])
    parsed, raw = call_json(model, PROMPT, Answer)
    assert parsed == Answer(name="Caroline", count=3)
    assert raw == f"```json\n{GOOD}\n```"
    assert len(model.calls) == 1
    assert model.calls[0] == PROMPT


def test_reask_succeeds_on_second_attempt(caplog: pytest.LogCaptureFixture) -> None:
    bad = '{"name": "Caroline", "count": "three"}'
    model = FakeChatModel([bad, GOOD])
    with caplog.at_level(logging.WARNING, logger="gravity_core.llm.json_call"):
        parsed, raw = call_json(model, PROMPT, Answer)
    assert parsed.count == 3
    assert raw == GOOD
    assert len(model.calls) == 2
    second = model.calls[1]
    assert second[: len(PROMPT)] == PROMPT
    assert second[len(PROMPT)] == {"role": "assistant", "content": bad}
    reask = second[len(PROMPT) + 1]
    assert reask["role"] == "user"
    assert "count" in reask["content"] and "valid integer" in reask["content"]
    assert reask["content"].startswith(REASK_TEMPLATE.split("{error}")[0])
    assert any("attempt 1 of 3" in r.getMessage() for r in caplog.records)


def test_reask_after_unparseable_answer_states_the_parse_error() -> None:
    model = FakeChatModel(['{"name": "Caroline", "count": 3', GOOD])
    parsed, _ = call_json(model, PROMPT, Answer)
    assert parsed.name == "Caroline"
    assert "incomplete" in model.calls[1][-1]["content"]


def test_exhausted_reasks_raise_with_last_completion() -> None:
    answers = ["not json at all", '{"name": 1}', '{"name": "x", "count": "y"} final']
    model = FakeChatModel(answers)
    with pytest.raises(UnexpectedModelOutput) as info:
        call_json(model, PROMPT, Answer, max_attempts=3)
    assert info.value.last_completion == answers[-1]
    assert info.value.n_attempts == 3
    assert len(model.calls) == 3
    assert "count" in str(info.value)
    # Each re-ask carries the whole conversation so far.
    assert [len(c) for c in model.calls] == [2, 4, 6]


def test_single_attempt_does_not_reask() -> None:
    model = FakeChatModel(["nope"])
    with pytest.raises(UnexpectedModelOutput) as info:
        call_json(model, PROMPT, Answer, max_attempts=1)
    assert info.value.n_attempts == 1
    assert len(model.calls) == 1


def test_max_attempts_below_one_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        call_json(FakeChatModel([GOOD]), PROMPT, Answer, max_attempts=0)


# -- fakes ----------------------------------------------------------------------------------------


def test_fake_model_meets_protocol_and_is_not_collected() -> None:
    model = FakeChatModel([GOOD], model_name="m")
    assert isinstance(model, ChatModel)
    assert model.model_name == "m"
    assert FakeChatModel.__test__ is False
    assert RecordedModel.__test__ is False


def test_fake_model_raises_clearly_when_exhausted() -> None:
    model = FakeChatModel([GOOD])
    model.complete(PROMPT)
    with pytest.raises(FakeModelError, match=r"1 scripted answer.*#2"):
        model.complete(PROMPT)


def test_fake_model_with_function() -> None:
    def answer(messages: Sequence[Message]) -> str:
        return json.dumps({"name": messages[-1]["content"][:4], "count": len(messages)})

    model = FakeChatModel(answer)
    parsed, _ = call_json(model, PROMPT, Answer)
    assert parsed == Answer(name="Give", count=2)


def test_recorded_model_matches_keys_and_replays_lists() -> None:
    model = RecordedModel(
        {
            ("name", "count"): ["first", "second"],
            "weather": "sunny",
        }
    )
    assert model.complete(PROMPT) == "first"
    assert model.complete(PROMPT) == "second"
    assert model.complete([{"role": "user", "content": "the weather?"}]) == "sunny"
    assert model.complete([{"role": "user", "content": "the weather?"}]) == "sunny"
    with pytest.raises(FakeModelError, match="used up"):
        model.complete(PROMPT)
    with pytest.raises(FakeModelError, match="no recorded key"):
        model.complete([{"role": "user", "content": "hello"}])
    with pytest.raises(FakeModelError, match="several keys"):
        model.complete([{"role": "user", "content": "name count weather"}])
    assert len(model.calls) == 7
