"""Adapters: LangChain embeddings <-> GRAVITY embedders, LangChain chat models as the extraction model."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError, ProviderError
from gravity_core.extract.llm import LLMExtractor
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import NumpyAnchorIndex
from gravity_core.schema import Utterance
from gravity_langchain import (
    GravityEmbeddings,
    GravityRetriever,
    LangChainChatModel,
    LangChainEmbedder,
    build_kb_from_messages,
    shares_embedder,
)
from tests.integrations.langchain.conftest import EARLY


class WordCounts(Embeddings):
    """Unnormalized bag-of-words counts over a tiny vocabulary (similarities mean something)."""

    vocabulary = ("maya", "jonas", "dog", "nurse", "run", "bristol")

    def __init__(self) -> None:
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [[float(t.lower().count(word)) for word in self.vocabulary] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class RateLimitError(Exception):
    """Named like the OpenAI SDK's error."""


class Failing(Embeddings):
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise self.exc

    def embed_query(self, text: str) -> list[float]:
        raise self.exc


class WrongShape(WordCounts):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return super().embed_documents(texts)[:-1]


# -- LangChain Embeddings -> GRAVITY Embedder --------------------------------------------------


def test_langchain_embedder_normalizes_rows_and_knows_its_dimension() -> None:
    embedder = LangChainEmbedder(WordCounts(), name="words")
    matrix = embedder.embed(["Maya Maya dog", "Jonas runs to Bristol", "nothing here"])
    assert matrix.dtype == np.float32
    assert matrix.shape == (3, 6)
    assert np.allclose(np.linalg.norm(matrix[:2], axis=1), 1.0)
    assert np.allclose(matrix[0], np.array([2, 0, 1, 0, 0, 0]) / np.sqrt(5))
    assert not matrix[2].any()  # a zero vector stays zero instead of dividing by zero
    assert embedder.name == "words"
    assert embedder.dim == 6


def test_langchain_embedder_probes_the_dimension_once_and_handles_empty_input() -> None:
    words = WordCounts()
    embedder = LangChainEmbedder(words)
    assert embedder.embed([]).shape == (0, 6)
    assert embedder.dim == 6
    assert words.calls == 1
    assert LangChainEmbedder(WordCounts(), dim=6).embed([]).shape == (0, 6)


def test_langchain_embedder_default_name_names_class_and_model() -> None:
    assert LangChainEmbedder(WordCounts()).name == "langchain:WordCounts"
    words = WordCounts()
    words.model = "bow-6"  # type: ignore[attr-defined]
    assert LangChainEmbedder(words).name == "langchain:WordCounts:bow-6"


def test_langchain_embedder_errors() -> None:
    with pytest.raises(ProviderError, match="slow down"):
        LangChainEmbedder(Failing(RateLimitError("slow down")), dim=3).embed(["x"])
    with pytest.raises(KeyError):  # our bugs are not disguised as provider failures
        LangChainEmbedder(Failing(KeyError("bug")), dim=3).embed(["x"])
    with pytest.raises(ConfigurationError, match="shape"):
        LangChainEmbedder(WrongShape()).embed(["a", "b"])
    with pytest.raises(ConfigurationError, match="expected 4"):
        LangChainEmbedder(WordCounts(), dim=4).embed(["a"])
    with pytest.raises(ConfigurationError):
        LangChainEmbedder(HashingEmbedder())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        LangChainEmbedder(WordCounts(), dim=0)


def test_langchain_embeddings_build_a_kb_and_rerank_its_queries(utterances: list[Utterance]) -> None:
    """A KB built and queried through LangChainEmbedder gives what the wrapped GRAVITY embedder gives."""
    hashing = HashingEmbedder()
    wrapped = LangChainEmbedder(GravityEmbeddings(hashing), name="langchain-hashing")
    assert np.allclose(
        wrapped.embed(["Maya adopted a dog"]), hashing.embed(["Maya adopted a dog"]), atol=1e-6
    )

    builder = AnchorBuilder(OfflineExtractor(wrapped), wrapped)
    builder.add(utterances)
    assert builder.kb.build.embedder == "langchain-hashing"
    reference = AnchorBuilder(OfflineExtractor(hashing), hashing)
    reference.add(utterances)

    question = "What happened with Biscuit?"
    ours = GravityEngine(builder.kb, NumpyAnchorIndex.from_vectors(builder.vectors), wrapped).query(question)
    theirs = GravityEngine(reference.kb, NumpyAnchorIndex.from_vectors(reference.vectors), hashing).query(
        question
    )
    assert [(a.id, a.reason) for a in ours.anchors] == [(a.id, a.reason) for a in theirs.anchors]
    assert [a.score for a in ours.anchors] == pytest.approx([a.score for a in theirs.anchors], abs=1e-5)
    with pytest.raises(ConfigurationError):  # the KB remembers which model made its vectors
        GravityEngine(builder.kb, NumpyAnchorIndex.from_vectors(builder.vectors), hashing)


# -- GRAVITY Embedder -> LangChain Embeddings --------------------------------------------------


async def test_gravity_embeddings_serve_langchain_calls() -> None:
    hashing = HashingEmbedder(dim=64)
    embeddings = GravityEmbeddings(hashing)
    texts = ["Maya adopted a dog", "Jonas ran a marathon"]
    expected = hashing.embed(texts)
    documents = embeddings.embed_documents(texts)
    assert isinstance(documents[0][0], float)
    assert np.allclose(documents, expected)
    assert np.allclose(embeddings.embed_query(texts[1]), expected[1])
    assert np.allclose(await embeddings.aembed_documents(texts), expected)
    assert np.allclose(await embeddings.aembed_query(texts[0]), expected[0])
    assert embeddings.embed_documents([]) == []
    with pytest.raises(ConfigurationError):
        GravityEmbeddings(WordCounts())  # type: ignore[arg-type]


def test_shares_embedder() -> None:
    hashing = HashingEmbedder()
    words = WordCounts()
    assert shares_embedder(GravityEmbeddings(hashing), hashing)
    assert shares_embedder(GravityEmbeddings(HashingEmbedder()), hashing)  # same name, same model
    assert not shares_embedder(GravityEmbeddings(HashingEmbedder(dim=64)), hashing)
    assert shares_embedder(words, LangChainEmbedder(words))
    assert not shares_embedder(WordCounts(), LangChainEmbedder(words))
    assert not shares_embedder(None, hashing)


def test_an_engine_on_the_stores_own_embeddings_embeds_the_question_once(
    utterances: list[Utterance], documents: list[Document], make_store: Any, counting: Any
) -> None:
    """Engine on LangChainEmbedder(E), store on E: the question is embedded once, by the store."""
    store_embeddings = counting(GravityEmbeddings(HashingEmbedder()))
    embedder = LangChainEmbedder(store_embeddings, name="shared")
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder)
    builder.add(utterances)
    engine = GravityEngine(builder.kb, NumpyAnchorIndex.from_vectors(builder.vectors), embedder)
    store = make_store(store_embeddings, documents)
    question = "What happened with Biscuit?"
    expansions = engine.query(question).expansions
    store_embeddings.document_calls.clear()
    store_embeddings.query_calls.clear()

    GravityRetriever(policy=EARLY, engine=engine, vector_store=store).invoke(question)

    assert store_embeddings.query_calls == [question]
    assert store_embeddings.document_calls == [expansions]


# -- LangChain chat model -> GRAVITY ChatModel -------------------------------------------------

SAID = datetime(2024, 3, 9, 16, 45, tzinfo=UTC)

FUSED_ANSWER = {
    "entities": [
        {
            "name": "Maya",
            "type": "person",
            "is_speaker": True,
            "attributes": [
                {"name": "occupation", "value": "charge nurse", "exclusive": True, "sources": ["m2"]},
            ],
            "relations": [{"relation": "owns", "object": "Biscuit", "object_type": "pet", "sources": ["m1"]}],
            "sources": ["m1", "m2"],
        }
    ],
    "events": [
        {"who": ["Maya"], "what": "Maya adopted a dog named Biscuit", "when": "yesterday", "sources": ["m1"]}
    ],
    "topics": [
        {
            "label": "Maya's new dog",
            "keywords": ["dog", "Biscuit"],
            "participants": ["Maya"],
            "summary": "Maya adopted Biscuit.",
            "sources": ["m1"],
        }
    ],
}


def test_a_langchain_chat_model_extracts_a_kb_from_langchain_messages() -> None:
    chat = FakeListChatModel(
        responses=["Sorry, no JSON here.", "```json\n" + json.dumps(FUSED_ANSWER) + "\n```"]
    )
    model = LangChainChatModel(chat, name="fake-model")
    assert model.model_name == "fake-model"
    messages = [
        HumanMessage("I adopted a dog yesterday! His name is Biscuit.", name="Maya", id="m1"),
        HumanMessage("And I start as a charge nurse in April.", name="Maya", id="m2"),
        AIMessage("Congratulations on both!", name="Jonas", id="m3"),
    ]
    embedder = HashingEmbedder()
    builder = build_kb_from_messages(
        messages, embedder=embedder, extractor=LLMExtractor(model, fused=True), default_time=SAID
    )
    kb = builder.kb
    maya = next(e for e in kb.entities.values() if e.name == "Maya")
    assert [(a.name, a.value) for a in maya.current_attributes()] == [("occupation", "charge nurse")]
    (event,) = kb.events.values()
    assert event.sources == ["m1"]
    assert event.when is not None
    assert event.when.start == date(2024, 3, 8)
    assert chat.i == 0  # both canned answers used: the first was re-asked through the JSON path
    assert kb.build.extractor == "llm:fake-model:fused"


def test_build_kb_from_messages_takes_the_chat_model_itself(tmp_path: Path) -> None:
    chat = FakeListChatModel(responses=[json.dumps(FUSED_ANSWER)])
    messages = [
        HumanMessage("I adopted a dog yesterday! His name is Biscuit.", name="Maya", id="m1"),
        HumanMessage("And I start as a charge nurse in April.", name="Maya", id="m2"),
    ]
    builder = build_kb_from_messages(
        messages, tmp_path / "kb", embedder=HashingEmbedder(), llm=chat, default_time=SAID
    )
    assert builder.kb.build.extractor == "llm:FakeListChatModel:fused"  # wrapped in LangChainChatModel
    assert builder.last_report is not None and builder.last_report.added == 2
    assert builder.store is not None and any(builder.store.cache_dir.iterdir())  # the answer is cached
    with pytest.raises(ConfigurationError, match="not both"):
        build_kb_from_messages(
            messages,
            embedder=HashingEmbedder(),
            llm=chat,
            extractor=OfflineExtractor(HashingEmbedder()),
            default_time=SAID,
        )


def test_chat_model_name_and_provider_errors() -> None:
    assert LangChainChatModel(FakeListChatModel(responses=["x"])).model_name == "FakeListChatModel"
    assert (
        LangChainChatModel(FakeListChatModel(responses=["ok"])).complete(
            [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
        )
        == "ok"
    )

    class Limited(FakeListChatModel):
        def _call(self, *args: Any, **kwargs: Any) -> str:
            raise RateLimitError("429")

    with pytest.raises(ProviderError, match="429"):
        LangChainChatModel(Limited(responses=["x"])).complete([{"role": "user", "content": "u"}])


def test_importing_without_langchain_names_the_extra() -> None:
    script = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "from gravity_core.errors import MissingDependencyError\n"
        "try:\n    import gravity_langchain\nexcept MissingDependencyError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "pip install 'gravity-memory[langchain]'" in out.stdout


def test_provider_faults_are_told_apart_from_client_mistakes() -> None:
    from gravity_core.llm.faults import is_provider_fault

    class APIConnectionError(Exception): ...

    class OpenAIConnectionError(APIConnectionError): ...  # langchain-openai wraps the SDK's error

    class APIStatusError(Exception): ...

    class BadRequestError(APIStatusError): ...

    assert is_provider_fault(RateLimitError())
    assert is_provider_fault(OpenAIConnectionError())
    assert is_provider_fault(APIStatusError())
    assert not is_provider_fault(BadRequestError())  # the caller's mistake, not the provider's
    assert not is_provider_fault(ValueError())


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.loopback
def test_openai_models_that_cannot_connect_raise_provider_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_openai import ChatOpenAI, OpenAIEmbeddings

    from gravity_langchain import openai_chat_model

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    assert openai_chat_model("gpt-4o-mini").model_name == "openai:gpt-4o-mini"

    url = f"http://127.0.0.1:{_closed_port()}/v1"
    chat = LangChainChatModel(ChatOpenAI(model="gpt-4o-mini", base_url=url, max_retries=0))
    with pytest.raises(ProviderError):
        chat.complete([{"role": "user", "content": "hello"}])
    embeddings = OpenAIEmbeddings(base_url=url, max_retries=0, check_embedding_ctx_length=False)
    with pytest.raises(ProviderError):
        LangChainEmbedder(embeddings, dim=1536).embed(["hello"])
