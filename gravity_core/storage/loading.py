"""Reading a KB's generations: one generation whole and checked, and the current one while writers replace it.

A generation is read with its checksum list (whose digest the manifest holds): a file that is
missing, truncated, not of its format or whose digest does not match raises
:class:`~gravity_core.errors.AnchorStoreError` naming the file; a mismatched digest is reported
after parsing and validation, so that a file that is not JSON, or breaks the schema, is reported
with that more precise reason. The message says which earlier generation still loads.

A reader that races a writer reads the generation its manifest named, whole; if the writer prunes
that generation meanwhile, the new manifest is read and loading starts again (:func:`load_current`).
:mod:`.packed_loading` reads a generation for queries, its records kept compressed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gravity_core.errors import AnchorStoreError
from gravity_core.schema import SCHEMA_VERSION, KnowledgeBase
from gravity_core.storage.anchor_vectors import AnchorVectors
from gravity_core.storage.checksums import CHECKSUMS, Checks, read_checksums, read_json, reason_of
from gravity_core.storage.files import DIGEST, digest_file
from gravity_core.storage.generation_delta import BASE, CHANGED, DELTA, DeltaIndex
from gravity_core.storage.generation_dirs import MARKER, generation_folder, marker_of
from gravity_core.storage.journal import JOURNAL, Journal, read_journal
from gravity_core.storage.layout import FORMAT, PART_FILES, K, LoadedKB, kb_generations
from gravity_core.storage.manifest import peek_generation, read_manifest
from gravity_core.storage.os_errors import os_errors
from gravity_core.storage.vector_files import read_vectors

__all__ = [
    "JournalMismatch",
    "MarkerDamaged",
    "base_of",
    "first_error",
    "load_current",
    "load_generation",
    "load_with_journal",
    "open_generation",
    "read_delta_index",
    "resume_from_journal",
]

logger = logging.getLogger(__name__)

# A reader retries when a writer replaced (and pruned) its generation under it; more tries than
# this means the KB is being rewritten faster than it can be read.
_LOAD_TRIES = 5


class MarkerDamaged(AnchorStoreError):
    """A generation's ownership marker is missing, unreadable, or not the one saved with it."""


class JournalMismatch(AnchorStoreError):
    """The journal's records do not give a valid KB over their generation (they are then dropped)."""


def load_current(directory: Path, read: Callable[[int, str | None], LoadedKB[K]]) -> LoadedKB[K]:
    """The current generation, read by ``read(generation, checksums digest)``.

    It retries while writers replace it; a load error says which earlier generation still loads.
    """
    for _ in range(_LOAD_TRIES):
        manifest = read_manifest(directory)
        current: int = manifest["generation"]
        try:
            return read(current, manifest.get("checksums"))
        except MarkerDamaged:
            if peek_generation(directory) not in (None, current):
                continue
            raise
        except AnchorStoreError as exc:
            if peek_generation(directory) not in (None, current):
                logger.debug("KB generation %d replaced while reading it, reading again", current)
                continue
            fallback = _fallback_hint(directory, current) or _shared_file_hint(directory, current, exc)
            if fallback is None:
                raise
            raise AnchorStoreError(f"{reason_of(exc)}; {fallback}", path=exc.path) from exc
    raise AnchorStoreError(f"the KB was rewritten {_LOAD_TRIES} times while being read", path=str(directory))


def load_with_journal(
    directory: Path, generation: int, checksums_digest: str | None, vector_kinds: Collection[str] | None
) -> LoadedKB[KnowledgeBase]:
    """The generation with the journal's checkpoints replayed (without them if they do not fit it)."""
    journal = read_journal(directory / JOURNAL, generation)
    try:
        return load_generation(directory, generation, checksums_digest, vector_kinds, journal)
    except JournalMismatch as exc:
        logger.warning("%s; building on generation %d alone", exc, generation)
        return load_generation(directory, generation, checksums_digest, vector_kinds)


def resume_from_journal(directory: Path) -> LoadedKB[KnowledgeBase] | None:
    """The KB of a first build's journaled checkpoints (no generation yet); ``None``: none, or no valid KB."""
    journal = read_journal(directory / JOURNAL, None)
    if not journal.records:
        return None
    data = KnowledgeBase().to_dict()
    journal.apply(data)
    try:
        kb = KnowledgeBase.from_dict(data)
    except ValidationError as exc:
        logger.warning("%s: the journal does not give a valid KB (%s); starting afresh", directory, exc)
        return None
    embedder, dim = journal.embedder or ("", 0)
    return LoadedKB(kb, AnchorVectors(embedder=embedder, dim=dim), None, journal.end)


def load_generation(
    directory: Path,
    generation: int,
    checksums_digest: str | None = None,
    vector_kinds: Collection[str] | None = None,
    journal: Journal | None = None,
) -> LoadedKB[KnowledgeBase]:
    """Read one generation folder; ``checksums_digest`` (from the manifest) vouches for its checksums.

    ``journal``: checkpoints to replay over it.
    """
    folder, check, delta = open_generation(directory, generation, checksums_digest)
    data: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    changed_ids: dict[str, set[str]] = {}
    for part in PART_FILES:
        if delta is None or part == "build":
            data[part] = read_json(folder / f"{part}.json", check)
            continue
        data[part] = items = read_json(folder / f"{BASE}{part}.json", check)
        changed = read_json(folder / f"{CHANGED}{part}.json", check)
        for path, value in (
            (folder / f"{BASE}{part}.json", items),
            (folder / f"{CHANGED}{part}.json", changed),
        ):
            if not isinstance(value, dict):
                raise AnchorStoreError(f"not a JSON object of {part}", path=str(path))
        items.update(changed)
        changed_ids[part] = set(changed)
    replayed = journal is not None and journal.apply(data) > 0
    try:
        kb = KnowledgeBase.from_dict(data)
    except ValidationError as exc:
        if replayed:
            raise JournalMismatch(
                f"the checkpoints of {JOURNAL} do not give a valid KB: {first_error(exc)}",
                path=str(directory / JOURNAL),
            ) from exc
        part = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else ""
        where = folder / f"{part}.json" if part in PART_FILES else folder
        if part in changed_ids:  # a delta generation: the file the item came from
            loc = exc.errors()[0]["loc"]
            from_delta = len(loc) > 1 and str(loc[1]) in changed_ids[part]
            where = folder / f"{CHANGED if from_delta else BASE}{part}.json"
        raise AnchorStoreError(f"invalid KB content: {first_error(exc)}", path=str(where)) from exc
    vectors = read_vectors(folder, check, vector_kinds, None if replayed else kb, delta=delta)
    check.raise_first()
    end = journal.end if journal is not None and replayed else 0
    return LoadedKB(kb=kb, vectors=vectors, generation=generation, journal_end=end)


def open_generation(
    directory: Path, generation: int, checksums_digest: str | None
) -> tuple[Path, Checks, DeltaIndex | None]:
    """A generation's folder, its checks (its marker checked) and its delta index (``None``: a full one)."""
    folder = generation_folder(directory, generation)
    if not folder.is_dir():
        raise AnchorStoreError("generation folder missing", path=str(folder))
    check = Checks(read_checksums(folder, checksums_digest))
    _check_marker(folder, generation, check)
    return folder, check, read_delta_index(folder, check)


def read_delta_index(folder: Path, check: Checks | None = None) -> DeltaIndex | None:
    """``delta.json`` of a delta generation (``None``: a full one).

    A folder whose checksums list the file is a delta generation even when the file is gone.
    """
    path = folder / DELTA
    listed = check is not None and check.lists(DELTA)
    if not listed and not path.exists():
        return None
    try:
        return DeltaIndex.parse(read_json(path, check))
    except ValueError as exc:
        raise AnchorStoreError(f"invalid delta index: {exc}", path=str(path)) from exc


def base_of(directory: Path, generation: int) -> int | None:
    """The full generation a delta generation links its unchanged files from.

    ``None`` for a full generation, or one whose ``delta.json`` cannot be read.
    """
    with os_errors(directory, action="read"):
        try:
            delta = read_delta_index(generation_folder(directory, generation))
        except AnchorStoreError:
            return None
    return None if delta is None else delta.base


def first_error(exc: ValidationError) -> str:
    """Where and what the first error of a validation is."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return f"{loc}: {err['msg']}"


def _check_marker(folder: Path, generation: int, check: Checks) -> None:
    """Raise :class:`MarkerDamaged` unless the folder's marker is whole and names it."""
    path = folder / MARKER
    marker = marker_of(folder)
    if not path.is_file():
        problem = "missing"
    elif marker.get("format") != FORMAT or marker.get("generation") != generation:
        problem = "unreadable or naming another folder"
    elif check.digests is not None and MARKER in check.digests and digest_file(path) != check.digests[MARKER]:
        problem = f"corrupt: does not match its {DIGEST} digest in {CHECKSUMS}"
    else:
        return
    repair = (
        f"'gravity build -o {folder.parent} --rollback' (AnchorStore.rollback()) restores it from {CHECKSUMS}"
        if check.lists(MARKER)
        else "restore the KB folder from a backup or build it again"
    )
    raise MarkerDamaged(
        f"generation marker {problem} (it proves the folder is GRAVITY's, so no save, forget or "
        f"rollback would touch the folder without it); {repair}",
        path=str(path),
    )


def _shared_file_hint(directory: Path, damaged: int, exc: AnchorStoreError) -> str | None:
    """What to say of a damaged file that a delta generation shares with its base."""
    base = base_of(directory, damaged)
    if base is None or exc.path is None or not Path(exc.path).name.startswith(BASE):
        return None
    return (
        f"it is a link to a file of g{base:06d}, the full generation this delta generation follows, "
        "so no earlier generation holds it intact: restore the KB folder from a backup or build it "
        "again from the conversation"
    )


def _fallback_hint(directory: Path, damaged: int) -> str | None:
    """Which earlier generation still loads, and how to make it current."""
    for generation in reversed([g for g in kb_generations(directory) if g < damaged]):
        try:
            load_generation(directory, generation)
        except AnchorStoreError:
            continue
        return (
            f"the previous generation g{generation:06d} is intact: "
            f"'gravity build -o {directory} --rollback' (AnchorStore.rollback()) makes it current"
        )
    return None
