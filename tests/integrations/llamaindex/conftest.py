"""Fixtures of the LlamaIndex integration tests: a KB of the sample conversation, spies, clean globals."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core import Settings
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.llms import CompletionResponse, MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import NumpyAnchorIndex
from gravity_core.query.types import AnchorContext
from gravity_core.schema import Utterance

SAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sample_conversation.jsonl"
QUESTION = "How is Biscuit settling in since Maya adopted him?"


class RecordingLLM(MockLLM):
    """LlamaIndex's MockLLM (answers with the prompt it got) that also keeps every prompt."""

    prompts: list[str] = Field(default_factory=list)

    def __init__(self) -> None:
        super().__init__(max_tokens=None)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=prompt)


class EventRecorder(BaseEventHandler):
    """Keeps every instrumentation event it is given."""

    events: list[BaseEvent] = Field(default_factory=list)

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        self.events.append(event)


@pytest.fixture(autouse=True)
def _settings_untouched() -> Iterator[None]:
    """Library code must never resolve LlamaIndex's global defaults (they try OpenAI)."""
    llm, embed = Settings._llm, Settings._embed_model
    yield
    assert Settings._llm is llm and Settings._embed_model is embed, "LlamaIndex Settings were used or changed"


@pytest.fixture(scope="session")
def hashing() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture(scope="session")
def utterances(sample_utterances: list[Utterance]) -> list[Utterance]:
    return sample_utterances


@pytest.fixture(scope="session")
def built(sample_kb: AnchorBuilder) -> AnchorBuilder:
    return sample_kb


@pytest.fixture(scope="session")
def engine(built: AnchorBuilder, hashing: HashingEmbedder) -> GravityEngine:
    """Read-only in every test (spies patch the instance through monkeypatch, which restores it)."""
    return GravityEngine(built.kb, NumpyAnchorIndex.from_vectors(built.vectors), hashing)


@pytest.fixture(scope="session")
def context(engine: GravityEngine) -> AnchorContext:
    """The engine's answer to QUESTION (which has anchors and expansions)."""
    answer = engine.query(QUESTION)
    assert answer.text and len(answer.expansions) >= 3
    return answer


@pytest.fixture
def engine_calls(engine: GravityEngine, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The questions ``engine.query`` answers during the test (``aquery`` goes through ``query``)."""
    calls: list[str] = []
    real = engine.query

    def spy(question: str, **kwargs: Any) -> AnchorContext:
        calls.append(question)
        return real(question, **kwargs)

    monkeypatch.setattr(engine, "query", spy)
    return calls


@pytest.fixture
def gravity_events() -> Iterator[list[BaseEvent]]:
    """Events reaching the package dispatcher during the test; the handler is removed afterwards
    (LlamaIndex dispatchers are process-wide)."""
    dispatcher = get_dispatcher("gravity_llamaindex")
    recorder = EventRecorder()
    dispatcher.add_event_handler(recorder)
    try:
        yield recorder.events
    finally:
        dispatcher.event_handlers = [h for h in dispatcher.event_handlers if h is not recorder]


def vector_of(embedder: HashingEmbedder, text: str) -> np.ndarray:
    return np.asarray(embedder.embed([text])[0], dtype=np.float32)


def same_vector(a: Sequence[float] | None, b: np.ndarray) -> bool:
    return a is not None and bool(np.allclose(np.asarray(a, dtype=np.float32), b, atol=1e-6))
