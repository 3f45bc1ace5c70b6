"""Storage: a KB's generations on disk (save, load, deltas, journal, checks), its vectors, caches
and Chroma clients."""

from gravity_core.storage.anchor_vectors import AnchorVectors, KindVectors
from gravity_core.storage.store import AnchorStore, LoadedKB

__all__ = [
    "AnchorStore",
    "AnchorVectors",
    "KindVectors",
    "LoadedKB",
]
