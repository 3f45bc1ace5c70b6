"""Fixtures of the LangChain integration tests: a KB of the sample conversation and its turns as documents.

The KB is built once per session with the offline extractor and the hashing embedder (about 0.5 s);
tests that need to count or slow down calls wrap these objects, never modify them. The recall tests
share the KBs of the LoCoMo dev conversations (MiniLM), built once per session (about two minutes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore

from gravity_core.build import AnchorBuilder
from gravity_core.context.policy import ContextPolicy
from gravity_core.embeddings import HashingEmbedder, default_embedder
from gravity_core.embeddings.base import Embedder
from gravity_core.eval.datasets import EvalSample, load_locomo_eval
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import NumpyAnchorIndex
from gravity_core.schema import Utterance
from gravity_langchain import GravityEmbeddings

SAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sample_conversation.jsonl"
LOCOMO_DEV = Path(__file__).resolve().parents[4] / "shared" / "data" / "locomo" / "locomo_dev.json"
#: A policy giving expansions places from the second result on, for tests of how they are searched
#: (the shipped policy places them only after the question's first 25 hits).
EARLY = ContextPolicy(lead=1, every=2)
#: EARLY, but the merge may take each expansion's second hit too, which comes after every
#: expansion's first: every expansion is searched (with depth 1 the retriever stops searching
#: once the expansions' places are filled), for tests of how each query is embedded and searched.
EVERY_SEARCHED = ContextPolicy(lead=1, every=2, depth=2)


@dataclass(frozen=True)
class LocomoKBs:
    """The LoCoMo dev conversations, each with its KB (offline extractor, MiniLM), and the embedder."""

    embedder: Embedder
    conversations: list[tuple[EvalSample, GravityEngine]]


@pytest.fixture(scope="session")
def locomo_dev_kbs(nlp: Any) -> LocomoKBs:
    """Built once for the recall tests of the retriever and of the LangGraph store."""
    embedder = default_embedder()
    conversations = []
    for sample in load_locomo_eval(LOCOMO_DEV):
        builder = AnchorBuilder(OfflineExtractor(embedder, pipeline=nlp), embedder)
        builder.add(sample.utterances)
        conversations.append((sample, GravityEngine.from_builder(builder)))
    return LocomoKBs(embedder, conversations)


@pytest.fixture
def question() -> str:
    """A question with anchors of all three kinds and several expansions in the hashing KB."""
    return "Where does Maya work now, and what happened with Biscuit?"


@pytest.fixture(scope="session")
def embedder() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture(scope="session")
def utterances(sample_utterances: list[Utterance]) -> list[Utterance]:
    return sample_utterances


@pytest.fixture(scope="session")
def built(sample_kb: AnchorBuilder) -> AnchorBuilder:
    return sample_kb


@pytest.fixture
def engine(built: AnchorBuilder, embedder: HashingEmbedder) -> GravityEngine:
    return GravityEngine(built.kb, NumpyAnchorIndex.from_vectors(built.vectors), embedder)


@pytest.fixture
def documents(utterances: list[Utterance]) -> list[Document]:
    """One document per turn, ids as in the KB."""
    return [
        Document(
            page_content=f"{u.speaker}: {u.text}",
            id=u.id,
            metadata={"session": u.session, "speaker": u.speaker, "timestamp": u.timestamp.isoformat()},
        )
        for u in utterances
    ]


class CountingEmbeddings(Embeddings):
    """Wraps LangChain embeddings and records every call."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.document_calls: list[list[str]] = []
        self.query_calls: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.document_calls.append(list(texts))
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.query_calls.append(text)
        return self.inner.embed_query(text)


class CountingGravityEmbeddings(GravityEmbeddings):
    """GravityEmbeddings that records calls (still recognised as sharing the engine's embedder)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.document_calls: list[list[str]] = []
        self.query_calls: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.document_calls.append(list(texts))
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.query_calls.append(text)
        return super().embed_query(text)


class SpyStore(InMemoryVectorStore):
    """InMemoryVectorStore that records the vectors it is searched with."""

    def __init__(self, embedding: Embeddings) -> None:
        super().__init__(embedding)
        self.searched: list[list[float]] = []
        self.fetched: list[int] = []

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[Document]:
        self.searched.append(list(embedding))
        self.fetched.append(k)
        return super().similarity_search_by_vector(embedding, k, **kwargs)


@pytest.fixture
def make_store() -> Callable[..., SpyStore]:
    """``make_store(embeddings, documents)``: a :class:`SpyStore` holding the documents."""

    def make(embeddings: Embeddings, documents: Sequence[Document]) -> SpyStore:
        store = SpyStore(embeddings)
        store.add_documents(list(documents))
        return store

    return make


@pytest.fixture
def counting() -> Callable[[Embeddings], CountingEmbeddings]:
    """``counting(embeddings)``: the embeddings, with their calls recorded."""
    return CountingEmbeddings


@pytest.fixture
def shared_embeddings(embedder: HashingEmbedder) -> CountingGravityEmbeddings:
    """The engine's own embedder as LangChain embeddings, calls recorded."""
    return CountingGravityEmbeddings(embedder)
