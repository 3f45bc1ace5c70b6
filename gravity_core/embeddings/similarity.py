"""Similarity helpers over embedding matrices."""

from __future__ import annotations

import numpy as np

from gravity_core.embeddings.base import Matrix
from gravity_core.errors import ConfigurationError

__all__ = ["cosine_matrix"]


def cosine_matrix(a: Matrix, b: Matrix) -> Matrix:
    """Cosine similarity of every row of ``a`` with every row of ``b``.

    Rows need not be normalized; an all-zero row has similarity 0 with everything.

    Args:
        a: array of shape ``(n, dim)``.
        b: array of shape ``(m, dim)``.

    Returns:
        float32 array of shape ``(n, m)``.

    Raises:
        ConfigurationError: the inputs are not 2-D or their dimensions differ.
    """
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ConfigurationError(
            f"cosine_matrix needs (n, dim) and (m, dim) arrays, got {a.shape} and {b.shape}"
        )
    a_unit = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b_unit = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return (a_unit @ b_unit.T).astype(np.float32)
