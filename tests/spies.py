"""Spies shared by tests: real objects that also record how they were called."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from gravity_core.embeddings.base import Embedder, Matrix
from gravity_core.query.engine import GravityEngine


class EmbedderSpy:
    """Delegates to a real embedder and records each call's texts (same name and dimension)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    def texts(self) -> Counter[str]:
        """How many times each text was embedded."""
        return Counter(text for call in self.calls for text in call)


def count_queries(engine: GravityEngine, monkeypatch: pytest.MonkeyPatch, delay: float = 0.0) -> list[str]:
    """Make ``engine.query`` record its questions (and optionally take ``delay`` seconds)."""
    calls: list[str] = []
    original = engine.query

    def counted(question: str, **kwargs: Any) -> Any:
        calls.append(question)
        time.sleep(delay)
        return original(question, **kwargs)

    monkeypatch.setattr(engine, "query", counted)
    return calls
