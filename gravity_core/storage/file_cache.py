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
import stat
import threading
from collections.abc import Collection, Iterator
from pathlib import Path

from gravity_core.errors import AnchorStoreError
from gravity_core.storage.files import new_temp_file
from gravity_core.storage.os_errors import os_errors

__all__ = ["RecordedFiles", "link_on_the_way", "prune_folder", "refuse_linked_cache"]

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
        """Write ``entry`` as JSON at ``path`` atomically (a temporary file, then ``os.replace``).

        Concurrent writers never leave half an entry. A failure is logged and ignored: a cache is an
        optimization, not a store.
        """
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


def link_on_the_way(folder: Path, root: Path) -> Path | None:
    """The first symbolic link from ``root`` (excluded) down to ``folder``, or ``None``.

    ``folder``'s subfolders one level down count too; ``folder`` must lie lexically below ``root``.
    """
    relative = Path(os.path.abspath(folder)).relative_to(os.path.abspath(root))
    path = Path(os.path.abspath(root))
    for part in relative.parts:
        path = path / part
        if path.is_symlink():
            return path
    if path.is_dir():
        with os.scandir(path) as entries:
            return next((path / e.name for e in entries if e.is_symlink() and e.is_dir()), None)
    return None


def prune_folder(directory: Path, keep: Collection[Path], *, root: Path) -> int:
    """Delete every regular file under ``directory`` (at any depth) but ``keep``; returns how many.

    After a forget rebuilt the KB, the entries it did not use are prompts and parses of the old
    build, which may hold the forgotten text. Only what is provably the KB's own goes:
    ``directory`` must be a real folder inside the KB folder ``root``, no symbolic link is
    followed on the way or below, and links and other special files are left as they are.

    Raises:
        AnchorStoreError: ``directory`` is outside ``root`` or reached through a link (nothing
            is deleted).
        StorageAccessError: a file could not be deleted (the forget is then incomplete).
    """
    if not Path(os.path.abspath(directory)).is_relative_to(os.path.abspath(root)):
        raise AnchorStoreError(
            f"is outside the KB folder {root}: a forget deletes nothing there", path=str(directory)
        )
    refuse_linked_cache(directory, root)
    kept = {os.path.abspath(p) for p in keep}
    removed = 0
    if not directory.is_dir():
        return 0
    with os_errors(directory):
        for folder, _, files in os.walk(directory, followlinks=False):
            for name in sorted(files):
                path = os.path.join(folder, name)
                if stat.S_ISREG(os.lstat(path).st_mode) and os.path.abspath(path) not in kept:
                    os.unlink(path)
                    removed += 1
    return removed


def refuse_linked_cache(directory: Path, root: Path) -> None:
    """Raise unless ``directory`` (inside the KB folder ``root``) is reached through no link.

    Raises:
        AnchorStoreError: naming the link and where it points.
    """
    link = link_on_the_way(directory, root)
    if link is None:
        return
    raise AnchorStoreError(
        f"is a symbolic link (to {os.readlink(link)}); GRAVITY keeps a KB's caches in real folders inside "
        f"the KB folder, so that a forget deletes only its own files: replace the link by a folder "
        "(to use another disk, move the whole KB folder there)",
        path=str(link),
    )
