"""langchain-tests' standard retriever suite, offline, over a vector store and over a host retriever."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import NumpyAnchorIndex
from gravity_langchain import GravityEmbeddings, GravityRetriever

SAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sample_conversation.jsonl"


@cache
def _engine_and_store() -> tuple[GravityEngine, InMemoryVectorStore]:
    """The sample conversation's KB (offline extractor, hashing embedder) and its turns in a store."""
    embedder = HashingEmbedder()
    utterances = load_conversation(SAMPLE)
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder)
    builder.add(utterances)
    engine = GravityEngine(builder.kb, NumpyAnchorIndex.from_vectors(builder.vectors), embedder)
    store = InMemoryVectorStore(GravityEmbeddings(embedder))
    store.add_documents([Document(page_content=f"{u.speaker}: {u.text}", id=u.id) for u in utterances])
    return engine, store


class TestGravityRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return GravityRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        engine, store = _engine_and_store()
        return {"engine": engine, "vector_store": store, "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "What did Maya adopt, and where does she work now?"


class TestGravityRetrieverOverRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return GravityRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        engine, store = _engine_and_store()
        return {"engine": engine, "retriever": store.as_retriever(search_kwargs={"k": 3}), "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "When is Jonas running the marathon?"
