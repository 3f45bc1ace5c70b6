"""Anchor indexes: cosine search over a KB's anchor vectors.

:class:`NumpyAnchorIndex` (in memory, exact) is the default; :class:`ChromaAnchorIndex` keeps the
vectors in Chroma (optional extra ``chroma``, imported only when an instance is made).
"""

from __future__ import annotations

from gravity_core.query.index.base import AnchorIndex
from gravity_core.query.index.chroma_index import ChromaAnchorIndex, SyncReport
from gravity_core.query.index.numpy_index import NumpyAnchorIndex

__all__ = ["AnchorIndex", "ChromaAnchorIndex", "NumpyAnchorIndex", "SyncReport"]
