"""LangChain messages -> utterances, and a KB built and extended from them."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_langchain import build_kb_from_messages, utterances_from_messages

DAY = datetime(2024, 3, 9, 16, 45, tzinfo=UTC)


def test_speaker_comes_from_the_name_else_the_role() -> None:
    messages = [
        SystemMessage("You are a helpful assistant."),
        HumanMessage("I adopted a dog!", name="Maya"),
        AIMessage("Congratulations!"),
        HumanMessage("Thanks"),
        ToolMessage("tool output", tool_call_id="t1"),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": "t2"}]),
    ]
    utterances = utterances_from_messages(messages, default_time=DAY)
    assert [(u.speaker, u.text) for u in utterances] == [
        ("Maya", "I adopted a dog!"),
        ("Assistant", "Congratulations!"),
        ("User", "Thanks"),
    ]
    renamed = utterances_from_messages(
        messages, default_time=DAY, speakers={"user": "Maya", "assistant": "Bot", "system": "Sys"}
    )
    assert [u.speaker for u in renamed] == ["Sys", "Maya", "Bot", "Maya"]
    with pytest.raises(ConfigurationError, match="takes speakers= instead of roles="):
        utterances_from_messages(messages, default_time=DAY, roles={"human": "Maya"})  # type: ignore[call-arg]


def test_ids_come_from_the_message_or_its_turn_number() -> None:
    messages = [HumanMessage("one", id="msg-a"), AIMessage("two"), HumanMessage("three")]
    utterances = utterances_from_messages(messages, session="chat-7", default_time=DAY)
    assert [u.id for u in utterances] == ["msg-a", "chat-7:2", "chat-7:3"]
    assert {u.session for u in utterances} == {"chat-7"}


def test_timestamps_from_metadata_in_several_forms() -> None:
    paris = timezone(timedelta(hours=1))
    messages = [
        HumanMessage("iso", additional_kwargs={"timestamp": "2024-01-14T19:05:00Z"}),
        AIMessage("meta", response_metadata={"timestamp": "2024-01-15T08:00:00+01:00"}),
        HumanMessage("naive", additional_kwargs={"timestamp": datetime(2024, 1, 16, 9, 30)}),
        HumanMessage("aware", additional_kwargs={"timestamp": datetime(2024, 1, 17, 9, 30, tzinfo=paris)}),
        HumanMessage("epoch", additional_kwargs={"timestamp": 1705500000}),
        HumanMessage("date", additional_kwargs={"created_at": date(2024, 1, 19)}),
        HumanMessage("default"),
    ]
    times = [u.timestamp for u in utterances_from_messages(messages, default_time=DAY)]
    assert times == [
        datetime(2024, 1, 14, 19, 5, tzinfo=UTC),
        datetime(2024, 1, 15, 7, 0, tzinfo=UTC),
        datetime(2024, 1, 16, 9, 30, tzinfo=UTC),
        datetime(2024, 1, 17, 8, 30, tzinfo=UTC),
        datetime(2024, 1, 17, 14, 0, tzinfo=UTC),
        datetime(2024, 1, 19, tzinfo=UTC),
        DAY,
    ]
    assert utterances_from_messages([HumanMessage("x")], default_time=date(2024, 2, 1))[
        0
    ].timestamp == datetime(2024, 2, 1, tzinfo=UTC)


def test_session_can_come_from_the_message() -> None:
    messages = [
        SystemMessage("You are helpful."),
        HumanMessage("a", additional_kwargs={"session": "s2"}),
        HumanMessage("b"),
        AIMessage("c", additional_kwargs={"session_id": "s2"}),
    ]
    # n counts the session's turns: a system prompt or another session's turns do not shift it
    assert [(u.id, u.session) for u in utterances_from_messages(messages, default_time=DAY)] == [
        ("s2:1", "s2"),
        ("session_1:1", "session_1"),
        ("s2:2", "s2"),
    ]


def test_missing_or_unreadable_timestamps_are_input_errors() -> None:
    with pytest.raises(InputDataError, match="session_1:1.*no timestamp"):
        utterances_from_messages([HumanMessage("when?")])
    with pytest.raises(InputDataError) as unreadable:
        utterances_from_messages([HumanMessage("x", id="m9", additional_kwargs={"timestamp": "soon"})])
    assert (unreadable.value.record, unreadable.value.field) == (
        "messages[0] (id 'm9')",
        'additional_kwargs["timestamp"]',
    )


def test_bad_inputs_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError):
        utterances_from_messages("hello", default_time=DAY)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="item 1"):
        utterances_from_messages([HumanMessage("a"), {"role": "user"}], default_time=DAY)  # type: ignore[list-item]
    with pytest.raises(ConfigurationError):
        utterances_from_messages([HumanMessage("a")], session="", default_time=DAY)


class History:
    """Duck-typed chat history: anything with ``messages``."""

    def __init__(self, messages: list[BaseMessage]) -> None:
        self.messages = messages


def _chat(utterances: list[Utterance]) -> list[BaseMessage]:
    """The sample conversation as LangChain messages (Maya speaks as the human, Jonas as the AI)."""
    out: list[BaseMessage] = []
    for u in utterances:
        kind = HumanMessage if u.speaker == "Maya" else AIMessage
        out.append(kind(u.text, name=u.speaker, additional_kwargs={"timestamp": u.timestamp.isoformat()}))
    return out


def test_build_a_kb_from_a_history_then_extend_it(tmp_path: Path, utterances: list[Utterance]) -> None:
    embedder = HashingEmbedder()
    messages = _chat(utterances)
    kb_dir = tmp_path / "kb"

    first = build_kb_from_messages(History(messages[:40]), kb_dir, embedder=embedder, session="chat")
    assert len(first.kb.utterances) == 40
    assert (kb_dir / "manifest.json").exists()
    assert {"maya", "jonas"} <= set(first.kb.entities)

    again = build_kb_from_messages(messages, kb_dir, embedder=embedder, session="chat")
    assert len(again.kb.utterances) == len(messages)
    assert set(first.kb.utterances) < set(again.kb.utterances)

    engine = GravityEngine.from_dir(kb_dir, embedder=embedder)
    assert engine.query("What is the name of Maya's dog?").anchors


def test_build_in_memory_defaults_to_the_offline_extractor(utterances: list[Utterance]) -> None:
    builder = build_kb_from_messages(_chat(utterances[:10]), embedder=HashingEmbedder())
    assert builder.store is None
    assert builder.kb.build.extractor.startswith("offline")
    assert len(builder.kb.utterances) == 10


def test_a_changed_message_under_a_known_id_is_refused(tmp_path: Path) -> None:
    embedder = HashingEmbedder()
    kwargs: dict[str, Any] = {"embedder": embedder, "default_time": DAY}
    build_kb_from_messages([HumanMessage("I live in Leeds.", name="Maya")], tmp_path, **kwargs)
    with pytest.raises(InputDataError, match="session_1:1"):
        build_kb_from_messages([HumanMessage("I live in Bristol.", name="Maya")], tmp_path, **kwargs)


def test_attachments_travel_in_additional_kwargs() -> None:
    when = datetime(2024, 3, 9, 10, 0, tzinfo=UTC)
    shared = HumanMessage(
        "Look what I made!", name="Maya", additional_kwargs={"attachments": ["a blue clay bowl", " "]}
    )
    [utterance] = utterances_from_messages([shared], default_time=when)
    assert utterance.attachments == ["a blue clay bowl"]
    assert "a blue clay bowl" in utterance.full_text()

    bad = HumanMessage("Look!", name="Maya", id="m-1", additional_kwargs={"attachments": "a bowl"})
    with pytest.raises(InputDataError, match="attachments"):
        utterances_from_messages([bad], default_time=when)
