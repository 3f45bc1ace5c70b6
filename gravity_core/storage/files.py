"""The file writes of KB and SGMem folders, and the digests of what was written.

Temp names with the user's mode, every byte by ``os.write``, atomic replacement.

``tempfile.mkstemp`` and ``mkdtemp`` create 0600 files and 0700 folders. Everything a KB holds is
written through a temp name, so with them a KB's JSON files and generation folders were private
while its ``.npy`` files were not; with these helpers a KB folder has one mode throughout, that of
the user's umask.

Every byte a store writes goes through :func:`write_all` (``os.write``), ``.npy`` files included
(:func:`write_npy` writes numpy's header, then the array's memory, without a copy): a full disk
or any other refusal is an ``OSError`` with its errno, never numpy's errno-less short write.

A file that replaces another is written to a temp name in the same folder, fsynced, then renamed
over it (:func:`write_bytes_atomic`, :func:`write_json_atomic`): a reader sees the old file or the
new one. Each write returns the :data:`DIGEST` of the bytes written, as a generation's checksum
list records them (:mod:`gravity_core.storage.checksums`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import secrets
import struct
import weakref
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

__all__ = [
    "DIGEST",
    "NpyRows",
    "RowReader",
    "digest_bytes",
    "digest_file",
    "map_npy",
    "new_temp_dir",
    "new_temp_file",
    "read_npy",
    "read_npy_file",
    "write_all",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_npy",
    "write_npy_file",
]

#: The digest a KB keeps of its files (:func:`digest_bytes`).
DIGEST = "blake2b-128"

# The header ``np.lib.format`` writes: keys sorted, a Python dict literal.
_NPY_HEADER = re.compile(
    r"^\{'descr': '(?P<descr>[<>|=][a-zA-Z]\d*)', 'fortran_order': (?P<fortran>True|False), "
    r"'shape': \((?P<shape>(?:\d+, ?)*\d*)\), \}\s*$"
)

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


def write_all(fd: int, data: bytes | memoryview, path: str | os.PathLike[str] | None = None) -> None:
    """Write all of ``data`` to the open file ``fd`` (``os.write`` until done).

    ``path``: the file's name, given to an ``OSError`` (``os.write`` knows only the descriptor).
    """
    view = memoryview(data)
    try:
        while view.nbytes:
            written = os.write(fd, view)
            view = view[written:]
    except OSError as exc:
        if exc.filename is None and path is not None:
            exc.filename = os.fspath(path)
        raise


def write_json_atomic(path: Path, data: Any, *, indent: int | None = None) -> str:
    """Write ``data`` as JSON to ``path`` through a temp file in the same folder and ``os.replace``.

    Compact unless ``indent`` is given (the C encoder: several times faster than an indented dump).

    Returns:
        The digest of the bytes written (:func:`digest_bytes`).
    """
    separators = None if indent is not None else (",", ":")
    encoded = json.dumps(data, ensure_ascii=False, indent=indent, separators=separators).encode("utf-8")
    return write_bytes_atomic(path, encoded)


def write_bytes_atomic(path: Path, encoded: bytes) -> str:
    """Write ``encoded`` to ``path`` as :func:`write_json_atomic` does; returns its digest."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = new_temp_file(path, f".{path.name}.")
    try:
        try:
            write_all(fd, encoded, path)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return digest_bytes(encoded)


def write_npy_file(path: Path, matrix: Any) -> str:
    """Write a float32 ``.npy`` file (a new one); returns its digest."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        written = write_npy(fd, np.asarray(matrix, dtype=np.float32), path)
        os.fsync(fd)
    finally:
        os.close(fd)
    return digest_bytes(*written)


def digest_bytes(*pieces: bytes | memoryview) -> str:
    """The :data:`DIGEST` of ``pieces`` one after the other (as one file holding them)."""
    digest = hashlib.blake2b(digest_size=16)
    for piece in pieces:
        digest.update(piece)
    return digest.hexdigest()


def digest_file(path: Path) -> str:
    """The :data:`DIGEST` of the file at ``path``, read in chunks."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_npy(
    fd: int, array: np.ndarray, path: str | os.PathLike[str] | None = None
) -> tuple[bytes, memoryview]:
    """Write ``array`` to ``fd`` as an ``.npy`` file (what ``np.save`` writes; no pickle, no copy).

    Returns:
        What was written, header then data (a view of the array's memory), for a caller that
        digests the file without reading it back.
    """
    array = np.ascontiguousarray(array)
    if array.dtype.hasobject:
        raise ValueError("object arrays are not written (they would need pickle)")
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, np.lib.format.header_data_from_array_1_0(array))
    header = buffer.getvalue()
    data = array.reshape(-1).view(np.uint8).data
    write_all(fd, header, path)
    write_all(fd, data, path)
    return header, data


def read_npy(raw: bytes) -> np.ndarray:
    """The array of an ``.npy`` file's bytes, read in place (read-only, no copy; never unpickles).

    The header is read with a pattern, not numpy's reader: that one calls ``ast.literal_eval``,
    which CPython 3.11 can fail with ``SystemError: AST constructor recursion depth mismatch`` when
    threads parse at once (python/cpython#106905), and a service loads many users' KBs from threads.
    A header of another shape is left to numpy.

    Raises:
        ValueError: not an ``.npy`` file, or an object array (that would need pickle).
    """
    dtype, shape, order, offset = _npy_layout(raw)
    count = int(np.prod(shape, dtype=np.int64))
    flat = np.frombuffer(raw, dtype=dtype, count=count, offset=offset)
    return flat.reshape(shape, order=order)


def map_npy(path: str | os.PathLike[str]) -> np.ndarray:
    """An ``.npy`` file mapped read-only: pages are read as rows are (header read as by :func:`read_npy`).

    Raises:
        ValueError: not an ``.npy`` file, an object array, or shorter than its header says.
        OSError: the file cannot be read.
    """
    dtype, shape, order, offset = _npy_file_layout(path)
    if int(np.prod(shape, dtype=np.int64)) == 0:
        return np.zeros(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order=order)


#: Enough of an ``.npy`` file to hold its header.
_NPY_HEAD_BYTES = 1 << 16


def _npy_file_layout(
    path: str | os.PathLike[str],
) -> tuple[np.dtype[Any], tuple[int, ...], Literal["C", "F"], int]:
    """:func:`_npy_layout` of the file at ``path`` (only its header is read)."""
    with open(path, "rb") as handle:
        return _npy_layout(handle.read(_NPY_HEAD_BYTES))


def _npy_layout(raw: bytes) -> tuple[np.dtype[Any], tuple[int, ...], Literal["C", "F"], int]:
    """Dtype, shape, order and data offset of the ``.npy`` file that starts with ``raw``."""
    if raw[:6] != b"\x93NUMPY" or len(raw) < 10:
        raise ValueError("not an .npy file (no magic string)")
    major = raw[6]
    size_bytes = 2 if major == 1 else 4
    (length,) = struct.unpack("<H" if size_bytes == 2 else "<I", raw[8 : 8 + size_bytes])
    start = 8 + size_bytes
    header = raw[start : start + length].decode("latin1")
    match = _NPY_HEADER.match(header)
    if match is not None:
        dtype = np.dtype(match["descr"])
        shape = tuple(int(n) for n in match["shape"].replace(" ", "").split(",") if n)
        fortran = match["fortran"] == "True"
        offset = start + length
    else:
        buffer = io.BytesIO(raw)
        version = np.lib.format.read_magic(buffer)
        reader = (
            np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        )
        shape, fortran, dtype = reader(buffer)
        offset = buffer.tell()
    if dtype.hasobject:
        raise ValueError("object arrays are not allowed (they would need pickle)")
    return dtype, shape, "F" if fortran else "C", offset


def read_npy_file(
    path: str | os.PathLike[str], dtype: npt.DTypeLike, *, block_bytes: int = 1 << 23
) -> tuple[np.ndarray, str]:
    """An ``.npy`` file's array converted to ``dtype`` as it is read, and the file's digest.

    The file is read in blocks of about ``block_bytes`` into the converted array, so a float32
    file read as float16 never holds its float32 rows all at once. The digest is
    ``blake2b-128`` of the whole file, as the store's checksums record it.

    Raises:
        ValueError: not an ``.npy`` file, an object array, or shorter than its header says.
        OSError: the file cannot be read.
    """
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as handle:
        head = handle.read(_NPY_HEAD_BYTES)
        stored, shape, order, offset = _npy_layout(head)
        digest.update(head[:offset])
        handle.seek(offset)
        out = np.empty(shape, dtype=dtype, order=order)
        flat = out.reshape(-1, order="A")
        step = max(1, block_bytes // max(1, stored.itemsize))
        done = 0
        while done < flat.size:
            raw = handle.read(min(step, flat.size - done) * stored.itemsize)
            if len(raw) % stored.itemsize or not raw:
                raise ValueError(f"{os.fspath(path)}: shorter than its header says")
            digest.update(raw)
            block = np.frombuffer(raw, dtype=stored)
            flat[done : done + block.size] = block
            done += block.size
        digest.update(handle.read())
    return out, digest.hexdigest()


class RowReader(Protocol):
    """Rows of a 2-D matrix read on demand (:class:`NpyRows`, or rows gathered from two of them)."""

    @property
    def shape(self) -> tuple[int, ...]:
        """The matrix's shape."""

    def read(self, rows: npt.NDArray[np.intp]) -> np.ndarray:
        """The rows at ``rows``, in that order."""


class NpyRows:
    """Rows of a 2-D ``.npy`` file read on demand with ``os.pread`` (no mapping: nothing stays resident).

    The file stays open until the object is collected, so a folder pruned meanwhile (POSIX) does
    not take the rows away.

    Raises:
        ValueError: not a C-ordered 2-D ``.npy`` file.
        OSError: the file cannot be opened.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        dtype, shape, order, offset = _npy_file_layout(path)
        if len(shape) != 2 or order != "C":
            raise ValueError(f"{os.fspath(path)}: not a C-ordered 2-D array")
        self.dtype = dtype
        self.shape = shape
        self._offset = offset
        self._row_bytes = shape[1] * dtype.itemsize
        self._fd = os.open(path, os.O_RDONLY)
        weakref.finalize(self, os.close, self._fd)

    def read(self, rows: npt.NDArray[np.intp]) -> np.ndarray:
        """The rows asked for, in that order."""
        out = np.empty((len(rows), self.shape[1]), dtype=self.dtype)
        buffer = out.reshape(-1).view(np.uint8)
        for n, row in enumerate(rows.tolist()):
            start = n * self._row_bytes
            data = os.pread(self._fd, self._row_bytes, self._offset + row * self._row_bytes)
            if len(data) != self._row_bytes:
                raise OSError(f"short read of row {row}")
            buffer[start : start + self._row_bytes] = np.frombuffer(data, dtype=np.uint8)
        return out
