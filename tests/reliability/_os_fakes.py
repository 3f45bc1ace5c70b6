"""Fakes for the OS only: a disk that fills up and a folder that refuses writes.

The stores write every byte with ``os.write`` (:mod:`gravity_core.storage.files`), so a full disk is
``os.write`` raising ``ENOSPC`` for a file in the KB folder; which file is read from
``/proc/self/fd``. A read-only folder is ``chmod 0o555`` for an ordinary user; root writes through
any mode, so for root the calls that create, rename or remove an entry in the folder raise
``EACCES`` as the kernel would, and ``os.access`` says the folder is not writable.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["disk_full", "read_only", "refuse_writes"]


def _fd_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def disk_full(
    monkeypatch: pytest.MonkeyPatch, folder: Path, *, only: Callable[[str], bool] = lambda p: True
) -> None:
    """``os.write`` to a file under ``folder`` (whose path ``only`` accepts) raises ENOSPC."""
    real_write = os.write
    root = str(folder.resolve())

    def write(fd: int, data: Any) -> int:
        path = _fd_path(fd)
        if path.startswith(root + os.sep) and only(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)


def _under(path: Any, root: str) -> bool:
    try:
        text = os.path.abspath(os.fsdecode(path))
    except TypeError:
        return False
    return text == root or text.startswith(root + os.sep)


def _denied(path: Any) -> PermissionError:
    return PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fsdecode(path))


def refuse_writes(monkeypatch: pytest.MonkeyPatch, folder: Path, *, access: bool = True) -> None:
    """Make the calls that change entries in ``folder`` (or below) raise EACCES, as for a 0o555 folder.

    Opening an existing file for writing still works (its own mode allows it), as it does in a
    read-only folder. ``access=False`` leaves ``os.access`` alone, so the refusal comes only at the
    first write.
    """
    root = os.path.abspath(folder)
    real_open, real_mkdir = os.open, os.mkdir
    real_replace, real_rename, real_unlink, real_rmdir = os.replace, os.rename, os.unlink, os.rmdir
    real_access = os.access

    def inside(path: Any) -> bool:
        return _under(os.path.dirname(os.path.abspath(os.fsdecode(path))), root)

    def fake_open(path: Any, flags: int, mode: int = 0o777, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT and inside(path) and not os.path.lexists(path):
            raise _denied(path)
        return real_open(path, flags, mode, *args, **kwargs)

    def fake_mkdir(path: Any, mode: int = 0o777, *args: Any, **kwargs: Any) -> None:
        if inside(path):
            raise _denied(path)
        real_mkdir(path, mode, *args, **kwargs)

    def two(real: Callable[..., None]) -> Callable[..., None]:
        def fake(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            if inside(src) or inside(dst):
                raise _denied(dst)
            real(src, dst, *args, **kwargs)

        return fake

    def one(real: Callable[..., None]) -> Callable[..., None]:
        def fake(path: Any, *args: Any, **kwargs: Any) -> None:
            if inside(path):
                raise _denied(path)
            real(path, *args, **kwargs)

        return fake

    def fake_access(path: Any, mode: int, *args: Any, **kwargs: Any) -> bool:
        if mode & os.W_OK and _under(path, root):
            return False
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "mkdir", fake_mkdir)
    monkeypatch.setattr(os, "replace", two(real_replace))
    monkeypatch.setattr(os, "rename", two(real_rename))
    monkeypatch.setattr(os, "unlink", one(real_unlink))
    monkeypatch.setattr(os, "rmdir", one(real_rmdir))
    if access:
        monkeypatch.setattr(os, "access", fake_access)


@contextlib.contextmanager
def read_only(monkeypatch: pytest.MonkeyPatch, folder: Path) -> Iterator[None]:
    """``folder`` read-only for this process: ``chmod 0o555``, or :func:`refuse_writes` for root."""
    if os.geteuid() == 0:
        refuse_writes(monkeypatch, folder)
        try:
            yield
        finally:
            monkeypatch.undo()
        return
    mode = stat.S_IMODE(folder.stat().st_mode)
    folder.chmod(0o555)
    try:
        yield
    finally:
        folder.chmod(mode)
