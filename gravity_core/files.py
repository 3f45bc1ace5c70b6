"""Temp files and folders created with the mode an ordinary file or folder gets (umask applied).

``tempfile.mkstemp`` and ``mkdtemp`` create 0600 files and 0700 folders. Everything a KB holds is
written through a temp name, so with them a KB's JSON files and generation folders were private
while its ``.npy`` files were not; with these helpers a KB folder has one mode throughout, that of
the user's umask.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["new_temp_dir", "new_temp_file"]

_TRIES = 100


def new_temp_file(beside: Path, prefix: str) -> tuple[int, str]:
    """A new file ``<prefix><8 hex>.tmp`` in ``beside``'s folder, open for writing: ``(fd, path)``."""
    for _ in range(_TRIES):
        path = beside.parent / f"{prefix}{secrets.token_hex(4)}.tmp"
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), str(path)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp name beside {beside}")


def new_temp_dir(parent: Path, prefix: str) -> Path:
    """A new folder ``<prefix><8 hex>`` in ``parent``."""
    for _ in range(_TRIES):
        path = parent / f"{prefix}{secrets.token_hex(4)}"
        try:
            os.mkdir(path, 0o777)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free temp folder name in {parent}")
