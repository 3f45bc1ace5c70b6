"""A store's hold on its folder's writer lock: one writer at a time.

The thread that holds it through a store may take it again (a save inside a build).

The lock itself is a file lock (:func:`.generation_dirs.writer_lock`), held across processes,
stores and threads. Taking it checks the folder can be written before anything else is done, and
finishes what a killed writer left (:func:`.recovery.finish_interrupted_writes`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from gravity_core.errors import AnchorStoreError
from gravity_core.storage.generation_dirs import writer_lock
from gravity_core.storage.os_errors import check_writable, os_errors
from gravity_core.storage.recovery import finish_interrupted_writes

__all__ = ["StoreLock"]


class StoreLock:
    """The writer lock of the KB folder ``directory`` as one store holds it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        #: The generations whose markers were restored as the lock was last taken.
        self.markers_restored: set[int] = set()
        # Who holds the lock through this store, and how deep.
        self._owner: int | None = None
        self._depth = 0

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the lock for the block (again, if this thread holds it already).

        Raises:
            AnchorStoreError: another writer (another process, store or thread) holds it, or the
                folder is a file.
            StorageAccessError: the folder cannot be made or written.
        """
        me = threading.get_ident()
        if self._owner == me:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        with contextlib.ExitStack() as held:
            with os_errors(self.directory):
                if self.directory.exists() and not self.directory.is_dir():
                    raise AnchorStoreError("is not a folder", path=str(self.directory))
                held.enter_context(writer_lock(self.directory))
                check_writable(self.directory)
                self.markers_restored = finish_interrupted_writes(self.directory)
            self._owner, self._depth = me, 1
            try:
                yield
            finally:
                self._owner, self._depth = None, 0
