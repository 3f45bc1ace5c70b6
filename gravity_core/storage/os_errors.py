"""OS errors of a KB or SGMem folder, told in one line: the path, the OS's reason and what to do.

A store wraps every call that touches its folder in :func:`os_errors`, so an ``OSError`` (a
read-only folder, a full disk, a folder where a file should be, a name too long) leaves it as a
:class:`~gravity_core.errors.StorageAccessError`::

    cannot write KB folder /x/kb: Permission denied (make it writable or choose another folder)
    cannot write /x/kb/manifest.json in KB folder /x/kb: Is a directory (a folder stands where GRAVITY
    writes a file: move it away)
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from gravity_core.errors import StorageAccessError

__all__ = ["check_writable", "describe_os_error", "folder_os_errors", "os_errors", "storage_error"]

_FULL = "free some space, then run it again: a build resumes from its last checkpoint"
_HINTS: dict[int, str] = {
    errno.EACCES: "make it writable or choose another folder",
    errno.EPERM: "make it writable or choose another folder",
    errno.EROFS: "the file system is read-only: choose another folder",
    errno.ENOSPC: _FULL,
    errno.EDQUOT: _FULL,
    errno.EFBIG: _FULL,
    errno.EISDIR: "a folder stands where GRAVITY writes a file: move it away",
    errno.ENOTDIR: "a part of the path is a file, not a folder: choose another folder",
    errno.EEXIST: "a file stands where the folder should be: choose another folder",
    errno.ENAMETOOLONG: "a name in the path is too long for the file system: choose a shorter one",
    errno.ENOENT: "the folder cannot be made there: choose another folder",
    errno.ELOOP: "a symbolic link stands there and GRAVITY does not follow one: remove it",
    errno.EIO: "the disk reported an error: check it, or choose another folder",
}
_DEFAULT_HINT = "check the folder, or choose another one"


def _hint(exc: OSError) -> str:
    if exc.errno is not None:
        return _HINTS.get(exc.errno, _DEFAULT_HINT)
    if "requested and" in str(exc) and "written" in str(exc):
        return f"a short write: the disk is probably full; {_FULL}"  # numpy's tofile on a full disk
    return _DEFAULT_HINT


def describe_os_error(
    exc: OSError, folder: Path | str | None = None, *, kind: str = "KB folder", action: str = "write"
) -> str:
    """One line: ``cannot <action> [<file> in] <kind> <folder>: <reason> (<what to do>)``.

    Without ``folder``: ``<file>: <reason> (<what to do>)``.
    """
    reason = exc.strerror or str(exc) or type(exc).__name__
    target = os.fsdecode(exc.filename) if exc.filename is not None else None
    if folder is None:
        return f"{target or 'a file'}: {reason} ({_hint(exc)})"
    where = f"{kind} {folder}"
    if target is not None and Path(target) != Path(folder):
        where = f"{_inside(target, folder)} in {where}"
    return f"cannot {action} {where}: {reason} ({_hint(exc)})"


def _inside(target: str, folder: Path | str) -> str:
    """``target`` relative to ``folder`` when it is inside it (the folder is named beside it anyway)."""
    try:
        return str(Path(os.path.abspath(target)).relative_to(os.path.abspath(folder)))
    except ValueError:
        return target


def storage_error(
    exc: OSError, folder: Path | str, *, kind: str = "KB folder", action: str = "write"
) -> StorageAccessError:
    """The :class:`StorageAccessError` that tells ``exc`` for ``folder``."""
    path = os.fsdecode(exc.filename) if exc.filename is not None else str(folder)
    return StorageAccessError(
        describe_os_error(exc, folder, kind=kind, action=action),
        path=path,
        folder=str(folder),
        errno=exc.errno,
    )


@contextlib.contextmanager
def os_errors(folder: Path | str, *, kind: str = "KB folder", action: str = "write") -> Iterator[None]:
    """Turn an ``OSError`` raised in the block into a :class:`StorageAccessError` for ``folder``."""
    try:
        yield
    except OSError as exc:
        raise storage_error(exc, folder, kind=kind, action=action) from exc


class _InFolder(Protocol):
    directory: Path


_S = TypeVar("_S", bound=_InFolder)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def folder_os_errors(
    action: str,
) -> Callable[[Callable[Concatenate[_S, _P], _R]], Callable[Concatenate[_S, _P], _R]]:
    """Run a method of a store with its ``directory``'s OS errors told by :func:`os_errors`."""

    def wrap(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
        @functools.wraps(method)
        def guarded(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            with os_errors(self.directory, action=action):
                return method(self, *args, **kwargs)

        return guarded

    return wrap


def check_writable(folder: Path, *, kind: str = "KB folder") -> None:
    """Refuse a folder this process may not write, before the first write (which may come late).

    Raises:
        StorageAccessError: ``EACCES`` (or ``EROFS`` on a read-only file system).
    """
    effective = os.access in os.supports_effective_ids
    if os.access(folder, os.W_OK | os.X_OK, effective_ids=effective):
        return
    code = errno.EROFS if _read_only_mount(folder) else errno.EACCES
    raise storage_error(PermissionError(code, os.strerror(code), str(folder)), folder, kind=kind)


def _read_only_mount(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False
