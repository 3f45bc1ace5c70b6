"""The embedding protocol every embedder (offline MiniLM, test hashing, framework adapters) meets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "Matrix"]

Matrix = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalized float32 vectors.

    ``name`` identifies the model, so a KB built with one embedder is never queried with another.
    """

    @property
    def name(self) -> str:
        """Stable identifier of the model (and its settings)."""
        ...

    @property
    def dim(self) -> int:
        """Vector dimension."""
        ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts``; returns an array of shape ``(len(texts), dim)``, rows L2-normalized."""
        ...
