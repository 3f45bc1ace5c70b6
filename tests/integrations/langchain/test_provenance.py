"""GravityRetriever's retrieval by provenance: the selected anchors' source turns fetched from the
store by id, and what it says when the store cannot give them."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

from gravity_core.context.policy import DEFAULT_POLICY
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.serving.provenance import UTTERANCE_IDS_KEY
from gravity_langchain import GravityEmbeddings, GravityRetriever
from gravity_langchain.messages import documents_from_utterances

K = 10


def provenance(docs: list[Document]) -> list[Document]:
    return [d for d in docs if d.metadata["gravity_slot"] == "provenance"]


class NoFetchStore(InMemoryVectorStore):
    """A store without get_by_ids, like many older LangChain stores."""

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        raise NotImplementedError("no get_by_ids here")

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        raise NotImplementedError("no get_by_ids here")


class MetadataNoneStore(InMemoryVectorStore):
    """get_by_ids as langchain-chroma's behaves for documents stored without metadata."""

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        Document(page_content="x", metadata=None)  # type: ignore[arg-type]  # raises ValidationError
        return []


class ListRetriever(BaseRetriever):
    """A retriever that is not a vector store's."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return self.docs[:4]


def test_source_turns_come_sync_and_async_alike(
    engine: GravityEngine, documents: list[Document], make_store: Callable[..., Any], question: str
) -> None:
    store = make_store(GravityEmbeddings(engine.embedder), documents)
    retriever = GravityRetriever(engine=engine, vector_store=store, k=K)
    docs = retriever.invoke(question)
    assert provenance(docs)
    assert [d.id for d in asyncio.run(retriever.ainvoke(question))] == [d.id for d in docs]
    # Through the store's own retriever, too.
    through = GravityRetriever(engine=engine, retriever=store.as_retriever(search_kwargs={"k": K}), k=K)
    assert {d.id for d in provenance(through.invoke(question))} == {d.id for d in provenance(docs)}


def test_a_store_that_cannot_fetch_by_id_is_said_once_and_searched_alone(
    engine: GravityEngine, documents: list[Document], question: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = NoFetchStore(GravityEmbeddings(engine.embedder))
    store.add_documents(documents)
    retriever = GravityRetriever(engine=engine, vector_store=store, k=K)
    with caplog.at_level(logging.INFO, logger="gravity_core.serving.provenance"):
        first = retriever.invoke(question)
        retriever.invoke(question)
    assert not provenance(first)
    assert [d.id for d in first] == [d.id for d in store.similarity_search(question, k=K)]
    told = [r for r in caplog.records if "cannot fetch documents by id" in r.getMessage()]
    assert len(told) == 1 and "NoFetchStore" in told[0].getMessage()


def test_documents_stored_without_metadata_in_chroma_get_a_hint(
    engine: GravityEngine, documents: list[Document], question: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = MetadataNoneStore(GravityEmbeddings(engine.embedder))
    store.add_documents(documents)
    with caplog.at_level(logging.INFO, logger="gravity_core.serving.provenance"):
        docs = GravityRetriever(engine=engine, vector_store=store, k=K).invoke(question)
    assert len(docs) == K and not provenance(docs)
    assert "without metadata" in caplog.text


def test_a_retriever_of_no_store_cannot_fetch(
    engine: GravityEngine, documents: list[Document], question: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="gravity_core.serving.provenance"):
        docs = GravityRetriever(engine=engine, retriever=ListRetriever(docs=documents), k=4).invoke(question)
    assert docs and not provenance(docs)
    assert "ListRetriever cannot fetch documents by id" in caplog.text


def test_turns_indexed_under_other_ids_are_warned_about_once_naming_the_id(
    engine: GravityEngine, documents: list[Document], question: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = InMemoryVectorStore(GravityEmbeddings(engine.embedder))
    store.add_documents([d.model_copy(update={"id": f"doc-{n}"}) for n, d in enumerate(documents)])
    retriever = GravityRetriever(engine=engine, vector_store=store, k=K)
    with caplog.at_level(logging.WARNING, logger="gravity_core.serving.provenance"):
        retriever.invoke(question)
        retriever.invoke(question)
    warned = [r.getMessage() for r in caplog.records if "holds none of the turns" in r.getMessage()]
    first_asked = DEFAULT_POLICY.source_turns(engine.query(question).sources)[0].utterance_id
    assert len(warned) == 1 and UTTERANCE_IDS_KEY in warned[0] and repr(first_asked) in warned[0]


def test_a_document_of_several_turns_is_fetched_once_for_them(
    engine: GravityEngine, documents: list[Document], question: str
) -> None:
    # Each document is its turn plus the next one, under the first turn's id, listing both.
    pairs = [
        Document(
            page_content=f"{a.page_content}\n{b.page_content}",
            id=a.id,
            metadata={"session": a.metadata["session"], UTTERANCE_IDS_KEY: f"{a.id},{b.id}"},
        )
        for a, b in zip(documents, documents[1:], strict=False)
    ]
    store = InMemoryVectorStore(GravityEmbeddings(engine.embedder))
    store.add_documents(pairs)
    docs = GravityRetriever(engine=engine, vector_store=store, k=K).invoke(question)
    fetched = provenance(docs)
    assert fetched and len({d.id for d in docs}) == len(docs)
    sources = {u for s in engine.query(question).sources for u in s.utterance_ids}
    assert all(set(d.metadata[UTTERANCE_IDS_KEY].split(",")) & sources for d in fetched)


def test_turns_indexed_with_documents_from_utterances_come_back_from_chroma(
    engine: GravityEngine, utterances: list[Utterance], question: str, tmp_path: Path
) -> None:
    import chromadb
    from chromadb.config import Settings
    from langchain_chroma import Chroma

    documents = documents_from_utterances(utterances)
    first = documents[0]
    assert first.id == utterances[0].id and first.page_content.startswith(f"{utterances[0].speaker}: ")
    assert first.metadata == {
        "speaker": utterances[0].speaker,
        "session": utterances[0].session,
        "id": utterances[0].id,
        "date": utterances[0].day.isoformat(),
    }
    # A client of its own folder: chromadb keeps one in-memory system per process, whose settings
    # the first test to make one decides.
    client = chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    name = f"turns-{uuid.uuid4().hex}"
    store = Chroma(collection_name=name, embedding_function=GravityEmbeddings(engine.embedder), client=client)
    store.add_documents(documents)
    docs = GravityRetriever(engine=engine, vector_store=store, k=K).invoke(question)
    store.delete_collection()
    assert provenance(docs), "Chroma handed back no source turn"
