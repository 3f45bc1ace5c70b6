"""Forgetting a conversation's messages with the arguments it was built with.

``gravity_core.serving.messages.forget_utterances``, and LangChain's ``forget_messages`` and LlamaIndex's
``forget_chat_messages`` through it: the KB left is the one a build of the other messages makes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.schema import Utterance
from gravity_core.serving.messages import build_kb_from_utterances, forget_utterances
from gravity_core.storage.store import AnchorStore
from gravity_core.testing import FakeChatModel
from tests.core.serving.test_messages import BOTH_FRAMEWORKS, DAY, needs_both

if BOTH_FRAMEWORKS:
    import langchain_core.messages as lc_messages
    import llama_index.core.base.llms.types as li_types

    import gravity_langchain
    import gravity_llamaindex
    from tests.core.serving.test_messages import langchain_chat, llamaindex_chat

SESSION_1 = ["m1", "s1:2", "s1:3"]
SESSION_2 = ["s2:1", "s2:2", "s2:3"]


def _session_of(message: Any) -> object:
    meta = message.additional_kwargs
    return meta.get("session") or meta.get("session_id")


@dataclass
class Framework:
    """One framework's conversation and functions, so each test runs for both."""

    chat: Callable[[], list[Any]]
    build: Callable[..., AnchorBuilder]
    forget: Callable[..., Any]
    utterances: Callable[..., list[Utterance]]
    message: Callable[..., Any]  # (role, text, **additional_kwargs) -> a message

    def session(self, name: str) -> list[Any]:
        return [m for m in self.chat() if _session_of(m) == name]


def _langchain() -> Framework:
    def message(role: str, text: str, **meta: object) -> Any:
        kind = {"user": lc_messages.HumanMessage, "assistant": lc_messages.AIMessage}[role]
        return kind(text, additional_kwargs=meta)

    return Framework(
        langchain_chat,
        gravity_langchain.build_kb_from_messages,
        gravity_langchain.forget_messages,
        gravity_langchain.utterances_from_messages,
        message,
    )


def _llamaindex() -> Framework:
    def message(role: str, text: str, **meta: object) -> Any:
        return li_types.ChatMessage(role=role, content=text, additional_kwargs=meta)

    return Framework(
        llamaindex_chat,
        gravity_llamaindex.build_kb_from_chat_messages,
        gravity_llamaindex.forget_chat_messages,
        gravity_llamaindex.utterances_from_chat_messages,
        message,
    )


@pytest.fixture(params=["langchain", "llamaindex"])
def framework(request: pytest.FixtureRequest) -> Framework:
    if not BOTH_FRAMEWORKS:
        pytest.skip("needs the langchain and llamaindex extras")
    return _langchain() if request.param == "langchain" else _llamaindex()


def _said(kb_dir: Path) -> str:
    """Everything the stored KB holds, as one text."""
    return json.dumps(AnchorStore(kb_dir).load().kb.to_dict())


# -- through LangChain and LlamaIndex --------------------------------------------------------------


@needs_both
def test_forgetting_a_session_leaves_the_kb_a_build_of_the_other_makes(
    framework: Framework, tmp_path: Path
) -> None:
    embedder, kb_dir = HashingEmbedder(), tmp_path / "kb"
    built = framework.build(framework.chat(), kb_dir, embedder=embedder, default_time=DAY)
    assert list(built.kb.utterances) == [*SESSION_1, *SESSION_2]
    assert "Lisbon" in _said(kb_dir) and "Harbourside" in _said(kb_dir)

    report = framework.forget(framework.session("s2"), kb_dir, embedder=embedder, default_time=DAY)

    assert (report.forgotten, report.remaining) == (3, 3)
    stored = AnchorStore(kb_dir).load().kb
    assert list(stored.utterances) == SESSION_1
    only_session_1 = framework.build(framework.session("s1"), embedder=embedder, default_time=DAY)
    assert stored.to_dict() == only_session_1.kb.to_dict()
    assert report.after == {
        "entity": len(stored.entities),
        "event": len(stored.events),
        "topic": len(stored.topics),
    }
    said = _said(kb_dir)
    assert "Lisbon" not in said and "Harbourside" not in said and "hospital badge" not in said
    assert AnchorStore(kb_dir).generations() == [report.generation]  # no rollback brings it back


@needs_both
def test_forgetting_in_a_builder_changes_its_kb_and_it_stays_usable(framework: Framework) -> None:
    embedder = HashingEmbedder()
    builder = framework.build(framework.chat(), embedder=embedder, default_time=DAY)

    report = framework.forget(framework.session("s2"), builder=builder)

    assert builder.store is None and report.generation is None
    assert (report.forgotten, report.remaining) == (3, 3)
    assert list(builder.kb.utterances) == SESSION_1
    only_session_1 = framework.build(framework.session("s1"), embedder=embedder, default_time=DAY)
    assert builder.kb.to_dict() == only_session_1.kb.to_dict()
    again = builder.add(framework.utterances(framework.session("s2"), default_time=DAY))
    assert again.added == 3 and list(builder.kb.utterances) == [*SESSION_1, *SESSION_2]


@needs_both
def test_messages_built_without_timestamps_are_forgotten_without_default_time(
    framework: Framework, tmp_path: Path
) -> None:
    embedder, kb_dir = HashingEmbedder(), tmp_path / "kb"
    chat = [
        framework.message("user", "I adopted a beagle called Biscuit.", speaker="Maya"),
        framework.message("assistant", "What a lovely name!"),
        framework.message("user", "My sister Lena moves to Lisbon.", speaker="Maya", session="other"),
    ]
    with pytest.raises(InputDataError, match="no default_time was given"):
        framework.utterances(chat)  # the build needs a time for them ...
    framework.build(chat, kb_dir, embedder=embedder, default_time=DAY)

    report = framework.forget(chat[2:], kb_dir, embedder=embedder)  # ... forgetting does not

    assert report.forgotten == 1
    stored = AnchorStore(kb_dir).load().kb
    assert list(stored.utterances) == ["session_1:1", "session_1:2"]
    assert all(u.timestamp == DAY for u in stored.utterances.values())  # the placeholder is not stored
    assert "Lisbon" not in _said(kb_dir)


@needs_both
def test_kb_dir_and_builder_exactly_one(framework: Framework, tmp_path: Path) -> None:
    embedder, kb_dir = HashingEmbedder(), tmp_path / "kb"
    builder = framework.build(framework.chat(), kb_dir, embedder=embedder, default_time=DAY)
    with pytest.raises(ConfigurationError, match=r"kb_dir=.*or builder=.*exactly one of them; not both"):
        framework.forget(framework.session("s2"), kb_dir, builder=builder)
    with pytest.raises(ConfigurationError, match=r"kb_dir=.*or builder=.*exactly one of them; got neither"):
        framework.forget(framework.session("s2"), embedder=embedder)
    with pytest.raises(ConfigurationError, match="embedder= only go with kb_dir="):
        framework.forget(framework.session("s2"), builder=builder, embedder=embedder)
    assert list(AnchorStore(kb_dir).load().kb.utterances) == [*SESSION_1, *SESSION_2]


@needs_both
def test_messages_not_in_the_kb_forget_nothing(framework: Framework, tmp_path: Path) -> None:
    embedder, kb_dir = HashingEmbedder(), tmp_path / "kb"
    framework.build(framework.session("s1"), kb_dir, embedder=embedder, default_time=DAY)
    generation = AnchorStore(kb_dir).current_generation()
    with pytest.raises(
        ConfigurationError, match=r"no utterance 's2:1', 's2:2', 's2:3' in this KB; it holds: .*m1"
    ):
        framework.forget(framework.chat(), kb_dir, embedder=embedder)  # s1 is there, s2 is not
    stored = AnchorStore(kb_dir)
    assert stored.current_generation() == generation
    assert list(stored.load().kb.utterances) == SESSION_1


@needs_both
def test_a_message_passed_without_its_sessions_earlier_turns_is_refused_not_misread(
    framework: Framework, tmp_path: Path
) -> None:
    embedder, kb_dir = HashingEmbedder(), tmp_path / "kb"
    framework.build(framework.chat(), kb_dir, embedder=embedder, default_time=DAY)
    third = framework.session("s2")[2:]  # numbered s2:1 when passed alone: the KB's s2:1 is another turn
    with pytest.raises(InputDataError, match=r"record s2:1.*is another turn in the KB"):
        framework.forget(third, kb_dir, embedder=embedder, default_time=DAY)
    assert list(AnchorStore(kb_dir).load().kb.utterances) == [*SESSION_1, *SESSION_2]


@needs_both
def test_no_messages_to_forget(framework: Framework, tmp_path: Path) -> None:
    embedder, kb_dir = HashingEmbedder(), tmp_path / "kb"
    framework.build(framework.chat(), kb_dir, embedder=embedder, default_time=DAY)
    with pytest.raises(ConfigurationError, match="no utterances to forget"):
        framework.forget([], kb_dir, embedder=embedder)
    only_a_prompt = [m for m in framework.chat() if _session_of(m) is None]  # system and tool messages
    assert only_a_prompt
    with pytest.raises(ConfigurationError, match="no utterances to forget"):
        framework.forget(only_a_prompt, kb_dir, embedder=embedder)
    assert len(AnchorStore(kb_dir).load().kb.utterances) == 6


@needs_both
def test_a_folder_without_a_kb_is_refused(framework: Framework, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for folder in (tmp_path / "empty", tmp_path / "missing"):
        with pytest.raises(ConfigurationError, match="there is no KB to forget from in"):
            framework.forget(framework.session("s2"), folder, embedder=HashingEmbedder())
    assert not (tmp_path / "missing").exists()


@needs_both
def test_forgetting_with_another_embedder_is_refused(framework: Framework, tmp_path: Path) -> None:
    kb_dir = tmp_path / "kb"
    framework.build(framework.chat(), kb_dir, embedder=HashingEmbedder(), default_time=DAY)
    with pytest.raises(ConfigurationError, match="same embedder"):
        framework.forget(framework.session("s2"), kb_dir, embedder=HashingEmbedder(dim=64))
    assert len(AnchorStore(kb_dir).load().kb.utterances) == 6


@needs_both
@pytest.mark.parametrize(("old", "new"), [("roles", "speakers"), ("timestamp", "default_time")])
def test_old_argument_names_fail_naming_the_new_one(framework: Framework, old: str, new: str) -> None:
    with pytest.raises(ConfigurationError, match=f"takes {new}= instead of {old}="):
        framework.forget(framework.session("s2"), **{old: DAY if old == "timestamp" else {}})


# -- gravity_core.serving.messages.forget_utterances ------------------------------------------------------


def _turns() -> list[Utterance]:
    said = datetime(2024, 3, 9, 10, 0, tzinfo=UTC)
    texts = [
        ("Maya", "I adopted a beagle called Biscuit.", "s1"),
        ("Maya", "My sister Lena is moving to Lisbon.", "s2"),
        ("Maya", "I start as a charge nurse at Harbourside.", "s2"),
    ]
    return [
        Utterance(id=f"t{n}", speaker=speaker, text=text, session=session, timestamp=said)
        for n, (speaker, text, session) in enumerate(texts, start=1)
    ]


def test_forget_utterances_in_a_folder_and_in_a_builder(tmp_path: Path) -> None:
    embedder, turns = HashingEmbedder(), _turns()
    build_kb_from_utterances(turns, tmp_path / "kb", embedder=embedder)
    report = forget_utterances(turns[1:], tmp_path / "kb", embedder=embedder)
    assert (report.forgotten, report.remaining) == (2, 1)
    expected = build_kb_from_utterances(turns[:1], embedder=embedder).kb.to_dict()
    assert AnchorStore(tmp_path / "kb").load().kb.to_dict() == expected

    builder = build_kb_from_utterances(turns, embedder=embedder)
    report = forget_utterances(iter(turns[1:]), builder=builder)  # any iterable
    assert report.forgotten == 2 and builder.kb.to_dict() == expected


def test_forget_utterances_refuses_what_it_cannot_forget(tmp_path: Path) -> None:
    embedder, turns = HashingEmbedder(), _turns()
    builder = build_kb_from_utterances(turns[:2], embedder=embedder)
    with pytest.raises(ConfigurationError, match=r"no utterance 't3' in this KB; it holds: t1, t2"):
        forget_utterances(turns, builder=builder)
    assert list(builder.kb.utterances) == ["t1", "t2"]
    with pytest.raises(ConfigurationError, match="no utterances to forget"):
        forget_utterances([], builder=builder)
    with pytest.raises(ConfigurationError, match="item 0 is a str, not an Utterance"):
        forget_utterances(["t1"], builder=builder)  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="exactly one of them; not both"):
        forget_utterances(turns[:1], tmp_path, builder=builder)
    with pytest.raises(ConfigurationError, match="exactly one of them; got neither"):
        forget_utterances(turns[:1])
    with pytest.raises(ConfigurationError, match="extractor= only go with kb_dir="):
        forget_utterances(turns[:1], builder=builder, extractor=OfflineExtractor(embedder))
    assert list(builder.kb.utterances) == ["t1", "t2"]


def test_forget_utterances_with_the_chat_model_the_kb_was_built_with(tmp_path: Path) -> None:
    embedder, turns, kb_dir = HashingEmbedder(), _turns(), tmp_path / "kb"
    model = FakeChatModel(lambda _: '{"entities": [], "events": [], "topics": []}', model_name="fake")
    build_kb_from_utterances(turns, kb_dir, embedder=embedder, chat_model=model)
    with pytest.raises(ConfigurationError, match="built with extractor 'llm:fake:fused'"):
        forget_utterances(turns[2:], kb_dir, embedder=embedder)  # the offline extractor is not it
    report = forget_utterances(turns[2:], kb_dir, embedder=embedder, chat_model=model)
    assert report.forgotten == 1
    stored = AnchorStore(kb_dir).load().kb
    assert list(stored.utterances) == ["t1", "t2"] and stored.build.extractor == "llm:fake:fused"
