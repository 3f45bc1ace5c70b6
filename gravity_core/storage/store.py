"""The KB on disk: standalone JSON files plus anchor vectors, written atomically.

Layout of a KB folder::

    manifest.json            schema version, current generation, counts, embedder
    g000007/                 one complete generation of the KB (.gravity-generation.json marks it as ours)
        utterances.json  entities.json  events.json  topics.json  summaries.json  build.json
        vectors.json             ids and text digests of each kind's rows
        vectors-entity.npy  vectors-event.npy  vectors-topic.npy  vectors-summary.npy
    g000008/                 a delta generation over g000007: what an add changed (delta-*.json,
                             delta-vectors-*.npy, delta.json), the rest hard links to g000007's
                             files (base-*), see gravity_core.storage.generation_delta
    journal.jsonl            a build's checkpoints since the current generation (gravity_core.storage.journal)
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
(:meth:`AnchorStore.rollback`); so is the full generation that a kept delta generation links its
files from.

The store deletes only generation folders it can prove it wrote (exact name and marker file, see
:mod:`gravity_core.storage.generation_dirs`), and only after a manifest naming them is written. It refuses
a folder that is neither new, empty, nor a KB, and refuses to build on generations whose manifest
is lost (a rollback writes the manifest again).

A file that is missing, truncated, not of its format or whose digest does not match raises
:class:`~gravity_core.errors.AnchorStoreError` naming the file, and saying which earlier generation
still loads. An OS error (a read-only folder, a full disk, a folder where a file should be, a name
too long) raises :class:`~gravity_core.errors.StorageAccessError` naming the path and what to do,
with what was on disk before intact (:mod:`gravity_core.storage.os_errors`).
"""

from __future__ import annotations

import contextlib
import errno
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

from gravity_core.errors import AnchorStoreError, ConfigurationError
from gravity_core.schema import SCHEMA_VERSION, BuildInfo, KnowledgeBase
from gravity_core.schema.changes import PARTS, KBChanges
from gravity_core.storage.anchor_vectors import VECTOR_KINDS, AnchorVectors, KindVectors
from gravity_core.storage.file_cache import refuse_linked_cache
from gravity_core.storage.files import (
    NpyRows,
    RowReader,
    map_npy,
    new_temp_file,
    read_npy,
    read_npy_file,
    write_all,
    write_npy,
)
from gravity_core.storage.generation_delta import (
    BASE,
    CHANGED,
    DELTA,
    MAX_SHARE,
    BaseGeneration,
    DeltaIndex,
    DeltaPlan,
    GatheredRows,
    file_sizes,
    gather,
    key_order,
    merged_members,
    plan_delta,
    rows_after,
)
from gravity_core.storage.generation_dirs import (
    MARKER,
    WRITER_LOCK,
    check_output_folder,
    first_saves,
    fsync_dir,
    generation_folder,
    history_start,
    marker_of,
    named_generations,
    next_generation,
    owned_generations,
    remove_generations,
    stage_generation,
    writer_lock,
)
from gravity_core.storage.journal import JOURNAL, Journal, append_record, read_journal
from gravity_core.storage.os_errors import check_writable, os_errors
from gravity_core.storage.packed_kb import (
    INDEXED_PARTS,
    RECORD_PARTS,
    InvalidRecord,
    PackedKB,
    PackedRecords,
    json_members,
)

__all__ = [
    "JOURNAL",
    "MANIFEST",
    "PAGE",
    "WRITER_LOCK",
    "AnchorStore",
    "LoadedKB",
    "SavableKB",
    "write_json_atomic",
]

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
#: The format name in each generation folder's marker.
FORMAT = "gravity-kb"
CACHE = "cache"
#: The explorer page ``gravity show`` writes into the KB folder by default, and the line of its
#: head that proves GRAVITY wrote it. It holds the KB's text, so a forget deletes it.
PAGE = "anchors.html"
PAGE_GENERATOR = '<meta name="generator" content="gravity show">'
_PARTS = ("utterances", "entities", "events", "topics", "summaries", "build")
CHECKSUMS = "checksums.json"
_DIGEST = "blake2b-128"
# A reader retries when a writer replaced (and pruned) its generation under it; more tries than
# this means the KB is being rewritten faster than it can be read.
_LOAD_TRIES = 5
# A folder where a hard link cannot be made (another file system, one without links, too many):
# a full generation is written instead of a delta.
_NO_LINKS = frozenset({errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP})


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
    :class:`~gravity_core.storage.packed_kb.PackedKB`. From :meth:`AnchorStore.resume`, ``generation`` may
    be ``None`` (journaled checkpoints of a first build, no generation yet) and ``journal_end`` is
    where the journal's last whole record ends (the next checkpoint appends there).
    """

    kb: K
    vectors: AnchorVectors
    generation: int | None
    journal_end: int = 0


class AnchorStore:
    """Reads and writes one KB folder."""

    def __init__(self, directory: str | os.PathLike[str], *, delta_share: float = MAX_SHARE) -> None:
        """A store of the KB folder ``directory``.

        Args:
            delta_share: a save given what changed writes a delta generation while the delta
                holds at most this share of its base's bytes (see :meth:`save`); ``0`` writes
                only full generations, which share no file with each other.
        """
        if not 0 <= delta_share <= 1:
            raise ConfigurationError(f"delta_share must be between 0 and 1, got {delta_share!r}")
        self.directory = Path(directory)
        self.delta_share = delta_share
        self._manifest_path = os.path.join(self.directory, MANIFEST)  # a str: stat() per query, no Path work
        # Who holds the writer lock through this store, and how deep (a save inside a build).
        self._lock_owner: int | None = None
        self._lock_depth = 0
        # The generations whose markers the writer holding the lock restored as it took it.
        self._markers_restored: set[int] = set()

    @property
    def cache_dir(self) -> Path:
        """Where model responses, parses and kept answers for builds of this KB are cached.

        Raises:
            AnchorStoreError: the folder, or a folder in it, is a symbolic link: a build would
                write through it and a forget could not tell the KB's files from others'.
        """
        cache = self.directory / CACHE
        refuse_linked_cache(cache, self.directory)
        return cache

    @_os_errors("read")
    def exists(self) -> bool:
        """Whether the folder holds a KB."""
        return (self.directory / MANIFEST).is_file()

    @_os_errors("read")
    def current_generation(self) -> int | None:
        """The generation the manifest names now (``None`` when there is no readable KB)."""
        return self._peek_generation()

    @_os_errors("read")
    def last_save_was_forget(self) -> bool:
        """Whether the current generation is a forget's (the first of a new history)."""
        current = self._peek_generation()
        return current is not None and history_start(self.directory, FORMAT) == current

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
        """Restore damaged generation markers (:meth:`_repair_markers`); remove what a killed save
        left (its staging folder, a half-deleted generation), also when this writer saves nothing;
        and finish a forget killed before it deleted what came before it: the generations older
        than the newest one that began a new history, and a journal that followed one of them."""
        self._markers_restored = self._repair_markers()
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
        self._check_manifest_slot()

    def _check_manifest_slot(self) -> None:
        """Refuse a folder (or anything but a file) where the manifest belongs, naming it."""
        manifest = self.directory / MANIFEST
        if manifest.exists() and not manifest.is_file():
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
    def save(
        self,
        kb: SavableKB,
        vectors: AnchorVectors,
        *,
        keep_history: bool = True,
        changed: KBChanges | None = None,
    ) -> int:
        """Write ``kb`` and ``vectors`` as a new generation; returns its number.

        ``kb`` is a :class:`~gravity_core.schema.KnowledgeBase`, or anything that gives each part's
        JSON and its record counts (:class:`SavableKB`: a KB too large to hold as models, written
        part by part); loading validates every record either way.

        ``keep_history=False`` (a forget) starts a new history: every earlier generation and the
        journal are deleted once the new one is current, and :meth:`rollback` never goes back
        past it (the generation's marker says so, so this holds without the manifest too). A
        crash before the deletes leaves earlier generations that nothing loads; the next save
        deletes them.

        ``changed`` (a :class:`~gravity_core.schema.KnowledgeBase`'s items changed since the
        current generation, as a build notes them) lets the save write a delta generation: only
        those items and the vector rows whose text changed, with the rest linked from the last
        full generation (:mod:`gravity_core.storage.generation_delta`). A full generation is written when
        there is no current one, the delta would be large, the folder cannot hold hard links, or
        the KB's order is not the one a delta keeps.

        Raises:
            AnchorStoreError: the folder is refused by :meth:`check_output`, or its manifest is
                unreadable (then nothing is written: :meth:`rollback` first).
            StorageAccessError: the OS refused a write (the previous generation stays current).
        """
        self._check_output()
        with self.writer():
            return self._save_locked(kb, vectors, keep_history=keep_history, changed=changed)

    def _save_locked(
        self,
        kb: SavableKB,
        vectors: AnchorVectors,
        *,
        keep_history: bool = True,
        changed: KBChanges | None = None,
    ) -> int:
        self._check_output()
        previous = self._read_manifest()["generation"] if self.exists() else None
        plan = None
        if (
            changed is not None
            and self.delta_share > 0
            and keep_history
            and previous is not None
            and isinstance(kb, KnowledgeBase)
        ):
            plan = self._plan_delta(previous, kb, vectors, changed)
        generation = next_generation(self.directory)
        final = generation_folder(self.directory, generation)
        staging = stage_generation(
            self.directory, generation, FORMAT, previous, history_dropped=not keep_history
        )
        try:
            as_delta = plan is not None and self._write_delta(staging, kb, plan)
            if not as_delta:
                self._write_generation(staging, kb, vectors)
            fsync_dir(staging)
            os.replace(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        fsync_dir(self.directory)
        if not keep_history:
            self._remove_page()
        on_disk = self._generations()
        self._write_manifest(generation, kb, vectors.embedder, on_disk)
        journal = self.directory / JOURNAL
        if journal.exists():  # it followed the previous generation; this one holds all of it
            journal.unlink()
            fsync_dir(self.directory)
        kept = {generation, previous} if keep_history else {generation}
        kept |= {base for g in kept if g is not None and (base := self.base_of(g)) is not None}
        start = history_start(self.directory, FORMAT)
        remove_generations(self.directory, FORMAT, {g for g in on_disk if g not in kept or g < start})
        logger.info(
            "saved KB generation %d to %s%s",
            generation,
            self.directory,
            f" (a delta over generation {plan.base})" if plan is not None and as_delta else "",
        )
        return generation

    def _plan_delta(
        self, current: int, kb: KnowledgeBase, vectors: AnchorVectors, changed: KBChanges
    ) -> DeltaPlan | None:
        """The delta over the current generation's base (``None``: write a full generation)."""
        folder = generation_folder(self.directory, current)
        try:
            delta = self._delta_index(folder)
            earlier: dict[str, dict[str, bytes]] = {}
            base_folder = folder
            if delta is not None:
                base_folder = generation_folder(self.directory, delta.base)
                check = _Checks(self._read_checksums(folder, None))
                for part in PARTS:
                    raw = self._read_bytes(folder / f"{CHANGED}{part}.json", check)
                    earlier[part] = dict(json_members(raw))
                check.raise_first()  # a delta damaged since it was read is not carried into the next
                if self._delta_index(base_folder) is not None:
                    return None  # (never written: a delta's base is a full generation)
            index = self._read_json(base_folder / CHECKSUMS)
            files = {name: digest for name, digest in index["files"].items() if name != MARKER}  # KB files
            counts, orders = index.get("counts"), index.get("orders")
            if not isinstance(counts, dict) or not isinstance(orders, dict):  # an older version's
                return None
            base = BaseGeneration(
                number=delta.base if delta is not None else current,
                files=files,
                sizes=file_sizes(base_folder, files),
                counts={str(k): int(v) for k, v in counts.items()},
                orders={str(k): str(v) for k, v in orders.items()},
                vectors=self._read_json(base_folder / "vectors.json"),
            )
        except (AnchorStoreError, OSError, ValueError, KeyError, TypeError) as exc:
            logger.debug("%s: writing a full generation (%s)", self.directory, exc)
            return None
        return plan_delta(kb, vectors, changed, base, earlier, self.delta_share)

    @_os_errors("read")
    def base_of(self, generation: int) -> int | None:
        """The full generation a delta generation links its unchanged files from (``None``: a full
        generation, or one whose ``delta.json`` cannot be read)."""
        try:
            delta = self._delta_index(generation_folder(self.directory, generation))
        except AnchorStoreError:
            return None
        return None if delta is None else delta.base

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
            except _MarkerDamaged:
                if self._peek_generation() not in (None, current):
                    continue
                raise
            except AnchorStoreError as exc:
                if self._peek_generation() not in (None, current):
                    logger.debug("KB generation %d replaced while reading it, reading again", current)
                    continue
                fallback = self._fallback_hint(current) or self._shared_file_hint(current, exc)
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
        """Append a journal line (:class:`~gravity_core.storage.journal.JournalEncoder`) after byte ``at``.

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
        if (folder / DELTA).exists():
            names = [f"{prefix}{part}.json" for part in PARTS for prefix in (BASE, CHANGED)] + ["build.json"]
        else:
            names = [f"{part}.json" for part in _PARTS]
        return journal_end >= file_sizes(folder, names)

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

    def _remove_page(self) -> None:
        """Delete the explorer page ``gravity show`` wrote into the folder (before a forget's
        generation becomes current: the page shows the turns forgotten)."""
        page = self.directory / PAGE
        if page.is_symlink() or not page.is_file():
            return
        with page.open("rb") as handle:
            head = handle.read(4096)
        if PAGE_GENERATOR.encode() in head:
            page.unlink()
            logger.info("%s: deleted the explorer page (a forget); 'gravity show' writes it anew", page)
        else:
            logger.warning("%s was not written by 'gravity show': left as it is", page)

    def _rollback(self) -> int:
        current = self._peek_generation()
        if current in self._markers_restored:  # its marker was all that was damaged?
            try:
                self._load_generation(current)
            except AnchorStoreError as exc:
                logger.warning("generation %d does not load with its marker restored: %s", current, exc)
            else:
                logger.warning(
                    "%s: generation %d is current again, its marker restored", self.directory, current
                )
                return current
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

    def _shared_file_hint(self, damaged: int, exc: AnchorStoreError) -> str | None:
        """What to say of a damaged file that a delta generation shares with its base."""
        base = self.base_of(damaged)
        if base is None or exc.path is None or not Path(exc.path).name.startswith(BASE):
            return None
        return (
            f"it is a link to a file of g{base:06d}, the full generation this delta generation follows, "
            "so no earlier generation holds it intact: restore the KB folder from a backup or build it "
            "again from the conversation"
        )

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
        self._check_marker(folder, generation, check)
        delta = self._delta_index(folder, check)
        data: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        changed_ids: dict[str, set[str]] = {}
        for part in _PARTS:
            if delta is None or part == "build":
                data[part] = self._read_json(folder / f"{part}.json", check)
                continue
            data[part] = items = self._read_json(folder / f"{BASE}{part}.json", check)
            changed = self._read_json(folder / f"{CHANGED}{part}.json", check)
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
                raise _JournalMismatch(
                    f"the checkpoints of {JOURNAL} do not give a valid KB: {_first_error(exc)}",
                    path=str(self.directory / JOURNAL),
                ) from exc
            part = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else ""
            where = folder / f"{part}.json" if part in _PARTS else folder
            if part in changed_ids:  # a delta generation: the file the item came from
                loc = exc.errors()[0]["loc"]
                from_delta = len(loc) > 1 and str(loc[1]) in changed_ids[part]
                where = folder / f"{CHANGED if from_delta else BASE}{part}.json"
            raise AnchorStoreError(f"invalid KB content: {_first_error(exc)}", path=str(where)) from exc
        vectors = self._read_vectors(folder, check, vector_kinds, None if replayed else kb, delta=delta)
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
        self._check_marker(folder, generation, check)
        delta = self._delta_index(folder, check)
        records = {
            part: self._read_records(
                folder, part, model, check, indexed=part in INDEXED_PARTS, delta=delta is not None
            )
            for part, model in RECORD_PARTS.items()
        }
        build_path = folder / "build.json"
        try:
            build = BuildInfo.model_validate(self._read_json(build_path, check))
        except ValidationError as exc:
            raise AnchorStoreError(f"invalid KB content: {_first_error(exc)}", path=str(build_path)) from exc
        kb = PackedKB(build=build, **records)
        vectors = self._read_vectors(
            folder,
            check,
            vector_kinds,
            mapped=mapped_kinds,
            half_from=half_from,
            digests=digests,
            delta=delta,
        )
        check.raise_first()
        return LoadedKB(kb=kb, vectors=vectors, generation=generation)

    def _read_records(
        self, folder: Path, part: str, model: type[Any], check: _Checks, *, indexed: bool, delta: bool
    ) -> PackedRecords[Any]:
        if not delta:
            path = folder / f"{part}.json"
            raw = self._read_bytes(path, check)
            try:
                return PackedRecords(model, json_members(raw), indexed=indexed)
            except InvalidRecord as exc:
                raise AnchorStoreError(f"invalid KB content: {part}.{exc}", path=str(path)) from exc
            except ValueError as exc:  # not JSON, not an object, not UTF-8
                raise AnchorStoreError(f"corrupt JSON: {exc}", path=str(path)) from exc
        base_path, changed_path = folder / f"{BASE}{part}.json", folder / f"{CHANGED}{part}.json"
        base_raw, changed_raw = self._read_bytes(base_path, check), self._read_bytes(changed_path, check)
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

    @staticmethod
    def _check_marker(folder: Path, generation: int, check: _Checks) -> None:
        """Raise :class:`_MarkerDamaged` unless the folder's marker is whole and names it."""
        path = folder / MARKER
        marker = marker_of(folder)
        if not path.is_file():
            problem = "missing"
        elif marker.get("format") != FORMAT or marker.get("generation") != generation:
            problem = "unreadable or naming another folder"
        elif (
            check.digests is not None
            and MARKER in check.digests
            and _digest_file(path) != check.digests[MARKER]
        ):
            problem = f"corrupt: does not match its {_DIGEST} digest in {CHECKSUMS}"
        else:
            return
        repair = (
            f"'gravity build -o {folder.parent} --rollback' (AnchorStore.rollback()) restores it from "
            f"{CHECKSUMS}"
            if check.digests is not None and MARKER in check.digests
            else "restore the KB folder from a backup or build it again"
        )
        raise _MarkerDamaged(
            f"generation marker {problem} (it proves the folder is GRAVITY's, so no save, forget or "
            f"rollback would touch the folder without it); {repair}",
            path=str(path),
        )

    def _repair_markers(self) -> set[int]:
        """Rewrite the damaged markers of generation folders whose checksum list holds theirs; which.

        A folder named like a generation proves itself ours by a checksum list that names its
        generation and format and holds the marker's digest: without its marker a forget would
        leave it on disk (with whatever it holds) and a rollback would skip it.
        """
        repaired: set[int] = set()
        for generation in named_generations(self.directory):
            folder = generation_folder(self.directory, generation)
            marker = marker_of(folder)
            if marker.get("format") == FORMAT and marker.get("generation") == generation:
                continue
            try:
                index = json.loads((folder / CHECKSUMS).read_bytes())
                recorded = index["marker"]
                body = json.dumps(recorded).encode("utf-8")
                proven = (
                    recorded.get("format") == FORMAT
                    and recorded.get("generation") == generation
                    and index["files"][MARKER] == _digest_bytes(body)
                )
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
            if proven:
                write_bytes_atomic(folder / MARKER, body)
                repaired.add(generation)
                logger.warning(
                    "%s: restored the damaged marker of g%06d from its %s", folder, generation, CHECKSUMS
                )
        if repaired:
            fsync_dir(self.directory)
        return repaired

    def _delta_index(self, folder: Path, check: _Checks | None = None) -> DeltaIndex | None:
        """``delta.json`` of a delta generation (``None``: a full one).

        A folder whose checksums list the file is a delta generation even when the file is gone.
        """
        path = folder / DELTA
        listed = check is not None and check.digests is not None and DELTA in check.digests
        if not listed and not path.exists():
            return None
        try:
            return DeltaIndex.parse(self._read_json(path, check))
        except ValueError as exc:
            raise AnchorStoreError(f"invalid delta index: {exc}", path=str(path)) from exc

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
        self._check_manifest_slot()
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
            digests[npy.name] = _write_npy_file(npy, kv.matrix)
        digests["vectors.json"] = write_json_atomic(folder / "vectors.json", index)
        _write_checksums(folder, digests, kb)

    def _write_delta(self, folder: Path, kb: SavableKB, plan: DeltaPlan) -> bool:
        """Write ``plan`` into ``folder``; ``False`` (and nothing left there) when hard links fail."""
        base = generation_folder(self.directory, plan.base)
        digests: dict[str, str] = {}
        try:
            for name, digest in plan.linked.items():
                os.link(base / name, folder / f"{BASE}{name}")
                digests[f"{BASE}{name}"] = digest
        except OSError as exc:
            if exc.errno not in _NO_LINKS:
                raise
            logger.info(
                "%s: no hard links here (%s); writing a full generation", self.directory, exc.strerror
            )
            for name in digests:
                (folder / name).unlink()
            return False
        for part, body in plan.records.items():
            digests[f"{CHANGED}{part}.json"] = write_bytes_atomic(folder / f"{CHANGED}{part}.json", body)
        for kind, rows in plan.rows.items():
            digests[f"{CHANGED}vectors-{kind}.npy"] = _write_npy_file(
                folder / f"{CHANGED}vectors-{kind}.npy", rows
            )
        digests["build.json"] = write_bytes_atomic(folder / "build.json", kb.part_json("build"))
        digests[DELTA] = write_json_atomic(folder / DELTA, plan.index.to_json())
        _write_checksums(folder, digests, kb)
        return True

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
        delta: DeltaIndex | None = None,
    ) -> AnchorVectors:
        """The vectors of ``kinds`` (all by default); of a delta generation, its base's with its rows.

        ``mapped`` kinds are mapped from their file, without digests (only a build compares them;
        ``digests=False`` leaves them out of every kind); a delta generation's rows of such a kind
        are read into ``KindVectors.tail``. Kinds of ``half_from`` rows or more are read as
        float16, their float32 rows left in the file for exact scores (``KindVectors.exact_rows``).
        """
        prefix = BASE if delta is not None else ""
        index_path = folder / f"{prefix}vectors.json"
        index = self._read_json(index_path, check)
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
                    matrix = self._read_matrix(path, check, mode)
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
                tail = self._read_matrix(tail_path, check, "read").astype(np.float32, copy=False)
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

    def _read_matrix(self, path: Path, check: _Checks | None, mode: str) -> np.ndarray:
        """A vector file: ``mapped``, read as float16 (``half``), or ``read`` whole."""
        try:
            if mode == "mapped":
                return self._map_npy(path, check)
            if mode == "half":
                matrix, digest = read_npy_file(path, np.float16)
                if check is not None:
                    check.verify_digest(path, digest)
                return matrix
            return read_npy(self._read_bytes(path, check))
        except (OSError, ValueError, EOFError) as exc:
            raise AnchorStoreError(f"unreadable vector file: {exc}", path=str(path)) from exc

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


def _write_npy_file(path: Path, matrix: Any) -> str:
    """Write a float32 ``.npy`` file (a new one); returns its digest."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        written = write_npy(fd, np.asarray(matrix, dtype=np.float32), path)
        os.fsync(fd)
    finally:
        os.close(fd)
    return _digest_bytes(*written)


def _write_checksums(folder: Path, digests: dict[str, str], kb: SavableKB) -> None:
    """The generation's checksum list, and each part's count and ids in order (what a delta over it checks).

    The ownership marker is listed too, and kept whole under ``"marker"``: a damaged marker is
    reported like any file, and a writer restores it from there (:meth:`AnchorStore.writer`).
    """
    marker = (folder / MARKER).read_bytes()
    digests = {**digests, MARKER: _digest_bytes(marker)}
    index: dict[str, Any] = {"algorithm": _DIGEST, "files": dict(sorted(digests.items()))}
    index["marker"] = json.loads(marker)
    index["counts"] = {part: len(getattr(kb, part)) for part in PARTS}
    if isinstance(kb, KnowledgeBase):  # a part streamed as JSON has no ids to hand (no delta follows it)
        index["orders"] = {part: key_order(getattr(kb, part)) for part in PARTS}
    write_json_atomic(folder / CHECKSUMS, index)


def _row_mismatch(
    folder: Path,
    kind: str,
    rows: int,
    ids: int,
    check: _Checks | None,
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


class _MarkerDamaged(AnchorStoreError):
    """A generation's ownership marker is missing, unreadable, or not the one saved with it."""


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
