"""Embeddings kept on disk, so an evaluation rerun embeds nothing it embedded before."""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gravity_core.embeddings.base import Embedder, Matrix

__all__ = ["EmbeddingCache"]

logger = logging.getLogger(__name__)


class EmbeddingCache:
    """Embeds a list of texts once: the matrix is saved as ``<dir>/<key>.npy``.

    The key is the sha256 of the embedder's name and the texts, so another embedder or any change
    to a text gives another file. Files are written atomically; an unreadable or mis-shaped file is
    recomputed.

    Args:
        directory: where the ``.npy`` files go (created on first write).
        embedder: the embedder.
    """

    def __init__(self, directory: str | os.PathLike[str], embedder: Embedder) -> None:
        self.directory = Path(directory)
        self.embedder = embedder
        self.computed = 0

    def key(self, texts: Sequence[str]) -> str:
        """The file key of ``texts`` under this embedder."""
        digest = hashlib.sha256(self.embedder.name.encode("utf-8"))
        for text in texts:
            digest.update(b"\x00")
            digest.update(text.encode("utf-8"))
        return f"{self.embedder.name}-{digest.hexdigest()[:32]}"

    def embed(self, texts: Sequence[str]) -> Matrix:
        """The embeddings of ``texts`` (rows in order), from disk when saved before."""
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        path = self.directory / f"{self.key(texts)}.npy"
        try:
            matrix = np.load(path, allow_pickle=False)
            if matrix.shape == (len(texts), self.embedder.dim):
                return matrix.astype(np.float32, copy=False)
            logger.warning("embedding cache %s has shape %s, recomputing", path, matrix.shape)
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            logger.warning("embedding cache %s is unreadable, recomputing: %s", path, exc)
        matrix = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        self.computed += len(texts)
        self._save(path, matrix)
        return matrix

    def _save(self, path: Path, matrix: Matrix) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".npy")
            try:
                with os.fdopen(fd, "wb") as handle:
                    np.save(handle, matrix, allow_pickle=False)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            logger.warning("could not write embedding cache %s: %s", path, exc)
