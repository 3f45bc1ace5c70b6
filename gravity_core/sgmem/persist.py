"""An SGMem index on disk: JSON plus ``.npy`` files (no pickle), written atomically.

Layout::

    manifest.json              format, version, current generation, embedder, graph settings, counts
    g000003/                   one complete generation (.gravity-generation.json marks it as ours)
        units.json             sessions, rounds, turns, sentences (parents by index)
        memories.json          generated memories and the session digests they were made from
        vectors-sentence.npy  vectors-turn.npy  vectors-round.npy  vectors-session.npy  vectors-memory.npy
        graph-neighbours.npy   int32 (n_sentences, k), -1 padding
        graph-weights.npy      float32 (n_sentences, k)
    cache/                     model response cache of the memory generator (CLI builds)

A save writes a new generation folder under a temporary name, renames it, then replaces
``manifest.json`` (temp file + ``os.replace``): a reader sees the old index or the new one, and a
crash mid-save leaves the previous generation in force. The previous generation is kept; older
ones are deleted only if the store can prove it wrote them (:mod:`gravity_core.storage.generation_dirs`).
A save holds the folder's writer lock. An OS error (a read-only folder, a full disk, a folder where a
file should be, a name too long) is a :class:`~gravity_core.errors.StorageAccessError` naming the path
and what to do, with the previous generation intact.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from gravity_core.errors import AnchorStoreError
from gravity_core.sgmem.config import GraphConfig
from gravity_core.sgmem.graph import SentenceGraph
from gravity_core.sgmem.memories import Memory
from gravity_core.sgmem.state import VECTOR_KINDS, SGMemState
from gravity_core.sgmem.units import DialogueUnits
from gravity_core.storage.files import read_npy, write_json_atomic, write_npy
from gravity_core.storage.generation_dirs import (
    WRITER_LOCK,
    check_output_folder,
    fsync_dir,
    generation_folder,
    next_generation,
    owned_generations,
    remove_generations,
    stage_generation,
    writer_lock,
)
from gravity_core.storage.os_errors import check_writable, os_errors

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "is_sgmem_dir", "load_state", "save_state"]

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
FORMAT = "gravity-sgmem"
FORMAT_VERSION = 1
_CACHE = "cache"
_KIND = "SGMem folder"


def is_sgmem_dir(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` holds an SGMem index (its manifest names the SGMem format)."""
    path = Path(directory) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == FORMAT


def save_state(directory: str | os.PathLike[str], state: SGMemState) -> int:
    """Write ``state`` as a new generation of the index in ``directory``; returns its number.

    Raises:
        AnchorStoreError: ``directory`` is a file, holds something that is not an SGMem index,
            holds generations but no manifest, or another writer holds its lock.
        StorageAccessError: the OS refused a write (the previous generation stays current).
    """
    folder = Path(directory)
    manifest_path = folder / MANIFEST
    with os_errors(folder, kind=_KIND):
        if manifest_path.exists() and not manifest_path.is_file():
            raise AnchorStoreError(
                "is not a file (GRAVITY keeps the index's manifest there): move it away",
                path=str(manifest_path),
            )
        if manifest_path.exists() and not is_sgmem_dir(folder):
            raise AnchorStoreError(
                "holds another kind of index (its manifest is not SGMem's)", path=str(folder)
            )
        if not manifest_path.exists():
            hint = "SGMem.load cannot read them; move them away or save to a new folder"
            check_output_folder(folder, FORMAT, {WRITER_LOCK, _CACHE}, hint)
        with writer_lock(folder):
            check_writable(folder, kind=_KIND)
            return _save_locked(folder, state)


def _save_locked(folder: Path, state: SGMemState) -> int:
    previous = _current_generation(folder) if (folder / MANIFEST).exists() else None
    generation = next_generation(folder)
    staging = stage_generation(folder, generation, FORMAT, previous)
    try:
        _write_generation(staging, state)
        fsync_dir(staging)
        os.replace(staging, generation_folder(folder, generation))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_dir(folder)
    on_disk = owned_generations(folder, FORMAT)
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "generation": generation,
        "generations": on_disk,
        "saved_at": datetime.now(UTC).isoformat(),
        "embedder": state.embedder,
        "dim": state.dim,
        "graph": state.graph_config.model_dump(mode="json"),
        "counts": state.counts(),
    }
    write_json_atomic(folder / MANIFEST, manifest)
    fsync_dir(folder)
    remove_generations(folder, FORMAT, set(on_disk) - {generation, previous})
    logger.info("saved SGMem generation %d to %s", generation, folder)
    return generation


def _current_generation(folder: Path) -> int:
    manifest = _read_json(folder / MANIFEST)
    generation = manifest.get("generation") if isinstance(manifest, dict) else None
    if type(generation) is not int:
        raise AnchorStoreError("invalid manifest: no 'generation' number", path=str(folder / MANIFEST))
    return generation


def _write_generation(folder: Path, state: SGMemState) -> None:
    write_json_atomic(folder / "units.json", state.units.to_json())
    write_json_atomic(
        folder / "memories.json",
        {"sessions": dict(state.memory_digests), "items": [m.to_json() for m in state.memories]},
    )
    arrays: dict[str, np.ndarray] = {
        f"vectors-{kind}": np.ascontiguousarray(state.vectors[kind], dtype=np.float32)
        for kind in VECTOR_KINDS
    }
    arrays["graph-neighbours"] = np.ascontiguousarray(state.sentence_graph.neighbours, dtype=np.int32)
    arrays["graph-weights"] = np.ascontiguousarray(state.sentence_graph.weights, dtype=np.float32)
    for name, array in arrays.items():
        npy = folder / f"{name}.npy"
        fd = os.open(npy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            write_npy(fd, array, npy)
            os.fsync(fd)
        finally:
            os.close(fd)


def load_state(directory: str | os.PathLike[str]) -> SGMemState:
    """Read the current generation of the index in ``directory``.

    Raises:
        AnchorStoreError: no index, another format or version, or a missing, corrupt or
            inconsistent file (the message names it).
        StorageAccessError: the OS refused to read the folder.
    """
    folder = Path(directory)
    with os_errors(folder, kind=_KIND, action="read"):
        return _load(folder)


def _load(folder: Path) -> SGMemState:
    manifest_path = folder / MANIFEST
    manifest = _read_json(manifest_path)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise AnchorStoreError("not an SGMem index (no 'gravity-sgmem' manifest)", path=str(manifest_path))
    if manifest.get("version") != FORMAT_VERSION:
        raise AnchorStoreError(
            f"SGMem format version {manifest.get('version')!r}; this GRAVITY reads version {FORMAT_VERSION}",
            path=str(manifest_path),
        )
    try:
        generation = int(manifest["generation"])
        embedder = str(manifest["embedder"])
        dim = int(manifest["dim"])
        graph_config = GraphConfig.model_validate(manifest["graph"])
    except (KeyError, TypeError, ValueError, ValidationError) as exc:
        raise AnchorStoreError(f"invalid manifest: {exc}", path=str(manifest_path)) from exc
    gen = generation_folder(folder, generation)
    units = DialogueUnits.from_json(_read_json(gen / "units.json"), path=str(gen / "units.json"))
    memories_path = gen / "memories.json"
    raw_memories = _read_json(memories_path)
    try:
        memories = [Memory.from_json(m, path=str(memories_path)) for m in raw_memories["items"]]
        digests = {str(k): str(v) for k, v in dict(raw_memories["sessions"]).items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise AnchorStoreError(f"invalid memories: {exc!r}", path=str(memories_path)) from exc
    expected = {
        "sentence": len(units.sentences),
        "turn": len(units.turns),
        "round": len(units.rounds),
        "session": len(units.sessions),
        "memory": len(memories),
    }
    vectors = {kind: _read_matrix(gen / f"vectors-{kind}.npy", expected[kind], dim) for kind in VECTOR_KINDS}
    neighbours = _read_array(gen / "graph-neighbours.npy")
    weights = _read_array(gen / "graph-weights.npy")
    try:
        graph = SentenceGraph(graph_config.k, graph_config.gamma, neighbours, weights)
    except AnchorStoreError as exc:
        raise AnchorStoreError(str(exc), path=str(gen / "graph-neighbours.npy")) from exc
    if graph.n != len(units.sentences):
        raise AnchorStoreError(
            f"graph has {graph.n} nodes for {len(units.sentences)} sentences",
            path=str(gen / "graph-neighbours.npy"),
        )
    return SGMemState(
        embedder=embedder,
        dim=dim,
        graph_config=graph_config,
        units=units,
        vectors=vectors,
        graph=graph,
        memories=memories,
        memory_digests=digests,
    )


def _read_array(path: Path) -> np.ndarray:
    try:
        return np.array(read_npy(path.read_bytes()))  # a writable copy, as np.load gives
    except FileNotFoundError as exc:
        raise AnchorStoreError("file missing", path=str(path)) from exc
    except (OSError, ValueError, EOFError) as exc:
        raise AnchorStoreError(f"unreadable array: {exc}", path=str(path)) from exc


def _read_matrix(path: Path, rows: int, dim: int) -> np.ndarray:
    matrix = _read_array(path)
    if matrix.ndim != 2 or matrix.shape != (rows, dim):
        raise AnchorStoreError(f"shape {matrix.shape}, expected ({rows}, {dim})", path=str(path))
    return matrix.astype(np.float32)


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError as exc:
        what = "no SGMem index here (manifest.json missing)" if path.name == MANIFEST else "file missing"
        raise AnchorStoreError(what, path=str(path)) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AnchorStoreError(f"corrupt JSON: {exc}", path=str(path)) from exc
    except OSError as exc:
        raise AnchorStoreError(f"cannot read: {exc.strerror}", path=str(path)) from exc
