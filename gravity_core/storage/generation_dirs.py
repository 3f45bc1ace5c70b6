"""Generation folders that a store can prove it wrote, and the only ones it ever deletes.

Both on-disk formats (the anchor KB and the SGMem index) keep each save in a folder named
``g000007`` and stage it first as ``.g000007.<8 random characters>``. A folder counts as the
store's own only when its name matches that pattern exactly *and* it holds a marker file naming
the format and the generation number. Everything else in the KB folder (``.git``, a user's
``g000042`` folder, notes) is never touched.

A KB folder must be new, empty, or hold only what a store of that format wrote: a folder with
anything else and no manifest is refused as an output.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
from collections.abc import Collection, Iterator
from pathlib import Path

from gravity_core.errors import AnchorStoreError
from gravity_core.storage.files import new_temp_dir

__all__ = [
    "MARKER",
    "WRITER_LOCK",
    "check_output_folder",
    "fsync_dir",
    "generation_folder",
    "history_start",
    "marker_of",
    "named_generations",
    "next_generation",
    "owned_generations",
    "first_saves",
    "remove_generations",
    "stage_generation",
    "writer_lock",
]

logger = logging.getLogger(__name__)

#: The file inside every generation folder that says which store wrote it.
MARKER = ".gravity-generation.json"
#: The lock file writers hold while they write (empty; see :func:`writer_lock`).
WRITER_LOCK = ".writer.lock"
_FINAL = re.compile(r"^g(\d{6})$")
# The random part of gravity_core.storage.files.new_temp_dir (8 hex characters), or of tempfile.mkdtemp
# (8 of [a-z0-9_]) in KBs written before it.
_STAGING = re.compile(r"^\.g(\d{6})\.[a-z0-9_]{8}$")
_MANIFEST_TMP = re.compile(r"^\.manifest\.json\.[a-z0-9_]{8}\.tmp$")


def generation_folder(directory: Path, generation: int) -> Path:
    """The folder of generation ``generation`` in the KB folder ``directory``."""
    return directory / f"g{generation:06d}"


def marker_of(folder: Path) -> dict[str, object]:
    """The folder's marker (empty when it has none or it does not parse)."""
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return marker if isinstance(marker, dict) else {}


def _marker_says(folder: Path, fmt: str, generation: int) -> bool:
    marker = marker_of(folder)
    return marker.get("format") == fmt and marker.get("generation") == generation


def named_generations(directory: Path) -> list[int]:
    """Numbers of the real folders named like a generation (``g000007``), owned or not, oldest first."""
    if not directory.is_dir():
        return []
    return sorted(
        int(match.group(1))
        for path in directory.iterdir()
        if (match := _FINAL.match(path.name)) and path.is_dir() and not path.is_symlink()
    )


def owned_generations(directory: Path, fmt: str) -> list[int]:
    """Numbers of the generation folders of format ``fmt`` in ``directory``, oldest first."""
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _FINAL.match(path.name)
        if match and path.is_dir() and not path.is_symlink() and _marker_says(path, fmt, int(match.group(1))):
            found.append(int(match.group(1)))
    return sorted(found)


def next_generation(directory: Path) -> int:
    """A number no folder of the generation pattern uses yet (owned or not)."""
    if not directory.is_dir():
        return 1
    taken = [
        int(m.group(1)) for p in directory.iterdir() if (m := _FINAL.match(p.name) or _STAGING.match(p.name))
    ]
    return max(taken, default=0) + 1


def stage_generation(
    directory: Path, generation: int, fmt: str, previous: int | None, *, history_dropped: bool = False
) -> Path:
    """A new staging folder for ``generation`` (saved over ``previous``), its marker already written.

    ``history_dropped``: the generation is the first of a new history (a forget): no generation
    before it may become current again, even when the manifest is lost.
    """
    staging = new_temp_dir(directory, f".g{generation:06d}.")
    marker: dict[str, object] = {"format": fmt, "generation": generation, "previous": previous}
    if history_dropped:
        marker["history_dropped"] = True
    (staging / MARKER).write_text(json.dumps(marker), encoding="utf-8")
    return staging


def remove_generations(directory: Path, fmt: str, remove: Collection[int]) -> None:
    """Delete the owned generations in ``remove``, and staging leftovers of crashed saves.

    Called only after a manifest that names ``remove`` has been written, or with nothing to
    remove by a writer that holds the lock. A staging folder is removed only if it is empty (a
    save killed before it wrote its marker), holds nothing but a marker that does not parse (killed
    while writing it: the marker is a save's first file) or its marker names ``fmt`` and the
    number in its name.
    """
    for generation in owned_generations(directory, fmt):
        if generation in remove:
            # Out of the generation pattern first, so a delete cut short is a staging leftover.
            doomed = directory / f".g{generation:06d}.{secrets.token_hex(4)}"
            with contextlib.suppress(OSError):
                os.replace(generation_folder(directory, generation), doomed)
                _remove_marked(doomed)
    for path in directory.iterdir():
        staged = _STAGING.match(path.name)
        if staged and path.is_dir() and not path.is_symlink():
            if _marker_says(path, fmt, int(staged.group(1))) or _torn_marker_only(path):
                _remove_marked(path)
            else:
                with contextlib.suppress(OSError):
                    path.rmdir()  # only if empty
        elif _MANIFEST_TMP.match(path.name) and path.is_file():
            with contextlib.suppress(OSError):
                path.unlink()


def _torn_marker_only(folder: Path) -> bool:
    """The folder holds just a marker file, and it does not parse."""
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return False
    return names == [MARKER] and not marker_of(folder)


def _remove_marked(folder: Path) -> None:
    """Delete a folder that holds our marker, the marker last.

    A delete killed half-way then leaves a folder still provably ours (or an empty one), which a
    later call removes; removed in directory order, the marker could go first and leave the rest
    for good.
    """
    for path in folder.iterdir():
        if path.name == MARKER:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    with contextlib.suppress(OSError):
        (folder / MARKER).unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()


def history_start(directory: Path, fmt: str) -> int:
    """The newest owned generation whose marker says it began a new history (0 when none did)."""
    owned = owned_generations(directory, fmt)
    return max(
        (g for g in owned if marker_of(generation_folder(directory, g)).get("history_dropped")), default=0
    )


def first_saves(directory: Path, fmt: str) -> list[int]:
    """Owned generations saved when the folder had no manifest (their marker says ``previous: null``)."""
    return [
        g
        for g in owned_generations(directory, fmt)
        if marker_of(generation_folder(directory, g)).get("previous", 0) is None
    ]


def check_output_folder(
    directory: Path, fmt: str, own_names: Collection[str], rollback_hint: str | None
) -> None:
    """Refuse ``directory`` as a new KB folder unless it is new, empty or holds only this store's files.

    Called when ``directory`` has no manifest.

    Args:
        directory: the KB folder.
        fmt: the store's format name, as its generation markers record it.
        own_names: file and folder names the store itself writes there (lock, cache).
        rollback_hint: what to say when generation folders remain without a manifest.

    Raises:
        AnchorStoreError: ``directory`` is a file, holds generations but no manifest, or holds
            things that are not this store's.
    """
    if not directory.exists():
        return
    if not directory.is_dir():
        raise AnchorStoreError("is not a folder", path=str(directory))
    generations = owned_generations(directory, fmt)
    if generations:
        names = ", ".join(generation_folder(directory, g).name for g in generations)
        msg = f"manifest.json is missing but generation folders remain ({names})"
        raise AnchorStoreError(f"{msg}; {rollback_hint}" if rollback_hint else msg, path=str(directory))
    foreign = sorted(
        path.name
        for path in directory.iterdir()
        if path.name not in own_names and not _STAGING.match(path.name) and not _MANIFEST_TMP.match(path.name)
    )
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise AnchorStoreError(
            f"is not empty and holds no GRAVITY KB ({shown}); choose a new or empty folder",
            path=str(directory),
        )


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable (best effort: not every platform can open a folder)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def writer_lock(directory: Path) -> Iterator[None]:
    """Hold the folder's writer lock: one writer at a time (across processes).

    The lock is an OS file lock on ``.writer.lock`` in the folder, released when the block ends
    or the process dies (a SIGKILLed writer leaves no stale lock). A folder that was new or empty
    and holds nothing but the lock file when the block ends (a first build that failed before its
    first save) is left as it was: the lock file goes, and so do the folders this call created.

    Raises:
        AnchorStoreError: another writer holds it.
    """
    from filelock import FileLock, Timeout

    created = _missing_folders(directory)
    was_empty = not created and directory.is_dir() and not any(directory.iterdir())
    directory.mkdir(parents=True, exist_ok=True)
    lock_file = directory / WRITER_LOCK
    lock = FileLock(lock_file, timeout=0, is_singleton=False)
    try:
        lock.acquire()
    except Timeout as exc:
        raise AnchorStoreError(
            "another build is writing this KB; wait for it to finish", path=str(directory)
        ) from exc
    try:
        yield
    finally:
        tidy = (created or was_empty) and _holds_only(directory, WRITER_LOCK)
        if tidy:
            # Removed while still held: a writer arriving now creates and locks a file of its own.
            with contextlib.suppress(OSError):
                lock_file.unlink()
        lock.release()
        if tidy:
            for folder in created:  # innermost first; stops at the first that is not empty
                try:
                    folder.rmdir()
                except OSError:
                    break


def _missing_folders(directory: Path) -> list[Path]:
    """The folders ``directory.mkdir(parents=True)`` would create, innermost first."""
    missing: list[Path] = []
    folder = directory
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _holds_only(directory: Path, name: str) -> bool:
    try:
        return [p.name for p in directory.iterdir()] == [name]
    except OSError:
        return False
