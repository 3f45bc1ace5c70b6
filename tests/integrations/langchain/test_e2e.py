"""End to end: a KB of the sample conversation, its turns in Chroma, a full LCEL chain with a fake model.

Checks, on embedded Chroma (in memory and on disk) and on a Chroma server, that (a) every expanded
query reached the vector store, (b) the prompt the model received holds the three anchor blocks
and the retrieved turns, (c) sync and async runs give the same answer.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np
import pytest
from langchain_chroma import Chroma
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import BaseMessage

from gravity_core.embeddings import HashingEmbedder
from gravity_core.query.engine import GravityEngine
from gravity_langchain import ANCHORS_EVENT, GravityEmbeddings, GravityRetriever, build_gravity_chain
from tests.integrations.langchain.conftest import EARLY


class SpyChroma(Chroma):
    """langchain-chroma's store, recording the vectors it is searched with."""

    searched: list[list[float]]

    def similarity_search_by_vector(
        self, embedding: list[float], *args: Any, **kwargs: Any
    ) -> list[Document]:
        self.searched.append(list(embedding))
        return super().similarity_search_by_vector(embedding, *args, **kwargs)


class DigestModel(FakeListChatModel):
    """Answers with a digest of the prompt it got, so equal answers mean equal prompts."""

    responses: list[str] = ["unused"]

    def _call(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> str:
        text = "\n".join(f"{m.type}: {m.content}" for m in messages)
        return "answer-" + hashlib.sha256(text.encode()).hexdigest()[:16]


class PromptCapture(BaseCallbackHandler):
    """Keeps the messages each chat-model run received, and the custom events."""

    def __init__(self) -> None:
        self.prompts: list[list[BaseMessage]] = []
        self.events: list[tuple[str, Any]] = []

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID, **kwargs: Any
    ) -> None:
        self.prompts.extend(messages)

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append((name, data))


def ephemeral_client() -> Any:
    """An in-memory Chroma client.

    chromadb keeps one in-memory system per process and refuses a second EphemeralClient with other
    settings; these are the ones gravity_core's ChromaAnchorIndex uses (telemetry off).
    """
    import chromadb
    from chromadb.config import Settings

    return chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))


@pytest.fixture(
    params=["ephemeral", "persist_directory", pytest.param("server", marks=pytest.mark.server)],
)
def chroma(request: pytest.FixtureRequest, embedder: HashingEmbedder, tmp_path: Path) -> Iterator[SpyChroma]:
    import chromadb

    name = f"gravity-e2e-{uuid.uuid4().hex[:12]}"
    embeddings = GravityEmbeddings(embedder)
    settings: dict[str, Any] = {"collection_name": name, "embedding_function": embeddings}
    if request.param == "ephemeral":
        settings["client"] = ephemeral_client()
    elif request.param == "persist_directory":
        settings["persist_directory"] = str(tmp_path / "chroma")
    else:
        host, port = request.getfixturevalue("chroma_server")
        settings["client"] = chromadb.HttpClient(host=host, port=port)
    store = SpyChroma(**settings)
    store.searched = []
    try:
        yield store
    finally:
        store.delete_collection()


async def test_full_chain_over_chroma(
    chroma: SpyChroma, engine: GravityEngine, documents: list[Document], question: str
) -> None:
    chroma.add_documents(documents)
    context = engine.query(question)
    assert len(context.expansions) >= 3
    chain = build_gravity_chain(engine, chroma, DigestModel(), k=4, policy=EARLY)

    capture = PromptCapture()
    sync_answer = chain.invoke({"question": question}, config={"callbacks": [capture]})
    sync_searched = list(chroma.searched)
    chroma.searched.clear()
    async_answer = await chain.ainvoke({"question": question}, config={"callbacks": [capture]})

    # (a) searched by vector: async the question and every expansion at once; sync the question,
    # then the expansions in order only until the one place of k=4 the policy gives them is filled
    wanted = GravityEmbeddings(engine.embedder).embed_documents([question, *context.expansions])
    assert len(chroma.searched) == len(wanted)
    for vector in wanted:
        assert any(np.allclose(vector, seen, atol=1e-6) for seen in chroma.searched)
    assert 2 <= len(sync_searched) < len(wanted)
    for vector, seen in zip(wanted[: len(sync_searched)], sync_searched, strict=True):
        assert np.allclose(vector, seen, atol=1e-6)

    # (b) the prompt holds the three anchor blocks and the retrieved turns
    sync_prompt, async_prompt = capture.prompts
    system = sync_prompt[0].content
    assert isinstance(system, str)
    assert context.text in system
    for tag in ("topic_summaries", "entity_profiles", "event_records"):
        assert f"<{tag}>" in system
        assert f"</{tag}>" in system
    retrieved = GravityRetriever(policy=EARLY, engine=engine, vector_store=chroma, k=4).invoke(question)
    assert len(retrieved) == 4
    memories = system.split("</retrieved_memories>")[0]
    for doc in retrieved:
        assert f"- {doc.page_content}" in memories
    assert sync_prompt[-1].content == question

    # (c) sync and async agree: same prompt, same answer
    assert [m.content for m in async_prompt] == [m.content for m in sync_prompt]
    assert sync_answer == async_answer
    assert sync_answer.startswith("answer-")

    # tracing: the anchors event reached the chain's handler, once per run
    assert (
        [name for name, _ in capture.events]
        == [ANCHORS_EVENT, ANCHORS_EVENT]
        == ["gravity_anchors_selected"] * 2
    )
    assert [a["id"] for a in capture.events[0][1]["anchors"]] == [a.id for a in context.anchors]
