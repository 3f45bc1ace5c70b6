"""A Chroma store's own search methods see every GRAVITY query (#16).

The retriever used to send all of a question's vectors straight to ``store._collection.query`` for
any ``langchain_chroma`` store, so a user's wrapper or override of the store's search (a tenant
filter, logging) was skipped. Now it searches through the store's public methods unless the host
opts into a :class:`~gravity_langchain.ChromaBatchedSearch`.
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
from gravity_core.query.engine import GravityEngine
from gravity_langchain import GravityEmbeddings, GravityRetriever

EARLY = ContextPolicy(lead=1, every=1)


class TenantChroma(Chroma):
    """A host's Chroma that only ever shows one speaker's turns, and logs each search."""

    tenant = "Maya"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.searches = 0

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: dict[str, str] | None = None, **kwargs: Any
    ) -> list[Document]:
        self.searches += 1
        return super().similarity_search_by_vector(embedding, k, filter={"speaker": self.tenant}, **kwargs)


@pytest.fixture
def client() -> Any:
    return chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))


@pytest.fixture
def tenant_store(client: Any, engine: GravityEngine, documents: list[Document]) -> Iterator[TenantChroma]:
    store = TenantChroma(
        collection_name=f"tenant-{uuid.uuid4().hex[:12]}",
        embedding_function=GravityEmbeddings(engine.embedder),
        client=client,
    )
    store.add_documents(documents)
    yield store
    store.delete_collection()


def test_a_subclass_override_filters_every_query(
    tenant_store: TenantChroma, engine: GravityEngine, question: str
) -> None:
    expansions = engine.query(question).expansions
    assert expansions
    docs = GravityRetriever(engine=engine, vector_store=tenant_store, k=12, policy=EARLY).invoke(question)

    assert docs and {d.metadata["speaker"] for d in docs} == {"Maya"}
    assert any(d.metadata["gravity_slot"] == "expansion" for d in docs)
    assert tenant_store.searches == 1 + len(expansions)


async def test_the_async_path_goes_through_the_override_too(
    tenant_store: TenantChroma, engine: GravityEngine, question: str
) -> None:
    docs = await GravityRetriever(engine=engine, vector_store=tenant_store, k=12, policy=EARLY).ainvoke(
        question
    )
    assert docs and {d.metadata["speaker"] for d in docs} == {"Maya"}
    assert tenant_store.searches == 1 + len(engine.query(question).expansions)


def test_a_wrapped_search_method_on_a_plain_chroma_is_called(
    client: Any, engine: GravityEngine, documents: list[Document], question: str
) -> None:
    store = Chroma(
        collection_name=f"plain-{uuid.uuid4().hex[:12]}",
        embedding_function=GravityEmbeddings(engine.embedder),
        client=client,
    )
    store.add_documents(documents)
    logged: list[int] = []
    original = store.similarity_search_by_vector

    def logging_search(embedding: list[float], k: int = 4, **kwargs: Any) -> list[Document]:
        logged.append(k)
        return original(embedding, k, **kwargs)

    store.similarity_search_by_vector = logging_search  # type: ignore[method-assign]
    try:
        GravityRetriever(engine=engine, vector_store=store, k=12, fetch_k=7, policy=EARLY).invoke(question)
    finally:
        store.delete_collection()
    assert logged == [7] * (1 + len(engine.query(question).expansions))
