"""Storage: a KB's generations on disk, its vectors, caches and Chroma clients.

Save, load, deltas, journal and checks.
"""

from gravity_core.storage.anchor_vectors import AnchorVectors, KindVectors
from gravity_core.storage.store import AnchorStore, LoadedKB

__all__ = [
    "AnchorStore",
    "AnchorVectors",
    "KindVectors",
    "LoadedKB",
]
