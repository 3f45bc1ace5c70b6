"""The KB on disk: standalone JSON files plus anchor vectors, written atomically.

Layout of a KB folder::

    manifest.json            schema version, current generation, counts, embedder
    g000007/                 one complete generation of the KB
        utterances.json  entities.json  events.json  topics.json  summaries.json  build.json
        vectors.json             ids and text digests of each kind's rows
        vectors-entity.npy  vectors-event.npy  vectors-topic.npy  vectors-summary.npy
    cache/                   model response cache (LLM extractors)

A save writes a new generation folder next to the current one, then replaces ``manifest.json``
atomically (temp file + ``os.replace``). A reader therefore sees the old KB or the new one, never
a mix, and a crash mid-save leaves the previous generation in force. The previous generation is
kept so readers that loaded its manifest can finish.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from gravity_core.anchor_vectors import VECTOR_KINDS, AnchorVectors, KindVectors
from gravity_core.errors import AnchorStoreError
from gravity_core.schema import SCHEMA_VERSION, KnowledgeBase

__all__ = ["MANIFEST", "AnchorStore", "LoadedKB", "write_json_atomic"]

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
_GENERATION = re.compile(r"^g(\d{6})$")
_KEEP_GENERATIONS = 2
_PARTS = ("utterances", "entities", "events", "topics", "summaries", "build")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` through a temp file in the same folder and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, ensure_ascii=False, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@dataclass
class LoadedKB:
    """A KB read from disk with its anchor vectors."""

    kb: KnowledgeBase
    vectors: AnchorVectors
    generation: int


class AnchorStore:
    """Reads and writes one KB folder."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    @property
    def cache_dir(self) -> Path:
        """Where model responses for builds of this KB are cached."""
        return self.directory / "cache"

    def exists(self) -> bool:
        """Whether the folder holds a KB."""
        return (self.directory / MANIFEST).is_file()

    def save(self, kb: KnowledgeBase, vectors: AnchorVectors) -> int:
        """Write ``kb`` and ``vectors`` as a new generation; returns its number."""
        if self.directory.exists() and not self.directory.is_dir():
            raise AnchorStoreError("is not a folder", path=str(self.directory))
        self.directory.mkdir(parents=True, exist_ok=True)
        generation = max(self._generations(), default=0) + 1
        final = self.directory / f"g{generation:06d}"
        staging = Path(tempfile.mkdtemp(dir=self.directory, prefix=f".g{generation:06d}."))
        try:
            self._write_generation(staging, kb, vectors)
            os.replace(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "generation": generation,
            "saved_at": datetime.now(UTC).isoformat(),
            "embedder": vectors.embedder,
            "counts": {
                "utterances": len(kb.utterances),
                "entities": len(kb.entities),
                "events": len(kb.events),
                "topics": len(kb.topics),
                "summaries": len(kb.summaries),
            },
        }
        write_json_atomic(self.directory / MANIFEST, manifest)
        self._prune(keep_from=generation - _KEEP_GENERATIONS + 1)
        logger.info("saved KB generation %d to %s", generation, self.directory)
        return generation

    def load(self) -> LoadedKB:
        """Read the current generation.

        Raises:
            AnchorStoreError: the folder holds no KB, or a file is missing, corrupt or of
                another schema version. The message names the file.
        """
        manifest_path = self.directory / MANIFEST
        manifest = self._read_json(manifest_path)
        if not isinstance(manifest, dict) or not isinstance(manifest.get("generation"), int):
            raise AnchorStoreError("not a GRAVITY manifest (no 'generation' number)", path=str(manifest_path))
        version = manifest.get("schema_version")
        if version != SCHEMA_VERSION:
            raise AnchorStoreError(
                f"schema version {version!r}; this GRAVITY reads version {SCHEMA_VERSION}",
                path=str(manifest_path),
            )
        generation: int = manifest["generation"]
        folder = self.directory / f"g{generation:06d}"
        data: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        for part in _PARTS:
            data[part] = self._read_json(folder / f"{part}.json")
        try:
            kb = KnowledgeBase.from_dict(data)
        except ValidationError as exc:
            raise AnchorStoreError(f"invalid KB content: {_first_error(exc)}", path=str(folder)) from exc
        vectors = self._read_vectors(folder)
        return LoadedKB(kb=kb, vectors=vectors, generation=generation)

    def _write_generation(self, folder: Path, kb: KnowledgeBase, vectors: AnchorVectors) -> None:
        dumped = kb.to_dict()
        for part in _PARTS:
            write_json_atomic(folder / f"{part}.json", dumped[part])
        index: dict[str, Any] = {"embedder": vectors.embedder, "dim": vectors.dim, "kinds": {}}
        for kind in VECTOR_KINDS:
            kv = vectors.get(kind)
            index["kinds"][kind] = {"ids": kv.ids, "digests": kv.digests}
            with open(folder / f"vectors-{kind}.npy", "wb") as handle:
                np.save(handle, np.ascontiguousarray(kv.matrix, dtype=np.float32), allow_pickle=False)
                handle.flush()
                os.fsync(handle.fileno())
        write_json_atomic(folder / "vectors.json", index)

    def _read_vectors(self, folder: Path) -> AnchorVectors:
        index = self._read_json(folder / "vectors.json")
        try:
            vectors = AnchorVectors(embedder=str(index["embedder"]), dim=int(index["dim"]))
            for kind in VECTOR_KINDS:
                entry = index["kinds"][kind]
                path = folder / f"vectors-{kind}.npy"
                try:
                    matrix = np.load(path, allow_pickle=False)
                except (OSError, ValueError) as exc:
                    raise AnchorStoreError(f"unreadable vector file: {exc}", path=str(path)) from exc
                if matrix.shape[0] != len(entry["ids"]):
                    raise AnchorStoreError(
                        f"{matrix.shape[0]} rows for {len(entry['ids'])} anchor ids", path=str(path)
                    )
                vectors.kinds[kind] = KindVectors(
                    ids=list(entry["ids"]), digests=list(entry["digests"]), matrix=matrix.astype(np.float32)
                )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, AnchorStoreError):
                raise
            raise AnchorStoreError(
                f"invalid vector index: {exc!r}", path=str(folder / "vectors.json")
            ) from exc
        return vectors

    @staticmethod
    def _read_json(path: Path) -> Any:
        try:
            with open(path, encoding="utf-8") as handle:
                return json.load(handle)
        except FileNotFoundError as exc:
            what = "no GRAVITY KB here (manifest.json missing)" if path.name == MANIFEST else "file missing"
            raise AnchorStoreError(what, path=str(path)) from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise AnchorStoreError(f"corrupt JSON: {exc}", path=str(path)) from exc
        except OSError as exc:
            raise AnchorStoreError(f"cannot read: {exc.strerror}", path=str(path)) from exc

    def _generations(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        found = (_GENERATION.match(p.name) for p in self.directory.iterdir() if p.is_dir())
        return sorted(int(m.group(1)) for m in found if m)

    def _prune(self, keep_from: int) -> None:
        for generation in self._generations():
            if generation < keep_from:
                shutil.rmtree(self.directory / f"g{generation:06d}", ignore_errors=True)
        for leftover in self.directory.glob(".g*"):
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return f"{loc}: {err['msg']}"
