"""One Chroma request for all of a question's searches: same documents as one search per vector."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from langchain_chroma import Chroma
from langchain_core.documents import Document

from gravity_core.context_policy import ContextPolicy
from gravity_core.query.engine import GravityEngine
from gravity_langchain import GravityEmbeddings, GravityRetriever
from gravity_langchain.batched_search import can_search_many, search_many_by_vector
from gravity_langchain.fusion import document_key


@pytest.fixture
def chroma(engine: GravityEngine, documents: list[Document]) -> Iterator[Chroma]:
    # chromadb keeps one in-memory system per process: same settings as everywhere else in the tests
    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    store = Chroma(
        collection_name=f"turns-{uuid.uuid4().hex[:12]}",
        embedding_function=GravityEmbeddings(engine.embedder),
        client=client,
    )
    store.add_documents(documents)
    yield store
    store.delete_collection()


def _same(a: list[Document], b: list[Document]) -> bool:
    return [(d.id, d.page_content, d.metadata) for d in a] == [(d.id, d.page_content, d.metadata) for d in b]


@pytest.mark.parametrize("search", [{}, {"filter": {"speaker": "Maya"}}])
def test_one_request_gives_what_one_search_per_vector_gives(
    chroma: Chroma, engine: GravityEngine, question: str, search: dict[str, Any]
) -> None:
    queries = [question, *engine.query(question).expansions]
    vectors = chroma.embeddings.embed_documents(queries)  # type: ignore[union-attr]
    assert can_search_many(chroma, search)

    many = search_many_by_vector(chroma, vectors, 5, search)

    one_by_one = [chroma.similarity_search_by_vector(v, k=5, **search) for v in vectors]
    assert len(many) == len(queries) > 1
    assert all(_same(a, b) for a, b in zip(many, one_by_one, strict=True))
    if search:
        assert all(d.metadata["speaker"] == "Maya" for docs in many for d in docs)


def test_stores_and_arguments_it_cannot_map_are_left_to_the_per_vector_path(chroma: Chroma) -> None:
    class OwnChroma(Chroma):  # a subclass may override the search; it keeps the per-vector path
        pass

    assert not can_search_many(chroma, {"score_threshold": 0.5})
    assert not can_search_many(OwnChroma.__new__(OwnChroma), {})


def test_the_retriever_sends_one_query_request_per_question(
    chroma: Chroma, engine: GravityEngine, question: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection = chroma._collection
    requests: list[int] = []
    original = type(collection).query

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        requests.append(len(kwargs.get("query_embeddings") or []))
        return original(self, *args, **kwargs)

    policy = ContextPolicy(lead=1, every=2)
    retriever = GravityRetriever(engine=engine, vector_store=chroma, k=4, policy=policy)
    expansions = engine.query(question).expansions
    queries = [question, *expansions]
    per_query = [chroma.similarity_search(q, k=4) for q in queries]
    expected = [
        h.item for h in policy.merge(question, per_query[0], expansions, per_query[1:], document_key, top_n=4)
    ]

    monkeypatch.setattr(type(collection), "query", counted)
    docs = retriever.invoke(question)

    assert requests == [len(queries)]
    assert [d.id for d in docs] == [d.id for d in expected]


async def test_async_retriever_uses_the_one_request_too(
    chroma: Chroma, engine: GravityEngine, question: str
) -> None:
    retriever = GravityRetriever(engine=engine, vector_store=chroma, k=4)
    assert [d.id for d in await retriever.ainvoke(question)] == [d.id for d in retriever.invoke(question)]
