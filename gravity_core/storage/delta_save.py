"""The delta half of a save: the base a delta would follow, the delta's plan, and its writing.

The plan is :func:`~gravity_core.storage.generation_delta.plan_delta`'s.

A save given what changed asks :func:`plan_save` for a plan; ``None`` (no current generation to
follow, a delta that would be large, a base written by an older version or damaged since, a KB
whose order is not the one a delta keeps) means a full generation. :func:`write_delta` links the
base's files and writes the changed items and rows; where the folder cannot hold hard links it
leaves nothing behind and the save writes a full generation instead.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path
from typing import Any

from gravity_core.errors import AnchorStoreError
from gravity_core.schema import KnowledgeBase
from gravity_core.schema.changes import PARTS, KBChanges
from gravity_core.storage.anchor_vectors import AnchorVectors
from gravity_core.storage.checksums import (
    CHECKSUMS,
    Checks,
    read_bytes,
    read_checksums,
    read_json,
    write_checksums,
)
from gravity_core.storage.files import write_bytes_atomic, write_json_atomic, write_npy_file
from gravity_core.storage.generation_delta import (
    BASE,
    CHANGED,
    DELTA,
    BaseGeneration,
    DeltaPlan,
    file_sizes,
    plan_delta,
)
from gravity_core.storage.generation_dirs import MARKER, generation_folder
from gravity_core.storage.layout import SavableKB
from gravity_core.storage.loading import read_delta_index
from gravity_core.storage.packed_kb import json_members

__all__ = ["plan_save", "write_delta"]

logger = logging.getLogger(__name__)

# A folder where a hard link cannot be made (another file system, one without links, too many):
# a full generation is written instead of a delta.
_NO_LINKS = frozenset({errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP})


def plan_save(
    directory: Path,
    current: int,
    kb: KnowledgeBase,
    vectors: AnchorVectors,
    changed: KBChanges,
    delta_share: float,
) -> DeltaPlan | None:
    """The delta over the current generation's base (``None``: write a full generation)."""
    folder = generation_folder(directory, current)
    try:
        delta = read_delta_index(folder)
        earlier: dict[str, dict[str, bytes]] = {}
        base_folder = folder
        if delta is not None:
            base_folder = generation_folder(directory, delta.base)
            check = Checks(read_checksums(folder, None))
            for part in PARTS:
                raw = read_bytes(folder / f"{CHANGED}{part}.json", check)
                earlier[part] = dict(json_members(raw))
            check.raise_first()  # a delta damaged since it was read is not carried into the next
            if read_delta_index(base_folder) is not None:
                return None  # (never written: a delta's base is a full generation)
        base = _base_generation(base_folder, delta.base if delta is not None else current)
    except (AnchorStoreError, OSError, ValueError, KeyError, TypeError) as exc:
        logger.debug("%s: writing a full generation (%s)", directory, exc)
        return None
    if base is None:
        return None
    return plan_delta(kb, vectors, changed, base, earlier, delta_share)


def _base_generation(folder: Path, number: int) -> BaseGeneration | None:
    """What a delta over the full generation in ``folder`` checks and links (``None``: an older version's)."""
    index: Any = read_json(folder / CHECKSUMS)
    files = {name: digest for name, digest in index["files"].items() if name != MARKER}  # KB files
    counts, orders = index.get("counts"), index.get("orders")
    if not isinstance(counts, dict) or not isinstance(orders, dict):
        return None
    return BaseGeneration(
        number=number,
        files=files,
        sizes=file_sizes(folder, files),
        counts={str(k): int(v) for k, v in counts.items()},
        orders={str(k): str(v) for k, v in orders.items()},
        vectors=read_json(folder / "vectors.json"),
    )


def write_delta(directory: Path, folder: Path, kb: SavableKB, plan: DeltaPlan) -> bool:
    """Write ``plan`` into the staging ``folder``; ``False`` (and nothing left there) when hard links fail."""
    base = generation_folder(directory, plan.base)
    digests: dict[str, str] = {}
    try:
        for name, digest in plan.linked.items():
            os.link(base / name, folder / f"{BASE}{name}")
            digests[f"{BASE}{name}"] = digest
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
        logger.info("%s: no hard links here (%s); writing a full generation", directory, exc.strerror)
        for name in digests:
            (folder / name).unlink()
        return False
    for part, body in plan.records.items():
        digests[f"{CHANGED}{part}.json"] = write_bytes_atomic(folder / f"{CHANGED}{part}.json", body)
    for kind, rows in plan.rows.items():
        digests[f"{CHANGED}vectors-{kind}.npy"] = write_npy_file(
            folder / f"{CHANGED}vectors-{kind}.npy", rows
        )
    digests["build.json"] = write_bytes_atomic(folder / "build.json", kb.part_json("build"))
    digests[DELTA] = write_json_atomic(folder / DELTA, plan.index.to_json())
    write_checksums(folder, digests, kb)
    return True
