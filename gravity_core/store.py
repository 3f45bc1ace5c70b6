"""The KB on disk: standalone JSON files plus anchor vectors, written atomically.

Layout of a KB folder::

    manifest.json            schema version, current generation, counts, embedder
    g000007/                 one complete generation of the KB (.gravity-generation.json marks it as ours)
        utterances.json  entities.json  events.json  topics.json  summaries.json  build.json
        vectors.json             ids and text digests of each kind's rows
        vectors-entity.npy  vectors-event.npy  vectors-topic.npy  vectors-summary.npy
    journal.jsonl            checkpoints of a build since the current generation (gravity_core.journal)
    cache/                   model response cache (LLM extractors)

A save writes a new generation folder next to the current one (in a hidden staging folder,
renamed into place once complete, with ``checksums.json`` listing a digest of every file), then
replaces ``manifest.json`` atomically (temp file + ``os.replace``, folders fsynced). A reader
therefore sees the old KB or the new one, never a mix, and a crash mid-save leaves the previous
generation in force. A build's checkpoints between generations append what changed to the
journal (:meth:`AnchorStore.checkpoint`), which a resumed build replays (:meth:`AnchorStore.resume`)
and the next save removes; readers see whole generations only. The previous generation is kept:
readers that read its manifest can finish (a reader whose generation is pruned under it reads the
new manifest and starts again), and a damaged current generation can be rolled back to it
(:meth:`AnchorStore.rollback`).

The store deletes only generation folders it can prove it wrote (exact name and marker file, see
:mod:`gravity_core.generation_dirs`), and only after a manifest naming them is written. It refuses
a folder that is neither new, empty, nor a KB, and refuses to build on generations whose manifest
is lost (a rollback writes the manifest again).

A file that is missing, truncated, not of its format or whose digest does not match raises
:class:`~gravity_core.errors.AnchorStoreError` naming the file, and saying which earlier generation
still loads. An OS error (a read-only folder, a full disk, a folder where a file should be, a name
too long) raises :class:`~gravity_core.errors.StorageAccessError` naming the path and what to do,
with what was on disk before intact (:mod:`gravity_core.storage_errors`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import threading
from collections.abc import Callable, Collection, Iterator, Sized
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

import numpy as np
from pydantic import ValidationError

from gravity_core.anchor_vectors import VECTOR_KINDS, AnchorVectors, KindVectors
from gravity_core.errors import AnchorStoreError
from gravity_core.files import NpyRows, map_npy, new_temp_file, read_npy, read_npy_file, write_all, write_npy
from gravity_core.generation_dirs import (
    WRITER_LOCK,
    check_output_folder,
    first_saves,
    fsync_dir,
    generation_folder,
    history_start,
    next_generation,
    owned_generations,
    remove_generations,
    stage_generation,
    writer_lock,
)
from gravity_core.journal import JOURNAL, Journal, append_record, read_journal
from gravity_core.packed_kb import (
    INDEXED_PARTS,
    RECORD_PARTS,
    InvalidRecord,
    PackedKB,
    PackedRecords,
    json_members,
)
from gravity_core.schema import SCHEMA_VERSION, BuildInfo, KnowledgeBase
from gravity_core.storage_errors import check_writable, os_errors

__all__ = ["JOURNAL", "MANIFEST", "WRITER_LOCK", "AnchorStore", "LoadedKB", "SavableKB", "write_json_atomic"]

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
#: The format name in each generation folder's marker.
FORMAT = "gravity-kb"
CACHE = "cache"
_PARTS = ("utterances", "entities", "events", "topics", "summaries", "build")
CHECKSUMS = "checksums.json"
_DIGEST = "blake2b-128"
# A reader retries when a writer replaced (and pruned) its generation under it; more tries than
# this means the KB is being rewritten faster than it can be read.
_LOAD_TRIES = 5


def _digest_bytes(*pieces: bytes | memoryview) -> str:
    """The digest of ``pieces`` one after the other (as one file holding them)."""
    digest = hashlib.blake2b(digest_size=16)
    for piece in pieces:
        digest.update(piece)
    return digest.hexdigest()


def _digest_file(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class _SchemaMismatch(AnchorStoreError):
    """A manifest of another schema version: not damage, so no rollback is suggested."""


class _JournalMismatch(AnchorStoreError):
    """The journal's records do not give a valid KB over their generation (they are then dropped)."""


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
    return _digest_bytes(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode("utf-8"))


def _message(exc: AnchorStoreError) -> str:
    text = str(exc)
    prefix = f"{exc.path}: " if exc.path else ""
    return text[len(prefix) :] if prefix and text.startswith(prefix) else text


def write_json_atomic(path: Path, data: Any, *, indent: int | None = None) -> str:
    """Write ``data`` as JSON to ``path`` through a temp file in the same folder and ``os.replace``.

    Compact unless ``indent`` is given (the C encoder: several times faster than an indented dump).

    Returns:
        The digest of the bytes written (as :data:`CHECKSUMS` lists it).
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
    return _digest_bytes(encoded)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _os_errors(
    action: str,
) -> Callable[[Callable[Concatenate[AnchorStore, _P], _R]], Callable[Concatenate[AnchorStore, _P], _R]]:
    """Run a store method with its folder's OS errors told as a :class:`StorageAccessError`."""

    def wrap(
        method: Callable[Concatenate[AnchorStore, _P], _R],
    ) -> Callable[Concatenate[AnchorStore, _P], _R]:
        @functools.wraps(method)
        def guarded(self: AnchorStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            with os_errors(self.directory, action=action):
                return method(self, *args, **kwargs)

        return guarded

    return wrap


K = TypeVar("K", KnowledgeBase, PackedKB)


class SavableKB(Protocol):
    """What a save needs of a KB: each part as JSON (``"utterances"``, ``"entities"``, ``"events"``,
    ``"topics"``, ``"summaries"``: an object of records by id; ``"build"``: the build info) and how
    many records each holds. :class:`~gravity_core.schema.KnowledgeBase` is one."""

    @property
    def utterances(self) -> Sized: ...
    @property
    def entities(self) -> Sized: ...
    @property
    def events(self) -> Sized: ...
    @property
    def topics(self) -> Sized: ...
    @property
    def summaries(self) -> Sized: ...
    def part_json(self, part: str) -> bytes: ...


@dataclass
class LoadedKB(Generic[K]):
    """A KB read from disk with its anchor vectors.

    ``kb`` is a :class:`KnowledgeBase`, or from :meth:`AnchorStore.load_packed` a
    :class:`~gravity_core.packed_kb.PackedKB`. From :meth:`AnchorStore.resume`, ``generation`` may
    be ``None`` (journaled checkpoints of a first build, no generation yet) and ``journal_end`` is
    where the journal's last whole record ends (the next checkpoint appends there).
    """

    kb: K
    vectors: AnchorVectors
    generation: int | None
    journal_end: int = 0


class AnchorStore:
    """Reads and writes one KB folder."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._manifest_path = os.path.join(self.directory, MANIFEST)  # a str: stat() per query, no Path work
        # Who holds the writer lock through this store, and how deep (a save inside a build).
        self._lock_owner: int | None = None
        self._lock_depth = 0

    @property
    def cache_dir(self) -> Path:
        """Where model responses for builds of this KB are cached."""
        return self.directory / CACHE

    @_os_errors("read")
    def exists(self) -> bool:
        """Whether the folder holds a KB."""
        return (self.directory / MANIFEST).is_file()

    @_os_errors("read")
    def current_generation(self) -> int | None:
        """The generation the manifest names now (``None`` when there is no readable KB)."""
        return self._peek_generation()

    @contextlib.contextmanager
    def writer(self) -> Iterator[None]:
        """Hold the folder's writer lock: one build at a time (:func:`.generation_dirs.writer_lock`).

        Every write of the store takes it (:meth:`save`, :meth:`rollback`, the adoption in
        :meth:`prepare_build`); the thread that holds it through this store may take it again.

        Raises:
            AnchorStoreError: another build (another process, store or thread) holds it.
            StorageAccessError: the folder cannot be made or written (checked before anything
                else is done, so a build into a read-only folder stops at once).
        """
        me = threading.get_ident()
        if self._lock_owner == me:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        with contextlib.ExitStack() as held:
            with os_errors(self.directory):
                if self.directory.exists() and not self.directory.is_dir():
                    raise AnchorStoreError("is not a folder", path=str(self.directory))
                held.enter_context(writer_lock(self.directory))
                check_writable(self.directory)
                self._finish_interrupted_writes()
            self._lock_owner, self._lock_depth = me, 1
            try:
                yield
            finally:
                self._lock_owner, self._lock_depth = None, 0

    def _finish_interrupted_writes(self) -> None:
        """Remove what a killed save left (its staging folder, a half-deleted generation), also when
        this writer saves nothing; and finish a forget killed before it deleted what came before
        it: the generations older than the newest one that began a new history, and a journal that
        followed one of them."""
        start = history_start(self.directory, FORMAT)
        stale = [g for g in self._generations() if g < start]
        journal = self.directory / JOURNAL
        if stale and journal.exists() and not read_journal(journal, self._peek_generation()).records:
            journal.unlink()
        # Also the half-deleted folders of a delete that was killed (no save is running: we hold
        # the lock).
        remove_generations(self.directory, FORMAT, set(stale))
        if stale:
            logger.warning("%s: deleted generations %s left by an interrupted forget", self.directory, stale)

    @_os_errors("write")
    def check_output(self) -> None:
        """Refuse a folder that is not new, empty or a KB, or whose manifest is lost.

        Raises:
            AnchorStoreError: the folder is a file; holds other things and no KB; or holds
                generation folders but no manifest (the message points to :meth:`rollback`).
        """
        self._check_output()

    def _check_output(self) -> None:
        manifest = self.directory / MANIFEST
        if not manifest.exists():
            check_output_folder(self.directory, FORMAT, {WRITER_LOCK, CACHE, JOURNAL}, self._rollback_hint())
        elif not manifest.is_file():
            raise AnchorStoreError(
                "is not a file (GRAVITY keeps the KB's manifest there): move it away", path=str(manifest)
            )

    @_os_errors("write")
    def prepare_build(self) -> None:
        """Before a build reads the folder: adopt a first save killed before its manifest, or refuse.

        A folder whose only generation is its first save and that has no manifest is either a
        first build killed between its two renames or a one-save KB whose manifest was lost; either
        way that generation is made current (as :meth:`rollback` would), so nothing is lost.

        Raises:
            AnchorStoreError: see :meth:`check_output`; or another build holds the writer lock
                while there is a first save to adopt.
        """
        if self.exists():
            return
        if self._adoptable():
            with self.writer():
                if self.exists() or not self._adoptable():  # another writer was quicker
                    return self.prepare_build()
                with contextlib.suppress(AnchorStoreError):
                    adopted = self._rollback()
                    logger.warning(
                        "%s had no manifest; its first save g%06d is current", self.directory, adopted
                    )
                    return None
        self._check_output()
        return None

    def _adoptable(self) -> bool:
        """No manifest, and every generation on disk is a first save."""
        generations = self._generations()
        no_manifest = not (self.directory / MANIFEST).exists()
        return no_manifest and bool(generations) and generations == first_saves(self.directory, FORMAT)

    @_os_errors("write")
    def save(self, kb: SavableKB, vectors: AnchorVectors, *, keep_history: bool = True) -> int:
        """Write ``kb`` and ``vectors`` as a new generation; returns its number.

        ``kb`` is a :class:`~gravity_core.schema.KnowledgeBase`, or anything that gives each part's
        JSON and its record counts (:class:`SavableKB`: a KB too large to hold as models, written
        part by part); loading validates every record either way.

        ``keep_history=False`` (a forget) starts a new history: every earlier generation and the
        journal are deleted once the new one is current, and :meth:`rollback` never goes back
        past it (the generation's marker says so, so this holds without the manifest too). A
        crash before the deletes leaves earlier generations that nothing loads; the next save
        deletes them.

        Raises:
            AnchorStoreError: the folder is refused by :meth:`check_output`, or its manifest is
                unreadable (then nothing is written: :meth:`rollback` first).
            StorageAccessError: the OS refused a write (the previous generation stays current).
        """
        self._check_output()
        with self.writer():
            return self._save_locked(kb, vectors, keep_history=keep_history)

    def _save_locked(self, kb: SavableKB, vectors: AnchorVectors, *, keep_history: bool = True) -> int:
        self._check_output()
        previous = self._read_manifest()["generation"] if self.exists() else None
        generation = next_generation(self.directory)
        final = generation_folder(self.directory, generation)
        staging = stage_generation(
            self.directory, generation, FORMAT, previous, history_dropped=not keep_history
        )
        try:
            self._write_generation(staging, kb, vectors)
            fsync_dir(staging)
            os.replace(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        fsync_dir(self.directory)
        on_disk = self._generations()
        self._write_manifest(generation, kb, vectors.embedder, on_disk)
        journal = self.directory / JOURNAL
        if journal.exists():  # it followed the previous generation; this one holds all of it
            journal.unlink()
            fsync_dir(self.directory)
        kept = {generation, previous} if keep_history else {generation}
        start = history_start(self.directory, FORMAT)
        remove_generations(self.directory, FORMAT, {g for g in on_disk if g not in kept or g < start})
        logger.info("saved KB generation %d to %s", generation, self.directory)
        return generation

    @_os_errors("read")
    def load(
        self, generation: int | None = None, *, vector_kinds: Collection[str] | None = None
    ) -> LoadedKB[KnowledgeBase]:
        """Read the current generation (or the one given, if it is still on disk).

        A reader that races a build sees the generation of the manifest it read, whole; if the
        build prunes that generation meanwhile, the new manifest is read and loading starts again.

        Args:
            generation: a generation to read instead of the current one.
            vector_kinds: the vector kinds to read (default: all); a query engine needs neither
                the turn vectors nor anything but the anchors and expansions.

        Raises:
            AnchorStoreError: the folder holds no KB, or a file is missing, corrupt or of
                another schema version. The message names the file, and the newest earlier
                generation that still loads (see :meth:`rollback`).
        """
        if generation is not None:
            return self._load_generation(generation, vector_kinds=vector_kinds)
        return self._load_current(vector_kinds, with_journal=False)

    @_os_errors("read")
    def load_packed(
        self,
        *,
        vector_kinds: Collection[str],
        mapped_kinds: Collection[str] = (),
        half_from: int | None = None,
        digests: bool = True,
    ) -> LoadedKB[PackedKB]:
        """The current generation for queries: records kept as compressed JSON (see ``packed_kb``).

        Every record is validated, as by :meth:`load`, and the same errors are raised.

        Args:
            vector_kinds: the vector kinds to read.
            mapped_kinds: those of them to map from their file instead of reading into memory
                (rows are paged in when a query reads them; a kind read by row, such as the
                expansions, then costs almost no memory).
            half_from: kinds of this many rows or more are read as float16 (for an index that
                scores only a few candidate rows of a large kind, see ``NumpyAnchorIndex``).
            digests: keep each row's text digest (what an index synced by digest, such as
                Chroma's, compares); ``False`` leaves them out (about 9 MB at 100k anchors).
        """
        return self._load_current(vector_kinds, with_journal=False, packed=(mapped_kinds, half_from, digests))

    def _load_current(
        self,
        vector_kinds: Collection[str] | None,
        *,
        with_journal: bool,
        packed: tuple[Collection[str], int | None, bool] | None = None,
    ) -> Any:
        """The current generation (retrying while writers replace it); ``packed``: see :meth:`load_packed`."""
        for _ in range(_LOAD_TRIES):
            manifest = self._read_manifest()
            current: int = manifest["generation"]
            try:
                if packed is not None:
                    return self._load_packed_generation(
                        current, manifest.get("checksums"), vector_kinds, *packed
                    )
                if not with_journal:
                    return self._load_generation(current, manifest.get("checksums"), vector_kinds)
                journal = read_journal(self.directory / JOURNAL, current)
                try:
                    return self._load_generation(current, manifest.get("checksums"), vector_kinds, journal)
                except _JournalMismatch as exc:
                    logger.warning("%s; building on generation %d alone", exc, current)
                    return self._load_generation(current, manifest.get("checksums"), vector_kinds)
            except AnchorStoreError as exc:
                if self._peek_generation() not in (None, current):
                    logger.debug("KB generation %d replaced while reading it, reading again", current)
                    continue
                fallback = self._fallback_hint(current)
                if fallback is None:
                    raise
                raise AnchorStoreError(f"{_message(exc)}; {fallback}", path=exc.path) from exc
        raise AnchorStoreError(
            f"the KB was rewritten {_LOAD_TRIES} times while being read", path=str(self.directory)
        )

    @_os_errors("read")
    def resume(self) -> LoadedKB[KnowledgeBase] | None:
        """What a build continues from: the current generation with the journal's checkpoints replayed.

        ``None`` when the folder holds neither a KB nor a journal. The vectors are the
        generation's: the build embeds again what the journal changed.

        Raises:
            AnchorStoreError: see :meth:`load`.
        """
        if self.exists():
            return self._load_current(None, with_journal=True)
        journal = read_journal(self.directory / JOURNAL, None)
        if not journal.records:
            return None
        data = KnowledgeBase().to_dict()
        journal.apply(data)
        try:
            kb = KnowledgeBase.from_dict(data)
        except ValidationError as exc:
            logger.warning(
                "%s: the journal does not give a valid KB (%s); starting afresh", self.directory, exc
            )
            return None
        embedder, dim = journal.embedder or ("", 0)
        return LoadedKB(kb, AnchorVectors(embedder=embedder, dim=dim), None, journal.end)

    def stamp(self) -> tuple[int, ...] | None:
        """A cheap mark of the manifest as it is now: one ``stat``, nothing read or parsed.

        Every manifest write replaces the file (temp file + ``os.replace``), so its inode, size and
        times change; a reader that keeps the stamp of what it loaded can tell, per query, whether
        it must look again (then :meth:`current_version` says if the KB really changed). ``None``
        when the manifest is missing or cannot be stat'ed (an OS error is not raised here: the
        reader's next :meth:`load` reports it).
        """
        try:
            st = os.stat(self._manifest_path)
        except OSError:
            return None
        return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    @_os_errors("read")
    def current_version(self) -> tuple[int, str] | None:
        """The generation the manifest names and the manifest's own digest (``None``: no readable KB).

        Two reads giving the same version saw the same KB; a new save, a rollback or a KB made again
        from scratch in the same folder (whose generation numbers start over) gives another.
        """
        manifest = self._peek_manifest()
        if manifest is None:
            return None
        return int(manifest["generation"]), str(manifest.get("digest") or manifest.get("saved_at") or "")

    @_os_errors("read")
    def state(self) -> tuple[int | None, int]:
        """The current generation and the journal's size: what changes when another build writes."""
        try:
            size = (self.directory / JOURNAL).stat().st_size
        except FileNotFoundError:
            size = 0
        return self.current_generation(), size

    @_os_errors("write")
    def checkpoint(self, line: bytes, *, base: int | None, at: int) -> int:
        """Append a journal line (from :class:`~gravity_core.journal.JournalEncoder`) after byte ``at``.

        ``base`` is the generation the record follows (the current one). Holds the writer lock.

        Returns:
            Where the journal ends now.

        Raises:
            AnchorStoreError: another build holds the lock, or saved a generation since ``base``.
            StorageAccessError: the OS refused the write (the journal's earlier records stand).
        """
        with self.writer():
            if self.current_generation() != base:
                raise AnchorStoreError(
                    f"another build saved generation {self.current_generation()} since this one read "
                    f"{base}; read the KB again",
                    path=str(self.directory),
                )
            return append_record(self.directory / JOURNAL, line, at)

    @_os_errors("read")
    def journal_outgrows_generation(self, journal_end: int) -> bool:
        """Whether a journal of ``journal_end`` bytes holds at least as much as the current generation.

        A build then saves a full generation instead of appending: the generations it writes at
        least double in size, so its full saves together cost about twice the last one.
        """
        generation = self.current_generation()
        if generation is None:
            return True
        folder = generation_folder(self.directory, generation)
        size = sum((folder / f"{part}.json").stat().st_size for part in _PARTS)
        return journal_end >= size

    @_os_errors("read")
    def generations(self) -> list[int]:
        """Numbers of the generation folders on disk, oldest first (the current one included)."""
        return self._generations()

    def rollback(self) -> int:
        """Make the newest generation before the current one that loads the current one again.

        For a KB whose current generation is damaged (the load error names the damaged file and
        the generation to go back to). With an unreadable or missing manifest, the newest
        generation that loads is chosen. The damaged generation stays on disk until later saves
        prune it. Holds the writer lock.

        Returns:
            The generation now current.

        Raises:
            AnchorStoreError: no such generation loads, or a build is writing the KB.
            StorageAccessError: the OS refused to write the manifest (nothing changed).
        """
        with os_errors(self.directory):
            if not self.directory.is_dir():
                what = "is not a folder" if self.directory.exists() else "no such folder"
                raise AnchorStoreError(f"{what}, so no KB to roll back", path=str(self.directory))
        with self.writer(), os_errors(self.directory):
            return self._rollback()

    def _rollback(self) -> int:
        current = self._peek_generation()
        start = history_start(self.directory, FORMAT)  # a forget's generation: nothing before it returns
        candidates = [g for g in self._generations() if (current is None or g < current) and g >= start]
        for generation in reversed(candidates):
            try:
                loaded = self._load_generation(generation)
            except AnchorStoreError as exc:
                logger.warning("generation %d does not load either: %s", generation, exc)
                continue
            self._write_manifest(generation, loaded.kb, loaded.vectors.embedder, self._generations())
            logger.warning("rolled %s back to generation %d", self.directory, generation)
            return generation
        why = f" (generation {start} is a forget's: the generations before it were deleted)" if start else ""
        raise AnchorStoreError(f"no earlier generation loads{why}", path=str(self.directory))

    # -- reading -----------------------------------------------------------------------------

    def _read_manifest(self) -> dict[str, Any]:
        manifest_path = self.directory / MANIFEST
        try:
            manifest = self._read_json(manifest_path)
            if isinstance(manifest, dict) and manifest.get("schema_version") not in (None, SCHEMA_VERSION):
                # Written by another GRAVITY (its digest would not be ours to check): say so plainly.
                raise _SchemaMismatch(
                    f"schema version {manifest['schema_version']!r}; this GRAVITY reads version "
                    f"{SCHEMA_VERSION}",
                    path=str(manifest_path),
                )
            problem = _manifest_problem(manifest)
            if problem:
                raise AnchorStoreError(problem, path=str(manifest_path))
        except _SchemaMismatch:
            raise
        except AnchorStoreError as exc:
            hint = self._rollback_hint()
            if hint:
                hint = f"the generation folders remain: {hint}"
                raise AnchorStoreError(f"{_message(exc)}; {hint}", path=exc.path) from exc
            raise
        return dict(manifest)

    def _rollback_hint(self) -> str | None:
        if not self._generations():
            return None
        return (
            f"'gravity build -o {self.directory} --rollback' (AnchorStore.rollback()) "
            "writes a manifest for the newest one that loads"
        )

    def _peek_manifest(self) -> dict[str, Any] | None:
        """The manifest, or ``None`` if it cannot be read."""
        try:
            return self._read_manifest()
        except AnchorStoreError:
            return None

    def _peek_generation(self) -> int | None:
        """The manifest's generation, or ``None`` if it cannot be read."""
        manifest = self._peek_manifest()
        return None if manifest is None else int(manifest["generation"])

    def _fallback_hint(self, damaged: int) -> str | None:
        for generation in reversed([g for g in self._generations() if g < damaged]):
            try:
                self._load_generation(generation)
            except AnchorStoreError:
                continue
            return (
                f"the previous generation g{generation:06d} is intact: "
                f"'gravity build -o {self.directory} --rollback' (AnchorStore.rollback()) makes it current"
            )
        return None

    def _load_generation(
        self,
        generation: int,
        checksums_digest: str | None = None,
        vector_kinds: Collection[str] | None = None,
        journal: Journal | None = None,
    ) -> LoadedKB[KnowledgeBase]:
        """Read one generation folder; ``checksums_digest`` (from the manifest) vouches for its checksums.

        ``journal``: checkpoints to replay over it (:meth:`resume`).
        """
        folder = generation_folder(self.directory, generation)
        if not folder.is_dir():
            raise AnchorStoreError("generation folder missing", path=str(folder))
        # A file whose digest does not match is reported after parsing and validation, so that a
        # file that is not JSON, or breaks the schema, is reported with that more precise reason.
        check = _Checks(self._read_checksums(folder, checksums_digest))
        data: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        for part in _PARTS:
            data[part] = self._read_json(folder / f"{part}.json", check)
        replayed = journal is not None and journal.apply(data) > 0
        try:
            kb = KnowledgeBase.from_dict(data)
        except ValidationError as exc:
            if replayed:
                raise _JournalMismatch(
                    f"the checkpoints of {JOURNAL} do not give a valid KB: {_first_error(exc)}",
                    path=str(self.directory / JOURNAL),
                ) from exc
            part = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else ""
            where = folder / f"{part}.json" if part in _PARTS else folder
            raise AnchorStoreError(f"invalid KB content: {_first_error(exc)}", path=str(where)) from exc
        vectors = self._read_vectors(folder, check, vector_kinds, None if replayed else kb)
        check.raise_first()
        end = journal.end if journal is not None and replayed else 0
        return LoadedKB(kb=kb, vectors=vectors, generation=generation, journal_end=end)

    def _load_packed_generation(
        self,
        generation: int,
        checksums_digest: str | None,
        vector_kinds: Collection[str] | None,
        mapped_kinds: Collection[str],
        half_from: int | None,
        digests: bool,
    ) -> LoadedKB[PackedKB]:
        """Read one generation folder as :meth:`load_packed` says."""
        folder = generation_folder(self.directory, generation)
        if not folder.is_dir():
            raise AnchorStoreError("generation folder missing", path=str(folder))
        check = _Checks(self._read_checksums(folder, checksums_digest))
        records = {
            part: self._read_records(folder / f"{part}.json", model, check, indexed=part in INDEXED_PARTS)
            for part, model in RECORD_PARTS.items()
        }
        build_path = folder / "build.json"
        try:
            build = BuildInfo.model_validate(self._read_json(build_path, check))
        except ValidationError as exc:
            raise AnchorStoreError(f"invalid KB content: {_first_error(exc)}", path=str(build_path)) from exc
        kb = PackedKB(build=build, **records)
        vectors = self._read_vectors(
            folder, check, vector_kinds, mapped=mapped_kinds, half_from=half_from, digests=digests
        )
        check.raise_first()
        return LoadedKB(kb=kb, vectors=vectors, generation=generation)

    def _read_records(
        self, path: Path, model: type[Any], check: _Checks, *, indexed: bool
    ) -> PackedRecords[Any]:
        raw = self._read_bytes(path, check)
        try:
            return PackedRecords(model, json_members(raw), indexed=indexed)
        except InvalidRecord as exc:
            raise AnchorStoreError(f"invalid KB content: {path.stem}.{exc}", path=str(path)) from exc
        except ValueError as exc:  # not JSON, not an object, not UTF-8
            raise AnchorStoreError(f"corrupt JSON: {exc}", path=str(path)) from exc

    def _read_checksums(self, folder: Path, digest: str | None) -> dict[str, str] | None:
        path = folder / CHECKSUMS
        if digest is None and not path.exists():
            return None  # written by a version without checksums
        raw = self._read_bytes(path)
        if digest is not None and _digest_bytes(raw) != digest:
            raise AnchorStoreError(f"corrupt: does not match the digest in {MANIFEST}", path=str(path))
        try:
            index = json.loads(raw.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise AnchorStoreError(f"corrupt JSON: {exc}", path=str(path)) from exc
        files = index.get("files") if isinstance(index, dict) else None
        if not isinstance(files, dict) or index.get("algorithm") != _DIGEST:
            raise AnchorStoreError(f"not a {_DIGEST} checksum list", path=str(path))
        return {str(k): str(v) for k, v in files.items()}

    # -- writing -----------------------------------------------------------------------------

    def _write_manifest(self, generation: int, kb: SavableKB, embedder: str, on_disk: list[int]) -> None:
        """Write the manifest naming ``generation`` current and ``on_disk`` as this store's generations.

        Only generations a written manifest names are ever pruned.
        """
        checksums = generation_folder(self.directory, generation) / CHECKSUMS
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "generation": generation,
            "generations": sorted(set(on_disk)),
            "checksums": _digest_file(checksums) if checksums.exists() else None,
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
        write_json_atomic(self.directory / MANIFEST, manifest, indent=1)
        fsync_dir(self.directory)

    def _write_generation(self, folder: Path, kb: SavableKB, vectors: AnchorVectors) -> None:
        # Each file's digest is taken from the bytes written, not read back: at 100k anchors
        # reading the folder again cost 2.7 s of a 23 s save.
        digests: dict[str, str] = {}
        for part in _PARTS:
            digests[f"{part}.json"] = write_bytes_atomic(folder / f"{part}.json", kb.part_json(part))
        index: dict[str, Any] = {"embedder": vectors.embedder, "dim": vectors.dim, "kinds": {}}
        for kind in VECTOR_KINDS:
            kv = vectors.get(kind)
            index["kinds"][kind] = {"ids": kv.ids, "digests": kv.digests}
            npy = folder / f"vectors-{kind}.npy"
            fd = os.open(npy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                written = write_npy(fd, np.asarray(kv.matrix, dtype=np.float32), npy)
                os.fsync(fd)
            finally:
                os.close(fd)
            digests[npy.name] = _digest_bytes(*written)
        digests["vectors.json"] = write_json_atomic(folder / "vectors.json", index)
        # Not listed: the ownership marker, which is not KB content (a damaged one only makes the store
        # leave the folder be).
        write_json_atomic(folder / CHECKSUMS, {"algorithm": _DIGEST, "files": dict(sorted(digests.items()))})

    def _read_vectors(
        self,
        folder: Path,
        check: _Checks | None = None,
        kinds: Collection[str] | None = None,
        kb: KnowledgeBase | None = None,
        *,
        mapped: Collection[str] = (),
        half_from: int | None = None,
        digests: bool = True,
    ) -> AnchorVectors:
        """The vectors of ``kinds`` (all by default).

        ``mapped`` kinds are mapped from their file, without digests (only a build compares them;
        ``digests=False`` leaves them out of every kind);
        kinds of ``half_from`` rows or more are read as float16, their float32 rows left in the
        file for exact scores (``KindVectors.exact_rows``).
        """
        index = self._read_json(folder / "vectors.json", check)
        try:
            vectors = AnchorVectors(embedder=str(index["embedder"]), dim=int(index["dim"]))
            for kind in VECTOR_KINDS:
                if kinds is not None and kind not in kinds:
                    continue
                entry = index["kinds"].get(kind)
                if entry is None:  # a KB from an older version; the next build adds this kind
                    continue
                path = folder / f"vectors-{kind}.npy"
                exact: NpyRows | None = None
                try:
                    if kind in mapped:
                        matrix = self._map_npy(path, check)
                    elif half_from is not None and len(entry["ids"]) >= half_from:
                        matrix, digest = read_npy_file(path, np.float16)
                        if check is not None:
                            check.verify_digest(path, digest)
                        exact = NpyRows(path)
                    else:
                        matrix = read_npy(self._read_bytes(path, check))
                except (OSError, ValueError, EOFError) as exc:
                    raise AnchorStoreError(f"unreadable vector file: {exc}", path=str(path)) from exc
                if matrix.shape[0] != len(entry["ids"]):
                    raise _row_mismatch(folder, kind, matrix.shape[0], len(entry["ids"]), check, kb)
                vectors.kinds[kind] = KindVectors(
                    exact_rows=exact,
                    ids=list(entry["ids"]),
                    digests=list(entry["digests"]) if digests and kind not in mapped else [],
                    matrix=matrix if matrix.dtype == np.float16 else matrix.astype(np.float32, copy=False),
                )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, AnchorStoreError):
                raise
            raise AnchorStoreError(
                f"invalid vector index: {exc!r}", path=str(folder / "vectors.json")
            ) from exc
        return vectors

    @staticmethod
    def _map_npy(path: Path, check: _Checks | None) -> np.ndarray:
        """An ``.npy`` file mapped read-only (its digest checked by streaming it, not by holding it)."""
        if check is not None:
            check.verify_file(path)
        return map_npy(path)

    @staticmethod
    def _read_bytes(path: Path, check: _Checks | None = None) -> bytes:
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            if path.name == MANIFEST and not path.parent.exists():
                raise AnchorStoreError("no such folder", path=str(path.parent)) from exc
            what = "no GRAVITY KB here (manifest.json missing)" if path.name == MANIFEST else "file missing"
            raise AnchorStoreError(what, path=str(path)) from exc
        except OSError as exc:
            raise AnchorStoreError(f"cannot read: {exc.strerror}", path=str(path)) from exc
        if check is not None:
            check.verify(path, data)
        return data

    @classmethod
    def _read_json(cls, path: Path, check: _Checks | None = None) -> Any:
        data = cls._read_bytes(path, check)
        try:
            return json.loads(data.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise AnchorStoreError(f"corrupt JSON: {exc}", path=str(path)) from exc

    def _generations(self) -> list[int]:
        return owned_generations(self.directory, FORMAT)


def _row_mismatch(
    folder: Path, kind: str, rows: int, ids: int, check: _Checks | None, kb: KnowledgeBase | None
) -> AnchorStoreError:
    """The error for a vector file and ``vectors.json`` that disagree, naming the file at fault.

    A file whose digest does not match is at fault; without digests (or both matching), the one
    that disagrees with the KB's count of that kind of anchor; when neither tells, both are named.
    """
    index, matrix = folder / "vectors.json", folder / f"vectors-{kind}.npy"
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


class _Checks:
    """Compares files read with the digests saved with their generation; remembers mismatches."""

    def __init__(self, digests: dict[str, str] | None) -> None:
        self.digests = digests
        self.failures: list[AnchorStoreError] = []

    def verify(self, path: Path, data: bytes) -> None:
        if self.digests is None:  # a generation written before checksums existed
            return
        expected = self.digests.get(path.name)
        if expected is None:
            self.failures.append(AnchorStoreError(f"not listed in {CHECKSUMS}", path=str(path)))
        elif _digest_bytes(data) != expected:
            self.failures.append(
                AnchorStoreError(
                    f"corrupt: its {len(data)} bytes do not match their {_DIGEST} digest in {CHECKSUMS}",
                    path=str(path),
                )
            )

    def verify_file(self, path: Path) -> None:
        """:meth:`verify` of a file read in chunks."""
        if self.digests is not None:
            self.verify_digest(path, _digest_file(path))

    def verify_digest(self, path: Path, digest: str) -> None:
        """:meth:`verify` of a file whose digest was computed as it was read."""
        if self.digests is None:
            return
        expected = self.digests.get(path.name)
        if expected is None:
            self.failures.append(AnchorStoreError(f"not listed in {CHECKSUMS}", path=str(path)))
        elif digest != expected:
            self.failures.append(
                AnchorStoreError(
                    f"corrupt: does not match its {_DIGEST} digest in {CHECKSUMS}", path=str(path)
                )
            )

    def failure_of(self, *paths: Path) -> AnchorStoreError | None:
        """The first recorded mismatch of one of ``paths``."""
        wanted = {str(p) for p in paths}
        return next((f for f in self.failures if f.path in wanted), None)

    def raise_first(self) -> None:
        if self.failures:
            raise self.failures[0]


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return f"{loc}: {err['msg']}"
