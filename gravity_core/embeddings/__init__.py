"""Embedders: the protocol, the offline MiniLM default, and a deterministic hashing embedder for tests.

Importing this package loads no model and imports no optional dependency.
"""

from __future__ import annotations

from gravity_core.embeddings.base import Embedder, Matrix
from gravity_core.embeddings.framework import FrameworkEmbedder, shares_vectors
from gravity_core.embeddings.hashing import HashingEmbedder
from gravity_core.embeddings.minilm import MiniLMEmbedder
from gravity_core.embeddings.similarity import cosine_matrix

__all__ = [
    "Embedder",
    "FrameworkEmbedder",
    "HashingEmbedder",
    "Matrix",
    "MiniLMEmbedder",
    "cosine_matrix",
    "default_embedder",
    "shares_vectors",
]


def default_embedder() -> Embedder:
    """The default offline embedder, :class:`MiniLMEmbedder` (all-MiniLM-L6-v2, int8 ONNX).

    Cheap: the model loads on the first ``embed`` call, which raises
    :class:`~gravity_core.errors.MissingDependencyError` if the ``local`` extra is not installed.
    """
    return MiniLMEmbedder()
