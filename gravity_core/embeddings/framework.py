"""The base of the adapters that make a framework's embedding model a GRAVITY embedder.

Also the one rule for when a host's embedding model and the engine's embedder are the same model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from gravity_core.embeddings.base import Embedder, Matrix
from gravity_core.errors import ConfigurationError

__all__ = ["FrameworkEmbedder", "shares_vectors"]

_PROBE_TEXT = "dimension probe"


class FrameworkEmbedder(ABC):
    """A framework's embedding model as a GRAVITY :class:`~gravity_core.embeddings.base.Embedder`.

    The model is a LangChain ``Embeddings`` or a LlamaIndex ``BaseEmbedding``.

    A subclass says how to embed a batch of texts (:meth:`_rows`, where it also turns the provider's
    faults into :class:`~gravity_core.errors.ProviderError`); this class checks what comes back and
    L2-normalises the rows.

    Args:
        model: the framework's model (kept as :attr:`model`).
        name: identifies the model in the KB, so a KB is never queried with another model.
        dim: the vector dimension, if known; otherwise one probe text is embedded on first use.

    Raises:
        ConfigurationError: ``dim`` below 1.
    """

    def __init__(self, model: object, *, name: str, dim: int | None = None) -> None:
        if dim is not None and dim < 1:
            raise ConfigurationError(f"dim must be >= 1, got {dim}")
        self.model = model
        self._name = name
        self._dim = dim

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r})"

    @property
    def name(self) -> str:
        """Identifier recorded in the KB."""
        return self._name

    @property
    def dim(self) -> int:
        """Vector dimension (probed with one embedding if not known yet)."""
        if self._dim is None:
            self._dim = int(self._matrix([_PROBE_TEXT]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` in one call of the model.

        Returns:
            float32 array of shape ``(len(texts), dim)``, rows L2-normalized (an all-zero row stays zero).

        Raises:
            ConfigurationError: ``texts`` is a single string, or the model returned vectors of another
                count or dimension.
            ProviderError: the embedding provider failed (rate limit, timeout, connection).
        """
        if isinstance(texts, str):
            raise ConfigurationError("embed() takes a sequence of texts, not a single string")
        items = list(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        matrix = self._matrix(items)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)

    @abstractmethod
    def _rows(self, texts: list[str]) -> Sequence[Sequence[float]]:
        """One vector per text, from the framework's model."""

    def _matrix(self, texts: list[str]) -> Matrix:
        matrix = np.asarray(self._rows(texts), dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise ConfigurationError(
                f"{self._name} returned an array of shape {matrix.shape} for {len(texts)} texts"
            )
        if self._dim is None:
            self._dim = int(matrix.shape[1])
        elif matrix.shape[1] != self._dim:
            raise ConfigurationError(
                f"{self._name} returned {matrix.shape[1]}-dim vectors, expected {self._dim}"
            )
        return matrix


def shares_vectors(engine: Embedder, *, wrapped: Embedder | None = None, model: object | None = None) -> bool:
    """Whether a host's embedding model gives the vectors the engine's embedder gives.

    When it does, the question is embedded once and the build's stored expansion vectors can be
    searched with.

    Args:
        engine: the engine's embedder (the KB's).
        wrapped: the GRAVITY embedder the host's model wraps, when it is GRAVITY's own adapter
            (``GravityEmbeddings``, ``GravityEmbedding``): the same when it is the same object or has
            the same name.
        model: the host's framework model: the same when the engine's embedder is a
            :class:`FrameworkEmbedder` over this very object. The host embeds the question as a
            query and the engine its anchors as texts; a model that embeds the two differently (a
            query instruction) is best given to the engine and the host through GRAVITY's adapter,
            or under different objects, so that each side embeds in its own way.
    """
    if wrapped is not None:
        return wrapped is engine or wrapped.name == engine.name
    return model is not None and isinstance(engine, FrameworkEmbedder) and engine.model is model
