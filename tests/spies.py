"""Spies shared by tests: real objects that also record how they were called."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from gravity_core.embeddings.base import Embedder, Matrix


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
