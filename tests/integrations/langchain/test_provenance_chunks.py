"""GravityRetriever over a store of chunks of several turns (documents_from_utterances(...,
turns_per_document=n)): the anchors' source turns are fetched as the chunks holding them."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore

from gravity_core.context.policy import DEFAULT_POLICY
from gravity_core.errors import ConfigurationError
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.serving.provenance import UTTERANCE_IDS_KEY, held_utterances
from gravity_core.serving.turn_documents import chunk_ids_by_utterance
from gravity_langchain import GravityEmbeddings, GravityRetriever
from gravity_langchain.messages import documents_from_utterances

K = 10
TURNS = 3
LOGGER = "gravity_core.serving.provenance"


class AskedStore(InMemoryVectorStore):
    """InMemoryVectorStore that records the ids it is asked for by id."""

    def __init__(self, embedding: Embeddings) -> None:
        super().__init__(embedding)
        self.asked: list[list[str]] = []

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        self.asked.append(list(ids))
        return super().get_by_ids(ids)

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        self.asked.append(list(ids))
        return super().get_by_ids(ids)


@pytest.fixture
def chunk_store(engine: GravityEngine, utterances: list[Utterance]) -> AskedStore:
    store = AskedStore(GravityEmbeddings(engine.embedder))
    store.add_documents(documents_from_utterances(utterances, turns_per_document=TURNS))
    return store


def provenance(docs: list[Document]) -> list[Document]:
    return [d for d in docs if d.metadata["gravity_slot"] == "provenance"]


def sources_by_anchor(engine: GravityEngine, question: str) -> dict[str, set[str]]:
    return {s.label: set(s.utterance_ids) for s in engine.query(question).sources}


def test_the_chunks_holding_the_anchors_source_turns_are_fetched_sync_and_async(
    engine: GravityEngine, chunk_store: AskedStore, question: str
) -> None:
    retriever = GravityRetriever(engine=engine, vector_store=chunk_store, k=K, turns_per_document=TURNS)
    docs = retriever.invoke(question)
    fetched = provenance(docs)
    plain = {d.id for d in chunk_store.similarity_search(question, k=K)}
    assert fetched and any(d.id not in plain for d in fetched), "provenance added no chunk of its own"
    sources = sources_by_anchor(engine, question)
    for doc in fetched:
        assert doc.id is not None and doc.id.endswith(f"+{TURNS}")
        (why,) = [f for f in doc.metadata["gravity_found_by"] if f["query"] == "provenance"]
        # The chunk holds a source turn of the anchor it names.
        assert sources[why["text"]] & set(held_utterances(doc.id, doc.metadata))
    assert [d.id for d in asyncio.run(retriever.ainvoke(question))] == [d.id for d in docs]
    # Through the store's own retriever, too.
    through = GravityRetriever(
        engine=engine,
        retriever=chunk_store.as_retriever(search_kwargs={"k": K}),
        k=K,
        turns_per_document=TURNS,
    )
    assert {d.id for d in provenance(through.invoke(question))} == {d.id for d in fetched}


@pytest.mark.parametrize("turns_per_document", [TURNS, 12])
def test_the_store_is_asked_once_for_each_chunk_holding_a_turn(
    engine: GravityEngine, utterances: list[Utterance], question: str, turns_per_document: int
) -> None:
    store = AskedStore(GravityEmbeddings(engine.embedder))
    store.add_documents(documents_from_utterances(utterances, turns_per_document=turns_per_document))
    retriever = GravityRetriever(
        engine=engine, vector_store=store, k=K, turns_per_document=turns_per_document
    )
    docs = retriever.invoke(question)
    chunk_of = chunk_ids_by_utterance(utterances, turns_per_document)
    turns = DEFAULT_POLICY.source_turns(engine.query(question).sources)
    expected = list(dict.fromkeys(chunk_of[t.utterance_id] for t in turns))
    assert store.asked == [expected]
    assert provenance(docs)
    if turns_per_document == 12:
        assert len(expected) < len(turns)  # chunks holding several of the turns are asked for once


def test_a_chunk_store_searched_as_one_turn_per_document_is_warned_about_once(
    engine: GravityEngine, chunk_store: AskedStore, question: str, caplog: pytest.LogCaptureFixture
) -> None:
    retriever = GravityRetriever(engine=engine, vector_store=chunk_store, k=K)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        docs = retriever.invoke(question)
        asyncio.run(retriever.ainvoke(question))
    assert not provenance(docs)
    assert [d.id for d in docs] == [d.id for d in chunk_store.similarity_search(question, k=K)]
    warned = [r.getMessage() for r in caplog.records if "holds none of the turns" in r.getMessage()]
    assert len(warned) == 1 and UTTERANCE_IDS_KEY in warned[0]


@pytest.mark.parametrize("turns", [0, -1])
def test_turns_per_document_below_one_is_refused(
    engine: GravityEngine, chunk_store: AskedStore, turns: int
) -> None:
    with pytest.raises(ConfigurationError, match="at least 1"):
        GravityRetriever(engine=engine, vector_store=chunk_store, turns_per_document=turns)


def test_chunks_come_back_from_chroma_whose_metadata_holds_only_scalars(
    engine: GravityEngine, utterances: list[Utterance], question: str, tmp_path: Path
) -> None:
    import chromadb
    from chromadb.config import Settings
    from langchain_chroma import Chroma

    client = chromadb.PersistentClient(
        path=str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    store = Chroma(
        collection_name=f"chunks-{uuid.uuid4().hex}",
        embedding_function=GravityEmbeddings(engine.embedder),
        client=client,
    )
    store.add_documents(documents_from_utterances(utterances, turns_per_document=TURNS))
    docs = GravityRetriever(engine=engine, vector_store=store, k=K, turns_per_document=TURNS).invoke(question)
    store.delete_collection()
    fetched = provenance(docs)
    assert fetched, "Chroma handed back no chunk"
    sources = sources_by_anchor(engine, question)
    for doc in fetched:
        (why,) = [f for f in doc.metadata["gravity_found_by"] if f["query"] == "provenance"]
        assert sources[why["text"]] & set(doc.metadata[UTTERANCE_IDS_KEY].split(","))
