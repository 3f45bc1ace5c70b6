"""A LangChain chain built once follows the KB (#16): sessions added later reach its prompt.

The KB folder is extended with ``build_kb_from_messages`` (as a chat app would after a session), or
by ``gravity build`` in another process; the engine, the shared :class:`AnswerCache`, the
retriever and the chain are made once, before. Hashing embedder, offline extractor, no fakes but
the chat model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.vectorstores import InMemoryVectorStore

from gravity_core.embeddings import HashingEmbedder
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_langchain import (
    AnswerCache,
    GravityEmbeddings,
    GravityRetriever,
    build_gravity_chain,
    build_kb_from_messages,
)
from gravity_langchain.retrieval_call import ANCHORS_EVENT

BISCUIT = "What happened with Biscuit the terrier?"


def messages(turns: list[Utterance]) -> list[BaseMessage]:
    """The turns as a chat app stores them: speaker, id, session and time travel with each message."""
    made: list[BaseMessage] = []
    for turn in turns:
        kind = HumanMessage if turn.speaker == "Maya" else AIMessage
        extra = {"timestamp": turn.timestamp.isoformat(), "session": turn.session}
        made.append(kind(turn.text, name=turn.speaker, id=turn.id, additional_kwargs=extra))
    return made


def of_sessions(utterances: list[Utterance], *numbers: int) -> list[Utterance]:
    wanted = {f"session_{n}" for n in numbers}
    return [u for u in utterances if u.session in wanted]


class Prompts(BaseCallbackHandler):
    """Records the system message of every chat-model call and the anchors of every retrieval."""

    def __init__(self) -> None:
        self.systems: list[str] = []
        self.anchors: list[list[str]] = []

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], **kwargs: Any) -> None:
        self.systems.append(str(messages[0][0].content))

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == ANCHORS_EVENT:
            self.anchors.append([a["id"] for a in data["anchors"]])


@pytest.fixture
def kb_dir(tmp_path: Path, utterances: list[Utterance], embedder: HashingEmbedder) -> Path:
    kb = tmp_path / "kb"
    build_kb_from_messages(messages(of_sessions(utterances, 1, 2)), kb, embedder=embedder)
    return kb


def test_the_shared_cache_follows_the_engine_to_a_new_session(
    kb_dir: Path, utterances: list[Utterance], embedder: HashingEmbedder
) -> None:
    engine = GravityEngine.from_dir(kb_dir, embedder=embedder)
    cache = AnswerCache(engine)
    first = cache.get(BISCUIT)
    assert cache.get(BISCUIT) is first and "session_3:" not in first.text

    build_kb_from_messages(messages(of_sessions(utterances, 1, 2, 3)), kb_dir, embedder=embedder)

    fresh = cache.get(BISCUIT)
    assert fresh is not first and "session_3:" in fresh.text
    assert fresh == GravityEngine.from_dir(kb_dir, embedder=embedder, follow=False).query(BISCUIT)
    assert len(cache) == 1  # the first version's answer was dropped
    assert cache.get(BISCUIT) is fresh


def test_a_cache_over_a_snapshot_engine_keeps_its_answers(
    kb_dir: Path, utterances: list[Utterance], embedder: HashingEmbedder
) -> None:
    cache = AnswerCache(GravityEngine.from_dir(kb_dir, embedder=embedder, follow=False))
    first = cache.get(BISCUIT)
    build_kb_from_messages(messages(of_sessions(utterances, 3)), kb_dir, embedder=embedder)
    assert cache.get(BISCUIT) is first


def test_a_chain_built_once_serves_the_anchors_of_a_session_added_by_another_process(
    kb_dir: Path, tmp_path: Path, utterances: list[Utterance], embedder: HashingEmbedder
) -> None:
    engine = GravityEngine.from_dir(kb_dir, embedder=embedder)
    store = InMemoryVectorStore(GravityEmbeddings(embedder))
    store.add_documents([Document(f"{u.speaker}: {u.text}", id=u.id) for u in of_sessions(utterances, 1, 2)])
    chain = build_gravity_chain(engine, store, FakeListChatModel(responses=["ok"]), k=4)
    cache = AnswerCache(engine)
    retriever = GravityRetriever(engine=engine, vector_store=store, k=4, cache=cache)
    seen = Prompts()

    chain.invoke(BISCUIT, config={"callbacks": [seen]})
    retriever.invoke(BISCUIT, config={"callbacks": [seen]})
    assert "session_3:" not in seen.systems[0]
    old_anchors = seen.anchors[-1]

    session_3 = of_sessions(utterances, 3)
    conversation = tmp_path / "session_3.jsonl"
    records = [
        {"session": u.session, "speaker": u.speaker, "timestamp": u.timestamp.isoformat(), "text": u.text}
        for u in session_3
    ]
    conversation.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gravity_core",
            "build",
            str(conversation),
            "-o",
            str(kb_dir),
            "--embedder",
            "hashing",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    store.add_documents(
        [Document(f"{u.speaker}: {u.text}", id=u.id) for u in session_3]
    )  # the host's own memory

    chain.invoke(BISCUIT, config={"callbacks": [seen]})
    retriever.invoke(BISCUIT, config={"callbacks": [seen]})
    assert "session_3:" in seen.systems[-1] and "Biscuit" in seen.systems[-1]
    assert seen.anchors[-1] != old_anchors
    assert seen.anchors[-1] == [a.id for a in engine.query(BISCUIT).anchors]
