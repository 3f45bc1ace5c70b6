"""A KB folder's manifest: which generation is current, read, checked and written atomically.

``manifest.json`` names the current generation, the generations this store wrote (only those are
ever pruned), the digest of the current generation's checksum list, the embedder and the counts of
the KB, and a digest of its own canonical JSON. A save or a rollback replaces it atomically (temp
file + ``os.replace``, folder fsynced), which is what makes a new generation current.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gravity_core.errors import AnchorStoreError
from gravity_core.schema import SCHEMA_VERSION
from gravity_core.storage.checksums import CHECKSUMS, MissingFile, read_json, reason_of
from gravity_core.storage.files import digest_bytes, digest_file, write_json_atomic
from gravity_core.storage.generation_dirs import (
    WRITER_LOCK,
    check_output_folder,
    fsync_dir,
    generation_folder,
)
from gravity_core.storage.journal import JOURNAL
from gravity_core.storage.layout import CACHE, FORMAT, MANIFEST, SavableKB, kb_generations

__all__ = [
    "SchemaMismatch",
    "check_manifest_slot",
    "check_output",
    "lost_manifest_hint",
    "peek_generation",
    "peek_manifest",
    "read_manifest",
    "write_manifest",
]


class SchemaMismatch(AnchorStoreError):
    """A manifest of another schema version: not damage, so no rollback is suggested."""


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of the KB folder ``directory``, checked.

    Raises:
        SchemaMismatch: it was written for another schema version.
        AnchorStoreError: the folder or the manifest is missing, or the manifest is damaged (the
            message then says how to make the newest generation that loads current).
    """
    path = directory / MANIFEST
    try:
        try:
            manifest = read_json(path)
        except MissingFile as exc:
            if not directory.exists():
                raise AnchorStoreError("no such folder", path=str(directory)) from exc.__cause__
            raise AnchorStoreError(
                "no GRAVITY KB here (manifest.json missing)", path=str(path)
            ) from exc.__cause__
        if isinstance(manifest, dict) and manifest.get("schema_version") not in (None, SCHEMA_VERSION):
            # Written by another GRAVITY (its digest would not be ours to check): say so plainly.
            raise SchemaMismatch(
                f"schema version {manifest['schema_version']!r}; this GRAVITY reads version {SCHEMA_VERSION}",
                path=str(path),
            )
        problem = _manifest_problem(manifest)
        if problem:
            raise AnchorStoreError(problem, path=str(path))
    except SchemaMismatch:
        raise
    except AnchorStoreError as exc:
        hint = lost_manifest_hint(directory)
        if hint:
            hint = f"the generation folders remain: {hint}"
            raise AnchorStoreError(f"{reason_of(exc)}; {hint}", path=exc.path) from exc
        raise
    return dict(manifest)


def peek_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest, or ``None`` if it cannot be read."""
    try:
        return read_manifest(directory)
    except AnchorStoreError:
        return None


def peek_generation(directory: Path) -> int | None:
    """The manifest's generation, or ``None`` if it cannot be read."""
    manifest = peek_manifest(directory)
    return None if manifest is None else int(manifest["generation"])


def lost_manifest_hint(directory: Path) -> str | None:
    """What to do when generation folders remain but the manifest is lost (``None``: none remain)."""
    if not kb_generations(directory):
        return None
    return (
        f"'gravity build -o {directory} --rollback' (AnchorStore.rollback()) "
        "writes a manifest for the newest one that loads"
    )


def write_manifest(
    directory: Path, generation: int, kb: SavableKB, embedder: str, on_disk: list[int]
) -> None:
    """Write the manifest naming ``generation`` current and ``on_disk`` as this store's generations.

    Only generations a written manifest names are ever pruned.
    """
    check_manifest_slot(directory)
    checksums = generation_folder(directory, generation) / CHECKSUMS
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "generation": generation,
        "generations": sorted(set(on_disk)),
        "checksums": digest_file(checksums) if checksums.exists() else None,
        "saved_at": datetime.now(UTC).isoformat(),
        "embedder": embedder,
        "counts": {
            "utterances": len(kb.utterances),
            "entities": len(kb.entities),
            "events": len(kb.events),
            "topics": len(kb.topics),
            "summaries": len(kb.summaries),
        },
    }
    manifest["digest"] = _manifest_digest(manifest)
    write_json_atomic(directory / MANIFEST, manifest, indent=1)
    fsync_dir(directory)


def check_output(directory: Path) -> None:
    """Refuse a folder that is not new, empty or a KB, or whose manifest is lost or blocked.

    Raises:
        AnchorStoreError: the folder is a file; holds other things and no KB; holds generation
            folders but no manifest (the message points to a rollback); or something other than a
            file stands where the manifest belongs.
    """
    if not (directory / MANIFEST).exists():
        check_output_folder(directory, FORMAT, {WRITER_LOCK, CACHE, JOURNAL}, lost_manifest_hint(directory))
    check_manifest_slot(directory)


def check_manifest_slot(directory: Path) -> None:
    """Refuse a folder (or anything but a file) where the manifest belongs, naming it."""
    manifest = directory / MANIFEST
    if manifest.exists() and not manifest.is_file():
        raise AnchorStoreError(
            "is not a file (GRAVITY keeps the KB's manifest there): move it away", path=str(manifest)
        )


def _manifest_problem(manifest: Any) -> str | None:
    """What is wrong with a decoded manifest of this schema version, if anything."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("generation"), int):
        return "not a GRAVITY manifest (no 'generation' number)"
    if manifest.get("schema_version") != SCHEMA_VERSION:
        return f"no schema version {SCHEMA_VERSION} in it"
    own = manifest.get("digest")
    if own is not None and own != _manifest_digest(manifest):
        return "corrupt: its contents do not match its own digest"
    if not isinstance(manifest.get("checksums"), str | None):
        return "'checksums' is not a digest"
    kept = manifest.get("generations")
    if kept is not None and not (isinstance(kept, list) and all(type(g) is int for g in kept)):
        return "'generations' is not a list of generation numbers"
    return None


def _manifest_digest(manifest: dict[str, Any]) -> str:
    """Digest of the manifest's canonical JSON without its own ``digest`` entry."""
    rest = {k: v for k, v in manifest.items() if k != "digest"}
    return digest_bytes(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode("utf-8"))
