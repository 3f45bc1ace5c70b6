"""The KB on disk: :class:`AnchorStore` reads and writes one KB folder (:mod:`.layout`).

Each job has its module; the store holds the folder's name and its writer lock and calls them:

- :mod:`.saving`: a save writes a new generation beside the current one and replaces
  ``manifest.json`` atomically (:mod:`.manifest`), so a reader sees the old KB or the new one,
  never a mix, and a crash mid-save leaves the previous generation in force; given what changed,
  it may write a delta generation that links its base's files (:mod:`.delta_save`).
- :mod:`.loading`, :mod:`.packed_loading`: whole generations, checked against their checksum list
  (:mod:`.checksums`), read again when a writer replaced them; the vectors (:mod:`.vector_files`).
- :mod:`.journal`: a build's checkpoints between generations, replayed by :meth:`AnchorStore.resume`.
- :mod:`.rollback`: a damaged current generation, or a lost manifest, goes back to the newest
  generation that loads; :mod:`.store_lock`, :mod:`.recovery`: one writer at a time, which
  finishes what a killed writer left.

The store deletes only generation folders it can prove it wrote (:mod:`.generation_dirs`), and
only after a manifest naming them is written. A damaged file raises
:class:`~gravity_core.errors.AnchorStoreError` naming it and the earlier generation that still
loads; an OS error raises :class:`~gravity_core.errors.StorageAccessError` naming the path and what
to do, with what was on disk before intact (:mod:`.os_errors`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Collection
from pathlib import Path

from gravity_core.errors import AnchorStoreError, ConfigurationError
from gravity_core.schema import KnowledgeBase
from gravity_core.schema.changes import PARTS, KBChanges
from gravity_core.storage.anchor_vectors import AnchorVectors
from gravity_core.storage.checksums import CHECKSUMS
from gravity_core.storage.file_cache import refuse_linked_cache
from gravity_core.storage.files import write_json_atomic
from gravity_core.storage.generation_delta import BASE, CHANGED, DELTA, MAX_SHARE, file_sizes
from gravity_core.storage.generation_dirs import WRITER_LOCK, generation_folder, history_start
from gravity_core.storage.journal import JOURNAL, append_record
from gravity_core.storage.layout import (
    CACHE,
    FORMAT,
    MANIFEST,
    PAGE,
    PART_FILES,
    LoadedKB,
    SavableKB,
    kb_generations,
)
from gravity_core.storage.loading import (
    base_of,
    load_current,
    load_generation,
    load_with_journal,
    resume_from_journal,
)
from gravity_core.storage.manifest import check_output, peek_generation, peek_manifest, read_manifest
from gravity_core.storage.os_errors import folder_os_errors, os_errors
from gravity_core.storage.packed_kb import PackedKB
from gravity_core.storage.packed_loading import load_packed_generation
from gravity_core.storage.rollback import adoptable, roll_back
from gravity_core.storage.saving import save_generation
from gravity_core.storage.store_lock import StoreLock

__all__ = [
    "CHECKSUMS",
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


class AnchorStore:
    """Reads and writes one KB folder."""

    def __init__(self, directory: str | os.PathLike[str], *, delta_share: float = MAX_SHARE) -> None:
        """A store of the KB folder ``directory``.

        Args:
            directory: the KB folder.
            delta_share: a save given what changed writes a delta generation while the delta
                holds at most this share of its base's bytes (see :meth:`save`); ``0`` writes
                only full generations, which share no file with each other.
        """
        if not 0 <= delta_share <= 1:
            raise ConfigurationError(f"delta_share must be between 0 and 1, got {delta_share!r}")
        self.directory = Path(directory)
        self.delta_share = delta_share
        self._manifest_path = os.path.join(self.directory, MANIFEST)  # a str: stat() per query, no Path work
        self._lock = StoreLock(self.directory)

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

    @folder_os_errors("read")
    def exists(self) -> bool:
        """Whether the folder holds a KB."""
        return (self.directory / MANIFEST).is_file()

    @folder_os_errors("read")
    def current_generation(self) -> int | None:
        """The generation the manifest names now (``None`` when there is no readable KB)."""
        return peek_generation(self.directory)

    @folder_os_errors("read")
    def last_save_was_forget(self) -> bool:
        """Whether the current generation is a forget's (the first of a new history)."""
        current = peek_generation(self.directory)
        return current is not None and history_start(self.directory, FORMAT) == current

    def writer(self) -> contextlib.AbstractContextManager[None]:
        """Hold the folder's writer lock: one build at a time (:mod:`.store_lock`).

        Every write of the store takes it (:meth:`save`, :meth:`rollback`, the adoption in
        :meth:`prepare_build`); the thread that holds it through this store may take it again.

        Raises:
            AnchorStoreError: another build (another process, store or thread) holds it.
            StorageAccessError: the folder cannot be made or written (checked before anything
                else is done, so a build into a read-only folder stops at once).
        """
        return self._lock.hold()

    @folder_os_errors("write")
    def check_output(self) -> None:
        """Refuse a folder that is not new, empty or a KB, or whose manifest is lost.

        Raises:
            AnchorStoreError: the folder is a file; holds other things and no KB; or holds
                generation folders but no manifest (the message points to :meth:`rollback`).
        """
        check_output(self.directory)

    @folder_os_errors("write")
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
        if adoptable(self.directory):
            with self.writer():
                if self.exists() or not adoptable(self.directory):  # another writer was quicker
                    return self.prepare_build()
                with contextlib.suppress(AnchorStoreError):
                    adopted = roll_back(self.directory, self._lock.markers_restored)
                    logger.warning(
                        "%s had no manifest; its first save g%06d is current", self.directory, adopted
                    )
                    return None
        check_output(self.directory)
        return None

    @folder_os_errors("write")
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
        check_output(self.directory)
        with self.writer():
            check_output(self.directory)
            previous = read_manifest(self.directory)["generation"] if self.exists() else None
            return save_generation(
                self.directory,
                kb,
                vectors,
                previous=previous,
                keep_history=keep_history,
                changed=changed,
                delta_share=self.delta_share,
            )

    def base_of(self, generation: int) -> int | None:
        """The full generation a delta generation links its unchanged files from.

        ``None`` for a full generation, or one whose ``delta.json`` cannot be read.
        """
        return base_of(self.directory, generation)

    @folder_os_errors("read")
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
        return load_current(
            self.directory, lambda current, digest: self._load_generation(current, digest, vector_kinds)
        )

    def _load_generation(
        self,
        generation: int,
        checksums_digest: str | None = None,
        vector_kinds: Collection[str] | None = None,
    ) -> LoadedKB[KnowledgeBase]:
        """One generation read whole (:func:`.loading.load_generation`): what :meth:`load` reads."""
        return load_generation(self.directory, generation, checksums_digest, vector_kinds)

    @folder_os_errors("read")
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

        def read(current: int, digest: str | None) -> LoadedKB[PackedKB]:
            return load_packed_generation(
                self.directory, current, digest, vector_kinds, mapped_kinds, half_from, digests
            )

        return load_current(self.directory, read)

    @folder_os_errors("read")
    def resume(self) -> LoadedKB[KnowledgeBase] | None:
        """What a build continues from: the current generation with the journal's checkpoints replayed.

        ``None`` when the folder holds neither a KB nor a journal. The vectors are the
        generation's: the build embeds again what the journal changed.

        Raises:
            AnchorStoreError: see :meth:`load`.
        """
        if self.exists():
            return load_current(
                self.directory,
                lambda current, digest: load_with_journal(self.directory, current, digest, None),
            )
        return resume_from_journal(self.directory)

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

    @folder_os_errors("read")
    def current_version(self) -> tuple[int, str] | None:
        """The generation the manifest names and the manifest's own digest (``None``: no readable KB).

        Two reads giving the same version saw the same KB; a new save, a rollback or a KB made again
        from scratch in the same folder (whose generation numbers start over) gives another.
        """
        manifest = peek_manifest(self.directory)
        if manifest is None:
            return None
        return int(manifest["generation"]), str(manifest.get("digest") or manifest.get("saved_at") or "")

    @folder_os_errors("read")
    def state(self) -> tuple[int | None, int]:
        """The current generation and the journal's size: what changes when another build writes."""
        try:
            size = (self.directory / JOURNAL).stat().st_size
        except FileNotFoundError:
            size = 0
        return self.current_generation(), size

    @folder_os_errors("write")
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

    @folder_os_errors("read")
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
            names = [f"{part}.json" for part in PART_FILES]
        return journal_end >= file_sizes(folder, names)

    @folder_os_errors("read")
    def generations(self) -> list[int]:
        """Numbers of the generation folders on disk, oldest first (the current one included)."""
        return kb_generations(self.directory)

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
            return roll_back(self.directory, self._lock.markers_restored)
