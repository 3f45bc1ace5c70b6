"""One Chroma request for all of a question's searches, opted into through chromadb's public API.

``ChromaBatchedSearch`` gets the ``chromadb`` collection from the host (``client.get_collection``), never
from the LangChain store's private attributes, and gives the documents one search per vector gives.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from langchain_chroma import Chroma
from langchain_core.documents import Document

from gravity_core.context.policy import ContextPolicy
from gravity_core.errors import ConfigurationError
from gravity_core.query.engine import GravityEngine
from gravity_langchain import ChromaBatchedSearch, GravityEmbeddings, GravityRetriever
from gravity_langchain.fusion import document_key


class Host:
    """A Chroma store and the chromadb collection it was opened on, as a host application has them."""

    def __init__(self, client: Any, name: str, store: Chroma) -> None:
        self.client, self.name, self.store = client, name, store

    @property
    def collection(self) -> Any:
        return self.client.get_collection(self.name)


@pytest.fixture
def host(engine: GravityEngine, documents: list[Document]) -> Iterator[Host]:
    # chromadb keeps one in-memory system per process: same settings as everywhere else in the tests
    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    name = f"turns-{uuid.uuid4().hex[:12]}"
    store = Chroma(collection_name=name, embedding_function=GravityEmbeddings(engine.embedder), client=client)
    store.add_documents(documents)
    yield Host(client, name, store)
    store.delete_collection()


def _same(a: list[Document], b: list[Document]) -> bool:
    return [(d.id, d.page_content, d.metadata) for d in a] == [(d.id, d.page_content, d.metadata) for d in b]


@pytest.mark.parametrize("search", [{}, {"filter": {"speaker": "Maya"}}])
def test_one_request_gives_what_one_search_per_vector_gives(
    host: Host, engine: GravityEngine, question: str, search: dict[str, Any]
) -> None:
    queries = [question, *engine.query(question).expansions]
    vectors = host.store.embeddings.embed_documents(queries)  # type: ignore[union-attr]
    batched = ChromaBatchedSearch(host.collection)
    assert batched.accepts(search)

    many = batched.search(vectors, 5, search)

    one_by_one = [host.store.similarity_search_by_vector(v, k=5, **search) for v in vectors]
    assert len(many) == len(queries) > 1
    assert all(_same(a, b) for a, b in zip(many, one_by_one, strict=True))
    if search:
        assert all(d.metadata["speaker"] == "Maya" for docs in many for d in docs)


def test_arguments_it_cannot_map_are_left_to_the_per_vector_path(host: Host) -> None:
    batched = ChromaBatchedSearch(host.collection)
    assert not batched.accepts({"score_threshold": 0.5})
    with pytest.raises(ConfigurationError, match="score_threshold"):
        batched.search([[0.0] * 4], 2, {"score_threshold": 0.5})
    with pytest.raises(ConfigurationError, match="chromadb Collection"):
        ChromaBatchedSearch(host.store)  # the LangChain store is not the collection


def test_batched_search_with_a_host_retriever_is_refused(host: Host, engine: GravityEngine) -> None:
    with pytest.raises(ConfigurationError, match="batched_search"):
        GravityRetriever(
            engine=engine,
            retriever=host.store.as_retriever(),
            batched_search=ChromaBatchedSearch(host.collection),
        )


def test_the_retriever_sends_one_query_request_per_question(
    host: Host, engine: GravityEngine, question: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection = host.collection
    requests: list[int] = []
    original = type(collection).query

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        requests.append(len(kwargs.get("query_embeddings") or []))
        return original(self, *args, **kwargs)

    policy = ContextPolicy(lead=1, every=2)
    retriever = GravityRetriever(
        engine=engine,
        vector_store=host.store,
        k=4,
        policy=policy,
        batched_search=ChromaBatchedSearch(collection),
    )
    expansions = engine.query(question).expansions
    queries = [question, *expansions]
    per_query = [host.store.similarity_search(q, k=4) for q in queries]
    expected = [
        h.item for h in policy.merge(question, per_query[0], expansions, per_query[1:], document_key, top_n=4)
    ]

    monkeypatch.setattr(type(collection), "query", counted)
    docs = retriever.invoke(question)

    assert requests == [len(queries)]
    assert [d.id for d in docs] == [d.id for d in expected]


async def test_async_retriever_uses_the_one_request_too(
    host: Host, engine: GravityEngine, question: str
) -> None:
    retriever = GravityRetriever(
        engine=engine, vector_store=host.store, k=30, batched_search=ChromaBatchedSearch(host.collection)
    )
    plain = GravityRetriever(engine=engine, vector_store=host.store, k=30)
    expected = [d.id for d in plain.invoke(question)]
    assert (
        [d.id for d in await retriever.ainvoke(question)]
        == [d.id for d in retriever.invoke(question)]
        == expected
    )
