"""A save: a new generation written beside the current one, then made current by the manifest.

The generation is written in a hidden staging folder, fsynced and renamed into place once
complete, with ``checksums.json`` listing a digest of every file; then ``manifest.json`` is
replaced atomically. A reader therefore sees the old KB or the new one, never a mix, and a crash
mid-save leaves the previous generation in force. The journal, which the new generation holds all
of, is removed; the generations no longer needed are pruned (only those a written manifest names,
see :mod:`gravity_core.storage.generation_dirs`): the previous one stays, for readers of its
manifest and for a rollback, and so does the full generation a kept delta generation links from.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from gravity_core.schema import KnowledgeBase
from gravity_core.schema.changes import KBChanges
from gravity_core.storage.anchor_vectors import AnchorVectors
from gravity_core.storage.checksums import write_checksums
from gravity_core.storage.delta_save import plan_save, write_delta
from gravity_core.storage.files import write_bytes_atomic
from gravity_core.storage.generation_dirs import (
    fsync_dir,
    generation_folder,
    history_start,
    next_generation,
    remove_generations,
    stage_generation,
)
from gravity_core.storage.journal import JOURNAL
from gravity_core.storage.layout import FORMAT, PAGE, PAGE_GENERATOR, PART_FILES, SavableKB, kb_generations
from gravity_core.storage.loading import base_of
from gravity_core.storage.manifest import write_manifest
from gravity_core.storage.vector_files import write_vectors

__all__ = ["save_generation"]

logger = logging.getLogger(__name__)


def save_generation(
    directory: Path,
    kb: SavableKB,
    vectors: AnchorVectors,
    *,
    previous: int | None,
    keep_history: bool,
    changed: KBChanges | None,
    delta_share: float,
) -> int:
    """Write ``kb`` and ``vectors`` as the generation after ``previous`` and make it current.

    Returns its number. The caller holds the writer lock. See :meth:`AnchorStore.save`.
    """
    plan = None
    if (
        changed is not None
        and delta_share > 0
        and keep_history
        and previous is not None
        and isinstance(kb, KnowledgeBase)
    ):
        plan = plan_save(directory, previous, kb, vectors, changed, delta_share)
    generation = next_generation(directory)
    final = generation_folder(directory, generation)
    staging = stage_generation(directory, generation, FORMAT, previous, history_dropped=not keep_history)
    try:
        as_delta = plan is not None and write_delta(directory, staging, kb, plan)
        if not as_delta:
            _write_full(staging, kb, vectors)
        fsync_dir(staging)
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_dir(directory)
    if not keep_history:
        _remove_page(directory)
    on_disk = kb_generations(directory)
    write_manifest(directory, generation, kb, vectors.embedder, on_disk)
    journal = directory / JOURNAL
    if journal.exists():  # it followed the previous generation; this one holds all of it
        journal.unlink()
        fsync_dir(directory)
    kept = {generation, previous} if keep_history else {generation}
    kept |= {base for g in kept if g is not None and (base := base_of(directory, g)) is not None}
    start = history_start(directory, FORMAT)
    remove_generations(directory, FORMAT, {g for g in on_disk if g not in kept or g < start})
    logger.info(
        "saved KB generation %d to %s%s",
        generation,
        directory,
        f" (a delta over generation {plan.base})" if plan is not None and as_delta else "",
    )
    return generation


def _write_full(folder: Path, kb: SavableKB, vectors: AnchorVectors) -> None:
    """Write a full generation into the staging ``folder``."""
    # Each file's digest is taken from the bytes written, not read back: at 100k anchors
    # reading the folder again cost 2.7 s of a 23 s save.
    digests: dict[str, str] = {}
    for part in PART_FILES:
        digests[f"{part}.json"] = write_bytes_atomic(folder / f"{part}.json", kb.part_json(part))
    digests.update(write_vectors(folder, vectors))
    write_checksums(folder, digests, kb)


def _remove_page(directory: Path) -> None:
    """Delete the explorer page ``gravity show`` wrote into the folder.

    Done before a forget's generation becomes current: the page shows the turns forgotten.
    """
    page = directory / PAGE
    if page.is_symlink() or not page.is_file():
        return
    with page.open("rb") as handle:
        head = handle.read(4096)
    if PAGE_GENERATOR.encode() in head:
        page.unlink()
        logger.info("%s: deleted the explorer page (a forget); 'gravity show' writes it anew", page)
    else:
        logger.warning("%s was not written by 'gravity show': left as it is", page)
