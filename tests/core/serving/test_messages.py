"""One message adapter for every framework: gravity_core.serving.messages, and LangChain / LlamaIndex
through it.

The same conversation given as LangChain messages and as LlamaIndex ``ChatMessage``s gives the same
utterances and the same KB; the rules (speaker, session, time, id), the errors and the argument
names are those of :mod:`gravity_core.serving.messages` in both (#16).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.extract.offline.entities import GENERIC_ASSISTANT_NAMES
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import KnowledgeBase, Utterance
from gravity_core.serving.messages import (
    DEFAULT_SPEAKERS,
    NeutralMessage,
    build_kb_from_utterances,
    normalize_role,
    renamed_arguments,
    utterances_from_neutral_messages,
)
from gravity_core.testing import FakeChatModel

try:
    import langchain_core.messages as lc_messages
    import llama_index.core.base.llms.types as li_types

    import gravity_langchain
    import gravity_llamaindex
except ImportError:  # the core tests below still run
    BOTH_FRAMEWORKS = False
else:
    BOTH_FRAMEWORKS = True

needs_both = pytest.mark.skipif(not BOTH_FRAMEWORKS, reason="needs the langchain and llamaindex extras")

DAY = datetime(2024, 3, 9, 16, 45, tzinfo=UTC)


def _msg(
    role: str,
    text: str,
    *,
    name: str | None = None,
    id: str | None = None,
    meta: dict[str, object] | None = None,
    **fields: object,
) -> NeutralMessage:
    """A message whose ``additional_kwargs`` are ``meta`` (for the keys "name" and "id") and ``fields``."""
    extra = {**(meta or {}), **fields}
    return NeutralMessage(role=role, text=text, name=name, id=id, metadata=(("additional_kwargs", extra),))


def _utterances(messages: list[NeutralMessage], **kwargs: Any) -> list[Utterance]:
    return utterances_from_neutral_messages(messages, **{"default_time": DAY, **kwargs})


# -- the neutral rules ---------------------------------------------------------------------------


def test_roles_are_normalized_on_construction() -> None:
    assert [
        NeutralMessage(role=r, text="x").role for r in ("human", "AI", "chatbot", "model", "developer")
    ] == [
        "user",
        "assistant",
        "assistant",
        "assistant",
        "system",
    ]
    assert normalize_role("Tool") == "tool"


def test_speaker_from_metadata_then_name_then_role() -> None:
    messages = [
        _msg("system", "You are helpful."),
        _msg("user", "a", name="Maya", speaker="Mia"),
        _msg("user", "b", name="Maya", meta={"name": "Jonas"}),
        _msg("user", "c", name="Maya"),
        _msg("user", "d", name="  ", speaker=""),  # blank counts as absent
        _msg("assistant", "e"),
        _msg("tool", "{}", name="lookup"),  # a named tool result is still skipped
        _msg("assistant", "   "),
    ]
    assert [u.speaker for u in _utterances(messages)] == ["Mia", "Jonas", "Maya", "User", "Assistant"]
    renamed = _utterances(messages, speakers={"human": "Ana", "assistant": "Nova", "system": "Sys"})
    assert [u.speaker for u in renamed] == ["Sys", "Mia", "Jonas", "Maya", "Ana", "Nova"]


def test_session_from_session_or_session_id_which_must_agree() -> None:
    messages = [
        _msg("user", "a", session="s1"),
        _msg("user", "b", session_id="s1"),
        _msg("user", "c", session="s1", session_id="s1"),
        _msg("user", "d"),
    ]
    assert [(u.id, u.session) for u in _utterances(messages, session="main")] == [
        ("s1:1", "s1"),
        ("s1:2", "s1"),
        ("s1:3", "s1"),
        ("main:1", "main"),
    ]
    with pytest.raises(InputDataError) as raised:
        _utterances([_msg("user", "a"), _msg("user", "b", session="s1", session_id="s2")])
    assert raised.value.record == "messages[1]" and raised.value.field == "session"
    assert """additional_kwargs["session"] is 's1' but additional_kwargs["session_id"] is 's2'""" in str(
        raised.value
    )


def test_ids_count_each_sessions_turns_and_stay_stable_as_the_history_grows() -> None:
    history = [
        _msg("user", "one", session="s1"),
        _msg("assistant", "two", session="s1"),
        _msg("user", "three", session="s2"),
        _msg("user", "four", session="s1", id="own-id"),
        _msg("assistant", "five", session="s1"),
    ]
    ids = [u.id for u in _utterances(history)]
    assert ids == ["s1:1", "s1:2", "s2:1", "own-id", "s1:4"]
    noisy = [_msg("system", "prompt"), *history[:2], _msg("tool", "{}"), _msg("assistant", ""), *history[2:]]
    assert [u.id for u in _utterances(noisy)] == ids  # system, tool and empty messages do not shift ids
    grown = [*history, _msg("user", "six", session="s2")]
    assert [u.id for u in _utterances(grown)] == [*ids, "s2:2"]
    alone = [m for m in history if m.fields(("session",))[0][1] == "s1"]
    assert [u.id for u in _utterances(alone)] == ["s1:1", "s1:2", "own-id", "s1:4"]


def test_timestamps_from_metadata_else_default_time() -> None:
    messages = [
        _msg("user", "a", timestamp="2024-01-14T19:05:00Z"),
        _msg("user", "b", time=1705500000),
        _msg("user", "c", created_at=date(2024, 1, 19)),
        _msg("user", "d", timestamp=None, time="2024-01-20"),  # None counts as absent
        _msg("user", "e"),
    ]
    assert [u.timestamp for u in _utterances(messages, default_time=datetime(2024, 2, 1, 9, 30))] == [
        datetime(2024, 1, 14, 19, 5, tzinfo=UTC),
        datetime(2024, 1, 17, 14, 0, tzinfo=UTC),
        datetime(2024, 1, 19, tzinfo=UTC),
        datetime(2024, 1, 20, tzinfo=UTC),
        datetime(2024, 2, 1, 9, 30, tzinfo=UTC),  # a naive default_time is UTC, like a naive timestamp
    ]
    assert _utterances([_msg("user", "x")], default_time=date(2024, 2, 1))[0].timestamp == datetime(
        2024, 2, 1, tzinfo=UTC
    )
    with pytest.raises(ConfigurationError, match="default_time must be a datetime or a date"):
        _utterances([_msg("user", "x")], default_time="2024-02-01")


MISSING_TIME = (
    "record messages[1] (id 'chat:1'), field 'timestamp': the message has no timestamp (metadata "
    "'timestamp', 'time' or 'created_at') and no default_time was given; pass default_time (e.g. "
    "datetime.now(UTC) for a live chat)"
)


def test_a_missing_timestamp_without_default_time_is_an_input_error() -> None:
    messages = [_msg("system", "prompt"), _msg("user", "when?")]
    with pytest.raises(InputDataError) as raised:
        utterances_from_neutral_messages(messages, session="chat")
    assert str(raised.value) == MISSING_TIME


@pytest.mark.parametrize(
    ("message", "field", "expected"),
    [
        (_msg("user", "x", speaker=7), 'additional_kwargs["speaker"]', "expected a string, got int"),
        (_msg("user", "x", session=["s1"]), 'additional_kwargs["session"]', "expected a string, got list"),
        (_msg("user", "x", id=3), "id", "expected a string, got int"),  # type: ignore[arg-type]
        (_msg("user", "x", meta={"id": 3}), 'additional_kwargs["id"]', "expected a string, got int"),
        (_msg("user", "x", timestamp="soon"), 'additional_kwargs["timestamp"]', "cannot read 'soon'"),
        (
            _msg("user", "x", attachments="a bowl"),
            'additional_kwargs["attachments"]',
            "list of strings, got str",
        ),
        (
            _msg("user", "x", attachments=["a", 1]),
            'additional_kwargs["attachments"]',
            "item 1 is of type int",
        ),
    ],
)
def test_unusable_values_name_the_message_and_field(
    message: NeutralMessage, field: str, expected: str
) -> None:
    with pytest.raises(InputDataError) as raised:
        _utterances([_msg("user", "fine"), message])
    assert raised.value.record is not None and raised.value.record.startswith("messages[1]")
    assert raised.value.field == field
    assert expected in str(raised.value)


def test_attachments_are_kept_without_blank_items() -> None:
    [utterance] = _utterances([_msg("user", "Look!", attachments=["a blue clay bowl", " "])])
    assert utterance.attachments == ["a blue clay bowl"]


def test_bad_items_and_arguments_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="item 1 is a dict"):
        _utterances([_msg("user", "a"), {"role": "user"}])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="session"):
        _utterances([_msg("user", "a")], session=" ")
    with pytest.raises(ConfigurationError, match=r"speakers\['user'\]"):
        _utterances([_msg("user", "a")], speakers={"user": ""})


def test_renamed_arguments_are_refused_by_their_new_name() -> None:
    @renamed_arguments(timestamp="default_time")
    def convert(*, default_time: int = 0) -> int:
        return default_time

    assert convert(default_time=3) == 3
    with pytest.raises(ConfigurationError, match=r"convert\(\) takes default_time= instead of timestamp="):
        convert(timestamp=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        convert(colour=3)  # type: ignore[call-arg]


# -- the neutral build -----------------------------------------------------------------------------


def test_build_in_memory_returns_the_builder_with_its_report() -> None:
    utterances = _utterances([_msg("user", "I adopted a beagle called Biscuit.", name="Maya")])
    builder = build_kb_from_utterances(utterances, embedder=HashingEmbedder())
    assert isinstance(builder, AnchorBuilder) and builder.store is None
    assert builder.last_report is not None and builder.last_report.added == 1
    assert builder.kb.build.extractor.startswith("offline")
    assert set(GravityEngine.from_builder(builder).kb.utterances) == {"session_1:1"}
    again = builder.add(utterances)
    assert builder.last_report is again and (again.added, again.skipped) == (0, 1)


def test_build_with_a_chat_model_uses_the_fused_llm_extractor_and_its_cache(tmp_path: Path) -> None:
    utterances = _utterances([_msg("user", "I adopted a beagle.", name="Maya")])
    model = FakeChatModel(lambda _: "not JSON", model_name="fake")
    builder = build_kb_from_utterances(
        utterances, tmp_path / "kb", embedder=HashingEmbedder(), chat_model=model
    )
    assert builder.kb.build.extractor == "llm:fake:fused" and model.calls
    assert builder.store is not None and builder.store.cache_dir.is_dir()
    embedder = HashingEmbedder()
    with pytest.raises(ConfigurationError, match="not both"):
        build_kb_from_utterances(
            utterances, embedder=embedder, extractor=OfflineExtractor(embedder), chat_model=model
        )


def test_the_default_assistant_name_is_the_one_the_extractor_does_not_profile() -> None:
    assert DEFAULT_SPEAKERS["assistant"].casefold() in GENERIC_ASSISTANT_NAMES
    assert DEFAULT_SPEAKERS["user"].casefold() not in GENERIC_ASSISTANT_NAMES


# -- LangChain and LlamaIndex: the same conversation, the same result ------------------------------


# (role, speaker or None, text, id or None, metadata): one conversation, written for both frameworks.
TURNS: list[tuple[str, str | None, str, str | None, dict[str, object]]] = [
    ("system", None, "You are a helpful assistant.", None, {}),
    (
        "user",
        "Maya",
        "I adopted a beagle called Biscuit last week!",
        "m1",
        {"timestamp": "2024-03-09T10:00:00Z", "session": "s1"},
    ),
    (
        "assistant",
        None,
        "Congratulations! How is he settling in?",
        None,
        {"timestamp": "2024-03-09T10:01:00Z", "session_id": "s1"},
    ),
    (
        "user",
        "Maya",
        "He chewed my slippers. My sister Lena adores him.",
        None,
        {"time": 1709978520, "session": "s1"},
    ),
    ("tool", None, "{}", None, {}),
    (
        "user",
        "Maya",
        "Lena is moving to Lisbon next month.",
        None,
        {"created_at": date(2024, 3, 16), "session_id": "s2"},
    ),
    ("assistant", None, "Lisbon is lovely in spring, Maya.", None, {"session": "s2"}),
    (
        "user",
        None,
        "I start as a charge nurse at Harbourside in April.",
        None,
        {"session": "s2", "attachments": ["a hospital badge"]},
    ),
]


def langchain_chat() -> list[Any]:
    kinds = {
        "system": lc_messages.SystemMessage,
        "user": lc_messages.HumanMessage,
        "assistant": lc_messages.AIMessage,
    }
    out: list[Any] = []
    for role, speaker, text, turn_id, meta in TURNS:
        if role == "tool":
            out.append(lc_messages.ToolMessage(text, tool_call_id="t1", additional_kwargs=meta))
        else:
            out.append(kinds[role](text, name=speaker, id=turn_id, additional_kwargs=meta))
    return out


def llamaindex_chat() -> list[Any]:
    out: list[Any] = []
    for role, speaker, text, turn_id, meta in TURNS:
        extra = {**meta, **({"speaker": speaker} if speaker else {}), **({"id": turn_id} if turn_id else {})}
        out.append(li_types.ChatMessage(role=role, content=text, additional_kwargs=extra))
    return out


@needs_both
def test_langchain_and_llamaindex_messages_give_the_same_utterances() -> None:
    from_langchain = gravity_langchain.utterances_from_messages(langchain_chat(), default_time=DAY)
    from_llamaindex = gravity_llamaindex.utterances_from_chat_messages(llamaindex_chat(), default_time=DAY)
    assert from_langchain == from_llamaindex
    assert [(u.id, u.speaker, u.session) for u in from_langchain] == [
        ("m1", "Maya", "s1"),
        ("s1:2", "Assistant", "s1"),
        ("s1:3", "Maya", "s1"),
        ("s2:1", "Maya", "s2"),
        ("s2:2", "Assistant", "s2"),
        ("s2:3", "User", "s2"),
    ]
    assert [u.timestamp for u in from_langchain] == [
        datetime(2024, 3, 9, 10, 0, tzinfo=UTC),
        datetime(2024, 3, 9, 10, 1, tzinfo=UTC),
        datetime(2024, 3, 9, 10, 2, tzinfo=UTC),
        datetime(2024, 3, 16, tzinfo=UTC),
        DAY,
        DAY,
    ]


def _anchors(kb: KnowledgeBase) -> dict[str, Any]:
    return kb.model_dump(mode="json", include={"entities", "events", "topics", "utterances"})


@needs_both
def test_langchain_and_llamaindex_messages_give_the_same_kb(tmp_path: Path) -> None:
    embedder = HashingEmbedder()
    from_langchain = gravity_langchain.build_kb_from_messages(
        langchain_chat(), tmp_path / "lc", embedder=embedder, default_time=DAY
    )
    from_llamaindex = gravity_llamaindex.build_kb_from_chat_messages(
        llamaindex_chat(), tmp_path / "li", embedder=embedder, default_time=DAY
    )
    assert type(from_langchain) is type(from_llamaindex) is AnchorBuilder
    assert from_langchain.last_report == from_llamaindex.last_report
    assert from_langchain.kb.entities and from_langchain.kb.events
    assert _anchors(from_langchain.kb) == _anchors(from_llamaindex.kb)
    in_memory = gravity_llamaindex.build_kb_from_chat_messages(
        llamaindex_chat(), embedder=embedder, default_time=DAY
    )
    assert in_memory.store is None and _anchors(in_memory.kb) == _anchors(from_llamaindex.kb)


@needs_both
def test_an_unnamed_assistant_is_no_entity_in_either_framework() -> None:
    embedder = HashingEmbedder()
    for builder in (
        gravity_langchain.build_kb_from_messages(langchain_chat(), embedder=embedder, default_time=DAY),
        gravity_llamaindex.build_kb_from_chat_messages(
            llamaindex_chat(), embedder=embedder, default_time=DAY
        ),
    ):
        names = {e.name for e in builder.kb.entities.values()}
        assert "Assistant" not in names
        assert {"Maya", "User", "Lena"} <= names


@needs_both
@pytest.mark.parametrize("key", ["session", "session_id"])
def test_session_and_session_id_work_in_both(key: str) -> None:
    lc = gravity_langchain.utterances_from_messages(
        [lc_messages.HumanMessage("hi", additional_kwargs={key: "s1"})], default_time=DAY
    )
    li = gravity_llamaindex.utterances_from_chat_messages(
        [li_types.ChatMessage(role="user", content="hi", additional_kwargs={key: "s1"})], default_time=DAY
    )
    assert [(u.id, u.session) for u in lc] == [(u.id, u.session) for u in li] == [("s1:1", "s1")]


@needs_both
def test_a_missing_timestamp_is_the_same_error_in_both() -> None:
    with pytest.raises(InputDataError) as from_langchain:
        gravity_langchain.utterances_from_messages(
            [lc_messages.SystemMessage("prompt"), lc_messages.HumanMessage("when?")], session="chat"
        )
    with pytest.raises(InputDataError) as from_llamaindex:
        gravity_llamaindex.utterances_from_chat_messages(
            [
                li_types.ChatMessage(role="system", content="prompt"),
                li_types.ChatMessage(role="user", content="when?"),
            ],
            session="chat",
        )
    assert str(from_langchain.value) == str(from_llamaindex.value) == MISSING_TIME


def _adapters() -> list[tuple[Callable[..., Any], list[Any]]]:
    lc = [lc_messages.HumanMessage("hi")]
    li = [li_types.ChatMessage(role="user", content="hi")]
    return [
        (gravity_langchain.utterances_from_messages, lc),
        (gravity_langchain.build_kb_from_messages, lc),
        (gravity_llamaindex.utterances_from_chat_messages, li),
        (gravity_llamaindex.build_kb_from_chat_messages, li),
    ]


@needs_both
@pytest.mark.parametrize(("old", "new"), [("roles", "speakers"), ("timestamp", "default_time")])
def test_old_argument_names_fail_naming_the_new_one(old: str, new: str) -> None:
    for function, messages in _adapters():
        with pytest.raises(ConfigurationError, match=f"takes {new}= instead of {old}="):
            function(messages, **{old: DAY if old == "timestamp" else {}})


@needs_both
def test_unknown_arguments_fail() -> None:
    for function, messages in _adapters():
        with pytest.raises(TypeError, match="colour"):
            function(messages, default_time=DAY, colour="blue")
