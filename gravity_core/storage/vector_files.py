"""A generation's anchor vectors on disk.

``vectors.json`` holds each kind's ids and text digests, and one float32 ``vectors-<kind>.npy`` per
kind the rows; a delta generation holds its base's files with the rows that changed
(:mod:`gravity_core.storage.generation_delta`).

A kind is read whole, mapped from its file (rows paged in as a query reads them), or read as
float16 with its float32 rows left in the file for exact scores (``KindVectors.exact_rows``).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from gravity_core.errors import AnchorStoreError
from gravity_core.schema import KnowledgeBase
from gravity_core.storage.anchor_vectors import VECTOR_KINDS, AnchorVectors, KindVectors
from gravity_core.storage.checksums import Checks, read_bytes, read_json
from gravity_core.storage.files import (
    NpyRows,
    RowReader,
    map_npy,
    read_npy,
    read_npy_file,
    write_json_atomic,
    write_npy_file,
)
from gravity_core.storage.generation_delta import (
    BASE,
    CHANGED,
    DELTA,
    DeltaIndex,
    GatheredRows,
    gather,
    rows_after,
)

__all__ = ["read_matrix", "read_vectors", "write_vectors"]


def write_vectors(folder: Path, vectors: AnchorVectors) -> dict[str, str]:
    """Write ``vectors`` into a new generation folder; returns the digest of each file by name."""
    digests: dict[str, str] = {}
    index: dict[str, Any] = {"embedder": vectors.embedder, "dim": vectors.dim, "kinds": {}}
    for kind in VECTOR_KINDS:
        kv = vectors.get(kind)
        index["kinds"][kind] = {"ids": kv.ids, "digests": kv.digests}
        npy = folder / f"vectors-{kind}.npy"
        digests[npy.name] = write_npy_file(npy, kv.matrix)
    digests["vectors.json"] = write_json_atomic(folder / "vectors.json", index)
    return digests


def read_vectors(
    folder: Path,
    check: Checks | None = None,
    kinds: Collection[str] | None = None,
    kb: KnowledgeBase | None = None,
    *,
    mapped: Collection[str] = (),
    half_from: int | None = None,
    digests: bool = True,
    delta: DeltaIndex | None = None,
) -> AnchorVectors:
    """The vectors of ``kinds`` (all by default); of a delta generation, its base's with its rows.

    ``kb``: the KB the vectors belong to, to name the file at fault when a vector file and
    ``vectors.json`` disagree. ``mapped`` kinds are mapped from their file, without digests (only a
    build compares them; ``digests=False`` leaves them out of every kind); a delta generation's
    rows of such a kind are read into ``KindVectors.tail``. Kinds of ``half_from`` rows or more are
    read as float16, their float32 rows left in the file for exact scores (``KindVectors.exact_rows``).
    """
    prefix = BASE if delta is not None else ""
    index_path = folder / f"{prefix}vectors.json"
    index = read_json(index_path, check)
    try:
        vectors = AnchorVectors(embedder=str(index["embedder"]), dim=int(index["dim"]))
        for kind in VECTOR_KINDS:
            if kinds is not None and kind not in kinds:
                continue
            change = delta.kinds.get(kind) if delta is not None else None
            entry = index["kinds"].get(kind)
            if entry is None and change is None:
                continue  # a KB from an older version; the next build adds this kind
            ids = list(entry["ids"]) if entry is not None else []
            row_digests = list(entry["digests"]) if entry is not None else []
            source = None
            if change is not None:
                final_ids, final_digests, source = rows_after(ids, row_digests, change)
            else:
                final_ids, final_digests = ids, row_digests
            keep_digests = digests and kind not in mapped
            mode = "read"
            if kind in mapped:
                mode = "mapped"
            elif half_from is not None and len(final_ids) >= half_from and entry is not None:
                mode = "half"  # (a kind new in a delta has no float32 file to read exact rows from)
            path = folder / f"{prefix}vectors-{kind}.npy"
            if entry is None:
                matrix: np.ndarray = np.zeros((0, vectors.dim), dtype=np.float32)
            else:
                matrix = read_matrix(path, check, mode)
            if matrix.shape[0] != len(ids):
                counted = kb if delta is None else None  # a base's rows are not the KB's count
                raise _row_mismatch(folder, kind, matrix.shape[0], len(ids), check, counted, prefix)
            exact: RowReader | None = NpyRows(path) if mode == "half" else None
            if matrix.dtype != np.float16:
                matrix = matrix.astype(np.float32, copy=False)
            if change is None or source is None:
                vectors.kinds[kind] = KindVectors(
                    exact_rows=exact, ids=ids, digests=row_digests if keep_digests else [], matrix=matrix
                )
                continue
            tail_path = folder / f"{CHANGED}vectors-{kind}.npy"
            tail = read_matrix(tail_path, check, "read").astype(np.float32, copy=False)
            if tail.shape[0] != len(change.ids):
                raise AnchorStoreError(
                    f"{tail.shape[0]} rows where {DELTA} lists {len(change.ids)} {kind} rows",
                    path=str(tail_path),
                )
            if mode == "mapped":
                vectors.kinds[kind] = KindVectors(ids=final_ids, matrix=matrix, tail=tail, source=source)
                continue
            if exact is not None:
                exact = GatheredRows(exact, NpyRows(tail_path), source)
            vectors.kinds[kind] = KindVectors(
                exact_rows=exact,
                ids=final_ids,
                digests=final_digests if keep_digests else [],
                matrix=gather(matrix, tail, source, matrix.dtype),
            )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, AnchorStoreError):
            raise
        raise AnchorStoreError(f"invalid vector index: {exc!r}", path=str(index_path)) from exc
    return vectors


def read_matrix(path: Path, check: Checks | None, mode: str) -> np.ndarray:
    """A vector file, ``mapped``, read as float16 (``half``) or ``read`` whole.

    A mapped file's digest is checked by streaming it, not by holding it.
    """
    try:
        if mode == "mapped":
            if check is not None:
                check.verify_file(path)
            return map_npy(path)
        if mode == "half":
            matrix, digest = read_npy_file(path, np.float16)
            if check is not None:
                check.verify_digest(path, digest)
            return matrix
        return read_npy(read_bytes(path, check))
    except (OSError, ValueError, EOFError) as exc:
        raise AnchorStoreError(f"unreadable vector file: {exc}", path=str(path)) from exc


def _row_mismatch(
    folder: Path,
    kind: str,
    rows: int,
    ids: int,
    check: Checks | None,
    kb: KnowledgeBase | None,
    prefix: str = "",
) -> AnchorStoreError:
    """The error for a vector file and ``vectors.json`` that disagree, naming the file at fault.

    A file whose digest does not match is at fault; without digests (or both matching), the one
    that disagrees with the KB's count of that kind of anchor; when neither tells, both are named.
    """
    index, matrix = folder / f"{prefix}vectors.json", folder / f"{prefix}vectors-{kind}.npy"
    failed = check.failure_of(index, matrix) if check is not None else None
    if failed is not None:
        return failed
    anchors = _anchor_count(kb, kind)
    if anchors is not None and rows == anchors:
        return AnchorStoreError(
            f"lists {ids} {kind} ids where {matrix.name} has {rows} rows and the KB {anchors} {kind} "
            "anchors (a stale or edited file)",
            path=str(index),
        )
    if anchors is not None and ids == anchors:
        return AnchorStoreError(
            f"{rows} rows where {index.name} lists {ids} {kind} ids and the KB holds {anchors} "
            f"{kind} anchors",
            path=str(matrix),
        )
    return AnchorStoreError(
        f"{index.name} lists {ids} {kind} ids but {matrix.name} has {rows} rows: "
        "one of them is stale or damaged",
        path=str(folder),
    )


def _anchor_count(kb: KnowledgeBase | None, kind: str) -> int | None:
    """How many anchors of ``kind`` the KB holds (``None`` for kinds not counted by anchors)."""
    if kb is None:
        return None
    counted = {"entity": len(kb.entities), "event": len(kb.events), "topic": len(kb.topics)}
    return counted.get(kind)
