"""What a writer finishes as it takes the lock: the work of a writer that was killed.

A killed save leaves its staging folder, or a generation half deleted; a killed forget leaves the
generations before the one that began a new history (and a journal that followed one of them);
a damaged ownership marker leaves a generation that no save, forget or rollback would touch. The
marker is restored from the generation's checksum list, which keeps it whole.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from gravity_core.storage.checksums import CHECKSUMS
from gravity_core.storage.files import digest_bytes, write_bytes_atomic
from gravity_core.storage.generation_dirs import (
    MARKER,
    fsync_dir,
    generation_folder,
    history_start,
    marker_of,
    named_generations,
    remove_generations,
)
from gravity_core.storage.journal import JOURNAL, read_journal
from gravity_core.storage.layout import FORMAT, kb_generations
from gravity_core.storage.manifest import peek_generation

__all__ = ["finish_interrupted_writes", "repair_markers"]

logger = logging.getLogger(__name__)


def finish_interrupted_writes(directory: Path) -> set[int]:
    """Repair what killed writers left in ``directory``.

    Restore damaged generation markers (:func:`repair_markers`); remove what a killed save left
    (its staging folder, a half-deleted generation), also when this writer saves nothing; and
    finish a forget killed before it deleted what came before it: the generations older than the
    newest one that began a new history, and a journal that followed one of them.

    Returns:
        The generations whose markers were restored.
    """
    restored = repair_markers(directory)
    start = history_start(directory, FORMAT)
    stale = [g for g in kb_generations(directory) if g < start]
    journal = directory / JOURNAL
    if stale and journal.exists() and not read_journal(journal, peek_generation(directory)).records:
        journal.unlink()
    # Also the half-deleted folders of a delete that was killed (no save is running: the caller
    # holds the lock).
    remove_generations(directory, FORMAT, set(stale))
    if stale:
        logger.warning("%s: deleted generations %s left by an interrupted forget", directory, stale)
    return restored


def repair_markers(directory: Path) -> set[int]:
    """Rewrite the damaged markers of generation folders whose checksum list holds theirs; which.

    A folder named like a generation proves itself ours by a checksum list that names its
    generation and format and holds the marker's digest: without its marker a forget would
    leave it on disk (with whatever it holds) and a rollback would skip it.
    """
    repaired: set[int] = set()
    for generation in named_generations(directory):
        folder = generation_folder(directory, generation)
        marker = marker_of(folder)
        if marker.get("format") == FORMAT and marker.get("generation") == generation:
            continue
        try:
            index = json.loads((folder / CHECKSUMS).read_bytes())
            recorded = index["marker"]
            body = json.dumps(recorded).encode("utf-8")
            proven = (
                recorded.get("format") == FORMAT
                and recorded.get("generation") == generation
                and index["files"][MARKER] == digest_bytes(body)
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if proven:
            write_bytes_atomic(folder / MARKER, body)
            repaired.add(generation)
            logger.warning(
                "%s: restored the damaged marker of g%06d from its %s", folder, generation, CHECKSUMS
            )
    if repaired:
        fsync_dir(directory)
    return repaired
