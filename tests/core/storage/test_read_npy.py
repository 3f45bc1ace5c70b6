"""read_npy reads what write_npy and np.save write, in place, without numpy's ast-based header reader
(CPython 3.11 can fail it from threads: python/cpython#106905), and never unpickles."""

from __future__ import annotations

import io
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from gravity_core.storage.files import read_npy, write_npy


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.zeros((0, 384), dtype=np.float32),
        np.zeros((0,), dtype=np.float32),
        np.arange(5, dtype=np.int64),
        np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)),
        np.float32(2.5).reshape(()),
        np.arange(8, dtype=">i4").reshape(2, 2, 2),
    ],
)
def test_it_reads_what_numpy_writes(array: np.ndarray, tmp_path: Path) -> None:
    saved = io.BytesIO()
    np.save(saved, array)
    got = read_npy(saved.getvalue())
    assert got.dtype == array.dtype and got.shape == array.shape
    assert np.array_equal(got, array)
    assert not got.flags.writeable  # in place: no copy
    if array.ndim == 0:
        return  # write_npy writes a 0-d array as shape (1,), as np.ascontiguousarray makes it
    fd = os.open(tmp_path / "a.npy", os.O_WRONLY | os.O_CREAT)
    try:
        write_npy(fd, array)
    finally:
        os.close(fd)
    assert np.array_equal(read_npy((tmp_path / "a.npy").read_bytes()), array)


def test_a_header_of_another_shape_is_left_to_numpy() -> None:
    saved = io.BytesIO()
    np.lib.format.write_array(saved, np.arange(3, dtype=np.float32), version=(2, 0))
    raw = bytearray(saved.getvalue())
    header_end = raw.index(b"}")
    raw[header_end - 2 : header_end] = b"  "  # "(3,), }" -> "(3,)  }": no longer the usual layout
    assert np.array_equal(read_npy(bytes(raw)), np.arange(3, dtype=np.float32))


def test_object_arrays_and_other_files_are_refused() -> None:
    saved = io.BytesIO()
    np.save(saved, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="object arrays"):
        read_npy(saved.getvalue())
    with pytest.raises(ValueError, match="not an .npy file"):
        read_npy(b'{"json": true}')


def test_many_threads_read_at_once() -> None:
    saved = io.BytesIO()
    np.save(saved, np.ones((64, 32), dtype=np.float32))
    raw = saved.getvalue()
    with ThreadPoolExecutor(max_workers=8) as pool:
        sums = list(pool.map(lambda _: float(read_npy(raw).sum()), range(2000)))
    assert set(sums) == {64 * 32}
