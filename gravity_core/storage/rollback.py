"""Going back to an earlier generation: the newest one that loads is made current again.

For a KB whose current generation is damaged, or whose manifest is lost or unreadable, and for a
first save killed before it wrote its manifest (adopted as it is: :func:`adoptable`). A forget's
generation begins a new history: nothing before it comes back. The caller holds the writer lock.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path

from gravity_core.errors import AnchorStoreError
from gravity_core.storage.generation_dirs import first_saves, history_start
from gravity_core.storage.layout import FORMAT, MANIFEST, kb_generations
from gravity_core.storage.loading import load_generation
from gravity_core.storage.manifest import peek_generation, write_manifest

__all__ = ["adoptable", "roll_back"]

logger = logging.getLogger(__name__)


def roll_back(directory: Path, markers_restored: Collection[int]) -> int:
    """Make the newest generation before the current one that loads current; returns it.

    A current generation whose marker was all that was damaged (``markers_restored``, as the
    writer lock was taken) stays current if it loads now.

    Raises:
        AnchorStoreError: no such generation loads.
    """
    current = peek_generation(directory)
    if current is not None and current in markers_restored:
        try:
            load_generation(directory, current)
        except AnchorStoreError as exc:
            logger.warning("generation %d does not load with its marker restored: %s", current, exc)
        else:
            logger.warning("%s: generation %d is current again, its marker restored", directory, current)
            return current
    start = history_start(directory, FORMAT)  # a forget's generation: nothing before it returns
    candidates = [g for g in kb_generations(directory) if (current is None or g < current) and g >= start]
    for generation in reversed(candidates):
        try:
            loaded = load_generation(directory, generation)
        except AnchorStoreError as exc:
            logger.warning("generation %d does not load either: %s", generation, exc)
            continue
        write_manifest(directory, generation, loaded.kb, loaded.vectors.embedder, kb_generations(directory))
        logger.warning("rolled %s back to generation %d", directory, generation)
        return generation
    why = f" (generation {start} is a forget's: the generations before it were deleted)" if start else ""
    raise AnchorStoreError(f"no earlier generation loads{why}", path=str(directory))


def adoptable(directory: Path) -> bool:
    """No manifest, and every generation on disk is a first save (one killed before its manifest)."""
    generations = kb_generations(directory)
    no_manifest = not (directory / MANIFEST).exists()
    return no_manifest and bool(generations) and generations == first_saves(directory, FORMAT)
