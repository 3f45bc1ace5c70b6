"""Adapters: LlamaIndex LLM -> ChatModel, embeddings both ways, ChatMessage -> utterances, KB build."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError, InputDataError, ProviderError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.llm.base import ChatModel
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import NumpyAnchorIndex
from gravity_core.schema import Utterance
from gravity_core.storage.store import AnchorStore
from gravity_llamaindex import (
    GravityEmbedding,
    LlamaIndexChatModel,
    LlamaIndexEmbedder,
    as_gravity_embedder,
    build_kb_from_chat_messages,
    nodes_from_utterances,
    utterances_from_chat_messages,
)

from .fakes import CountingEmbedding

FUSED_ANSWER = Path(__file__).resolve().parents[2] / "fixtures" / "llm" / "fused_s2.txt"
SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


class RateLimitError(Exception):
    """Named like the provider SDKs' exception."""


class ScriptedLLM(CustomLLM):
    """A LlamaIndex LLM that answers every chat with ``answer`` and records the messages."""

    answer: str = "ok"
    fail: bool = False
    chats: list[list[ChatMessage]] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted-1", is_chat_model=True)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.chats.append(list(messages))
        if self.fail:
            raise RateLimitError("slow down")
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=self.answer))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.answer)

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> Iterator[CompletionResponse]:
        yield CompletionResponse(text=self.answer, delta=self.answer)


# -- LLM -> ChatModel ---------------------------------------------------------------------------


def test_chat_model_sends_roles_and_returns_the_text() -> None:
    llm = ScriptedLLM(answer="a JSON answer")
    model = LlamaIndexChatModel(llm)
    assert isinstance(model, ChatModel)
    assert model.model_name == "llamaindex:ScriptedLLM:scripted-1"
    reply = model.complete([{"role": "system", "content": "rules"}, {"role": "user", "content": "batch"}])
    assert reply == "a JSON answer"
    assert [(m.role, m.content) for m in llm.chats[0]] == [
        (MessageRole.SYSTEM, "rules"),
        (MessageRole.USER, "batch"),
    ]
    assert LlamaIndexChatModel(llm, name="mine").model_name == "mine"


def test_chat_model_maps_provider_failures_and_rejects_bad_input() -> None:
    with pytest.raises(ProviderError, match="slow down"):
        LlamaIndexChatModel(ScriptedLLM(fail=True)).complete([{"role": "user", "content": "hi"}])
    with pytest.raises(ConfigurationError, match="role"):
        LlamaIndexChatModel(ScriptedLLM()).complete([{"role": "robot", "content": "hi"}])
    with pytest.raises(ConfigurationError, match="LlamaIndex LLM"):
        LlamaIndexChatModel("gpt")  # type: ignore[arg-type]


# -- GRAVITY embedder -> LlamaIndex -------------------------------------------------------------


def test_gravity_embedding_returns_the_embedders_vectors(hashing: HashingEmbedder) -> None:
    model = GravityEmbedding(hashing)
    assert model.model_name == hashing.name and model.embedder is hashing
    expected = hashing.embed(["Biscuit on the beach", "Maya moved to Bristol"])
    assert np.allclose(model.get_query_embedding("Biscuit on the beach"), expected[0])
    assert np.allclose(model.get_text_embedding("Maya moved to Bristol"), expected[1])
    assert np.allclose(
        model.get_text_embedding_batch(["Biscuit on the beach", "Maya moved to Bristol"]), expected
    )
    with pytest.raises(ConfigurationError, match="GRAVITY Embedder"):
        GravityEmbedding("minilm")  # type: ignore[arg-type]


async def test_gravity_embedding_async(hashing: HashingEmbedder) -> None:
    model = GravityEmbedding(hashing)
    expected = hashing.embed(["a dog", "a cat"])
    assert np.allclose(await model.aget_query_embedding("a dog"), expected[0])
    assert np.allclose(await model.aget_text_embedding_batch(["a dog", "a cat"]), expected)


def test_gravity_embedding_embeds_a_batch_in_one_call(hashing: HashingEmbedder) -> None:
    calls: list[int] = []

    class Spy:
        name, dim = hashing.name, hashing.dim

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            calls.append(len(texts))
            return hashing.embed(texts)

    GravityEmbedding(Spy()).get_text_embedding_batch([f"text {i}" for i in range(20)])
    assert calls == [20]


# -- LlamaIndex model -> GRAVITY embedder -------------------------------------------------------


def test_llamaindex_embedder_meets_the_protocol_and_normalizes() -> None:
    model = CountingEmbedding()
    embedder = LlamaIndexEmbedder(model)
    assert embedder.name == "llamaindex:CountingEmbedding:counting"
    matrix = embedder.embed(["Maya adopted Biscuit", "Jonas ships the game"])
    assert matrix.shape == (2, 256) and matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0)
    assert model.counts["batch"] == 1
    assert embedder.dim == 256 and model.counts["batch"] == 1  # known from the first call, no probe
    assert embedder.embed([]).shape == (0, 256)
    assert isinstance(embedder, Embedder)


def test_llamaindex_embedder_probes_the_dimension_once_and_checks_it() -> None:
    model = CountingEmbedding()
    embedder = LlamaIndexEmbedder(model, name="counting-v1")
    assert embedder.name == "counting-v1"
    assert embedder.dim == 256 and embedder.dim == 256
    assert model.counts["batch"] == 1
    with pytest.raises(ConfigurationError, match="256-dim vectors, expected 8"):
        LlamaIndexEmbedder(CountingEmbedding(), dim=8).embed(["x"])
    with pytest.raises(ConfigurationError, match="sequence of texts"):
        embedder.embed("a single string")


def test_a_kb_built_and_queried_with_a_llamaindex_embedding_model(utterances: list[Utterance]) -> None:
    embedder = LlamaIndexEmbedder(CountingEmbedding())
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder)
    builder.add(utterances[:30])
    engine = GravityEngine(builder.kb, NumpyAnchorIndex.from_vectors(builder.vectors), embedder)
    assert builder.kb.build.embedder == embedder.name
    assert engine.query("Where did Maya apply for a job?").anchors


def test_as_gravity_embedder(hashing: HashingEmbedder) -> None:
    assert as_gravity_embedder(GravityEmbedding(hashing)) is hashing
    assert as_gravity_embedder(hashing) is hashing
    assert isinstance(as_gravity_embedder(CountingEmbedding()), LlamaIndexEmbedder)
    with pytest.raises(ConfigurationError):
        as_gravity_embedder("minilm")  # type: ignore[arg-type]


# -- ChatMessage -> Utterance -------------------------------------------------------------------


def _chat() -> list[ChatMessage]:
    return [
        ChatMessage(role=MessageRole.SYSTEM, content="You are helpful."),
        ChatMessage(role=MessageRole.USER, content="I adopted a dog called Biscuit!"),
        ChatMessage(role=MessageRole.ASSISTANT, content="Congratulations!"),
        ChatMessage(role=MessageRole.TOOL, content="{}"),
        ChatMessage(role=MessageRole.USER, content="   "),
        ChatMessage(role=MessageRole.USER, content="He chewed my slippers."),
    ]


def test_utterances_from_roles_with_default_session_and_time() -> None:
    turns = utterances_from_chat_messages(_chat(), session="s1", default_time=SAID, speakers={"user": "Maya"})
    assert [(u.id, u.speaker, u.text, u.session, u.timestamp) for u in turns] == [
        ("s1:1", "Maya", "I adopted a dog called Biscuit!", "s1", SAID),
        ("s1:2", "Assistant", "Congratulations!", "s1", SAID),
        ("s1:3", "Maya", "He chewed my slippers.", "s1", SAID),
    ]


def test_utterance_fields_from_additional_kwargs() -> None:
    messages = [
        ChatMessage(
            role="user",
            content="a",
            additional_kwargs={"speaker": "Maya", "timestamp": "2024-03-09T10:00:00Z"},
        ),
        ChatMessage(
            role="user", content="b", additional_kwargs={"name": "Jonas", "timestamp": date(2024, 3, 10)}
        ),
        ChatMessage(
            role="assistant", content="c", additional_kwargs={"session_id": "other", "timestamp": 1710000000}
        ),
        ChatMessage(role="user", content="d", additional_kwargs={"id": "D1:7", "timestamp": SAID}),
        ChatMessage(role="user", content="e", additional_kwargs={"session": "other", "time": SAID}),
    ]
    turns = utterances_from_chat_messages(messages, session="s")
    assert [(u.id, u.speaker, u.session) for u in turns] == [
        ("s:1", "Maya", "s"),
        ("s:2", "Jonas", "s"),
        ("other:1", "Assistant", "other"),
        ("D1:7", "User", "s"),
        ("other:2", "User", "other"),  # "session" is read as well as "session_id"
    ]
    assert turns[0].timestamp == datetime(2024, 3, 9, 10, tzinfo=UTC)
    assert turns[1].timestamp == datetime(2024, 3, 10, tzinfo=UTC)
    assert turns[2].timestamp == datetime.fromtimestamp(1710000000, tz=UTC)
    assert turns[3].timestamp == SAID


def test_without_any_timestamp_default_time_is_asked_for() -> None:
    with pytest.raises(InputDataError, match=r"no default_time was given; pass default_time") as raised:
        utterances_from_chat_messages([ChatMessage(role="user", content="hello")])
    assert (raised.value.record, raised.value.field) == ("messages[0] (id 'session_1:1')", "timestamp")
    now = datetime.now(UTC)
    (turn,) = utterances_from_chat_messages([ChatMessage(role="user", content="hello")], default_time=now)
    assert turn.timestamp == now and turn.session == "session_1"
    with pytest.raises(ConfigurationError, match="takes default_time= instead of timestamp="):
        utterances_from_chat_messages([], timestamp=now)  # type: ignore[call-arg]


def test_unusable_timestamps_are_input_data_errors() -> None:
    with pytest.raises(InputDataError, match="s:1"):
        utterances_from_chat_messages(
            [ChatMessage(role="user", content="x", additional_kwargs={"timestamp": "last Tuesday"})],
            session="s",
        )
    naive = utterances_from_chat_messages(
        [ChatMessage(role="user", content="x")], default_time=datetime(2024, 1, 1)
    )
    assert naive[0].timestamp == datetime(2024, 1, 1, tzinfo=UTC)  # taken as UTC, like a message's own time
    with pytest.raises(ConfigurationError, match="item 0 is a dict"):
        utterances_from_chat_messages([{"role": "user", "content": "x"}], default_time=SAID)  # type: ignore[list-item]


def test_nodes_from_utterances(utterances: list[Utterance]) -> None:
    node = nodes_from_utterances(utterances[:1])[0]
    first = utterances[0]
    assert node.node_id == first.id and node.text == f"{first.speaker}: {first.text}"
    assert node.metadata == {
        "speaker": first.speaker,
        "session": first.session,
        "id": first.id,
        "date": "2024-01-14",
    }
    assert set(node.excluded_embed_metadata_keys) == set(node.metadata)


# -- KB build from chat messages ----------------------------------------------------------------


def _caroline_chat() -> list[ChatMessage]:
    lines = [
        ("Caroline", "Hey Mel! I went to an LGBTQ support group yesterday and it was so powerful."),
        ("Melanie", "That's amazing, Caroline! I finished my lake painting last week."),
        ("Caroline", "I've decided to work as a school counselor now, no more retail for me."),
        ("Melanie", "Good for you! Oscar, my dog, would have cheered too."),
        ("Caroline", "Thanks! My sister Anna is coming to visit from Boston next month."),
    ]
    return [
        ChatMessage(
            role="user" if speaker == "Caroline" else "assistant",
            content=text,
            additional_kwargs={"speaker": speaker},
        )
        for speaker, text in lines
    ]


def test_build_with_a_llamaindex_llm_then_update_without_new_calls(
    tmp_path: Path, hashing: HashingEmbedder
) -> None:
    llm = ScriptedLLM(answer=FUSED_ANSWER.read_text(encoding="utf-8"))
    builder = build_kb_from_chat_messages(
        _caroline_chat(),
        tmp_path,
        embedder=GravityEmbedding(hashing),
        llm=llm,
        session="S2",
        default_time=SAID,
    )
    assert isinstance(builder, AnchorBuilder) and builder.last_report is not None
    report = builder.last_report
    assert report.added == 5 and report.failed_batches == 0 and len(llm.chats) == 1
    kb = AnchorStore(tmp_path).load().kb
    assert {"Caroline", "Melanie"} <= {e.name for e in kb.entities.values()}
    assert kb.build.embedder == hashing.name  # the GravityEmbedding was unwrapped

    more = [
        *_caroline_chat(),
        ChatMessage(
            role="user", content="Anna arrives on Friday.", additional_kwargs={"speaker": "Caroline"}
        ),
    ]
    again = build_kb_from_chat_messages(more, tmp_path, embedder=hashing, session="S2", default_time=SAID)
    assert again.last_report is not None and (again.last_report.added, again.last_report.skipped) == (1, 5)
    assert len(llm.chats) == 1
    engine = GravityEngine.from_dir(tmp_path, embedder=hashing)
    assert "S2:6" in engine.kb.utterances


def test_build_in_memory_with_a_gravity_extractor(hashing: HashingEmbedder) -> None:
    chat = [
        ChatMessage(
            role="user", content="My sister Anna lives in Boston.", additional_kwargs={"speaker": "Ana"}
        ),
        ChatMessage(role="assistant", content="Boston is lovely in the autumn."),
    ]
    builder = build_kb_from_chat_messages(
        chat, embedder=hashing, extractor=OfflineExtractor(hashing), default_time=SAID
    )
    assert builder.store is None and builder.last_report is not None and builder.last_report.added == 2
    names = {e.name for e in builder.kb.entities.values()}
    assert {"Ana", "Anna", "Boston"} <= names and "Assistant" not in names  # the unnamed AI is no person
    assert GravityEngine.from_builder(builder).query("Where does Anna live?").anchors


def test_chat_message_attachments_become_utterance_attachments() -> None:
    when = datetime(2024, 3, 9, 10, 0, tzinfo=UTC)
    shared = ChatMessage(
        role=MessageRole.USER, content="Look what I made!", additional_kwargs={"attachments": ["a clay bowl"]}
    )
    [utterance] = utterances_from_chat_messages([shared], default_time=when)
    assert utterance.attachments == ["a clay bowl"] and "a clay bowl" in utterance.full_text()

    bad = ChatMessage(role=MessageRole.USER, content="Look!", additional_kwargs={"attachments": "a bowl"})
    with pytest.raises(InputDataError, match="attachments"):
        utterances_from_chat_messages([bad], default_time=when)
