"""Caches kept as files under a KB's ``cache/`` folder, and which of their entries a run used.

A forget rebuilds the KB while its caches record every entry read or written; the entries not used
then belong to the old build only (prompts and parses that may hold the forgotten text) and are
deleted. Entries live at ``<directory>/<key[:2]>/<key>.json``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Collection, Iterator
from pathlib import Path

from gravity_core.files import new_temp_file
from gravity_core.storage_errors import os_errors

__all__ = ["RecordedFiles", "prune_folder"]

logger = logging.getLogger(__name__)


class RecordedFiles:
    """The entries of one cache folder, and the set of those used while :meth:`recording`."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._used: set[Path] | None = None
        self._used_lock = threading.Lock()

    def entry_path(self, key: str) -> Path:
        """Where the entry ``key`` (a hex digest) lives, whether or not it exists."""
        return self.directory / key[:2] / f"{key}.json"

    @contextlib.contextmanager
    def recording(self) -> Iterator[set[Path]]:
        """Collect the entries read or written meanwhile (for :meth:`prune` after a forget's rebuild)."""
        used: set[Path] = set()
        self._used = used
        try:
            yield used
        finally:
            self._used = None

    def note(self, path: Path) -> None:
        """``path`` was read or written (recorded while :meth:`recording`)."""
        used = self._used
        if used is not None:
            with self._used_lock:
                used.add(path)

    def write_entry(self, path: Path, entry: object) -> None:
        """Write ``entry`` as JSON at ``path`` atomically (a temporary file, then ``os.replace``), so
        concurrent writers never leave half an entry. A failure is logged and ignored: a cache is an
        optimization, not a store."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = new_temp_file(path, ".")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(entry, handle, ensure_ascii=False)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except (OSError, ValueError) as exc:  # ValueError: text UTF-8 cannot encode
            logger.warning("could not write cache entry %s: %s", path, exc)

    def prune(self, keep: Collection[Path]) -> int:
        """Delete every file under the cache's folder but ``keep``; how many were deleted."""
        return prune_folder(self.directory, keep)


def prune_folder(directory: Path, keep: Collection[Path]) -> int:
    """Delete every file under ``directory`` (at any depth) but ``keep``; returns how many.

    After a forget rebuilt the KB, the entries it did not use are prompts and parses of the old
    build, which may hold the forgotten text.

    Raises:
        StorageAccessError: a file could not be deleted (the forget is then incomplete).
    """
    kept = {Path(p).resolve() for p in keep}
    removed = 0
    if not directory.is_dir():
        return 0
    with os_errors(directory):
        for path in sorted(directory.rglob("*")):
            if path.is_file() and not path.is_symlink() and path.resolve() not in kept:
                path.unlink()
                removed += 1
    return removed
