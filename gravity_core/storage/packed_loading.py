"""Reading a generation for queries: records kept as compressed JSON, vectors as the engine asks.

The records are kept by :mod:`.packed_kb`, every record validated and every file checked as
:mod:`.loading` does for a whole KB; the vectors are mapped, read as float16 or without their
digests.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gravity_core.errors import AnchorStoreError
from gravity_core.schema import BuildInfo
from gravity_core.storage.checksums import Checks, read_bytes, read_json
from gravity_core.storage.generation_delta import BASE, CHANGED, merged_members
from gravity_core.storage.layout import LoadedKB
from gravity_core.storage.loading import first_error, open_generation
from gravity_core.storage.packed_kb import (
    INDEXED_PARTS,
    RECORD_PARTS,
    InvalidRecord,
    PackedKB,
    PackedRecords,
    json_members,
)
from gravity_core.storage.vector_files import read_vectors

__all__ = ["load_packed_generation"]


def load_packed_generation(
    directory: Path,
    generation: int,
    checksums_digest: str | None,
    vector_kinds: Collection[str] | None,
    mapped_kinds: Collection[str],
    half_from: int | None,
    digests: bool,
) -> LoadedKB[PackedKB]:
    """Read one generation folder as :meth:`AnchorStore.load_packed` says."""
    folder, check, delta = open_generation(directory, generation, checksums_digest)
    records = {
        part: _read_records(
            folder, part, model, check, indexed=part in INDEXED_PARTS, delta=delta is not None
        )
        for part, model in RECORD_PARTS.items()
    }
    build_path = folder / "build.json"
    try:
        build = BuildInfo.model_validate(read_json(build_path, check))
    except ValidationError as exc:
        raise AnchorStoreError(f"invalid KB content: {first_error(exc)}", path=str(build_path)) from exc
    kb = PackedKB(build=build, **records)
    vectors = read_vectors(
        folder, check, vector_kinds, mapped=mapped_kinds, half_from=half_from, digests=digests, delta=delta
    )
    check.raise_first()
    return LoadedKB(kb=kb, vectors=vectors, generation=generation)


def _read_records(
    folder: Path, part: str, model: type[Any], check: Checks, *, indexed: bool, delta: bool
) -> PackedRecords[Any]:
    """A part's records; of a delta generation, its base's updated with the delta's."""
    if not delta:
        path = folder / f"{part}.json"
        raw = read_bytes(path, check)
        try:
            return PackedRecords(model, json_members(raw), indexed=indexed)
        except InvalidRecord as exc:
            raise AnchorStoreError(f"invalid KB content: {part}.{exc}", path=str(path)) from exc
        except ValueError as exc:  # not JSON, not an object, not UTF-8
            raise AnchorStoreError(f"corrupt JSON: {exc}", path=str(path)) from exc
    base_path, changed_path = folder / f"{BASE}{part}.json", folder / f"{CHANGED}{part}.json"
    base_raw, changed_raw = read_bytes(base_path, check), read_bytes(changed_path, check)
    try:  # the delta's members are read first, so that JSON errors name the file at fault
        changed = list(json_members(changed_raw))
    except ValueError as exc:
        raise AnchorStoreError(f"corrupt JSON: {exc}", path=str(changed_path)) from exc
    changed_ids = {key for key, _ in changed}
    try:
        return PackedRecords(model, merged_members(json_members(base_raw), changed), indexed=indexed)
    except InvalidRecord as exc:
        path = changed_path if exc.key in changed_ids else base_path
        raise AnchorStoreError(f"invalid KB content: {part}.{exc}", path=str(path)) from exc
    except ValueError as exc:
        raise AnchorStoreError(f"corrupt JSON: {exc}", path=str(base_path)) from exc
