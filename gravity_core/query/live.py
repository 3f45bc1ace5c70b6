"""An engine's KB kept current: a cheap check per query, an atomic swap when the KB changed.

A :class:`LiveKB` serves :class:`~gravity_core.query.state.KBSnapshot` objects read from a
:class:`KBSource`: a KB folder (:class:`StoreSource`) or an in-process builder
(:class:`BuilderSource`). :meth:`LiveKB.current` asks the source whether anything may have changed
(one ``stat`` of the manifest, or a few identity checks of the builder's vectors); only then is the
KB read again and a new snapshot prepared, and only a complete one replaces the one served. If the
new KB cannot be read (a damaged generation, vectors of another embedder), the snapshot already
served stays and the read is tried again later, at growing intervals.

A KB folder that is gone, or that holds no KB any more (its manifest and its generations deleted,
as ``UserKBs.delete`` does), is served as an empty KB: what it held is never served again. A
folder replaced by another (deleted and made again, e.g. a user id given to someone new) holds
another KB, never mixed with the one served: its KB is served once it can be read, and nothing
until then. The folder is told from its replacement by its identity (device and inode), which
the source keeps from passing to a new folder by holding the folder open.

What "newest complete" means for a folder: the generation the manifest names. A build's journal
checkpoints between generations are not visible to readers (they carry no vectors, and
:meth:`AnchorStore.load <gravity_core.storage.store.AnchorStore.load>` reads whole generations only), so a
long build shows up at its full saves: the ones it makes when the journal outgrows the generation,
and the one at its end.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from gravity_core.errors import GravityError
from gravity_core.query.index.numpy_index import DEFAULT_IVF
from gravity_core.query.state import KBSnapshot
from gravity_core.schema import KnowledgeBase
from gravity_core.storage.anchor_vectors import ANCHOR_KINDS, EXPANSION_KIND, AnchorVectors
from gravity_core.storage.store import AnchorStore, LoadedKB

if TYPE_CHECKING:
    from gravity_core.build.builder import AnchorBuilder

__all__ = [
    "BuilderSource",
    "FixedKB",
    "KBSource",
    "KBView",
    "LiveKB",
    "Reading",
    "StoreSource",
    "first_reading",
]

logger = logging.getLogger(__name__)

#: First wait before a KB that failed to load is read again; it doubles up to the maximum.
RETRY_AFTER_S = 0.5
MAX_RETRY_AFTER_S = 30.0

Reading = tuple[LoadedKB, object]
"""What a source read, and the mark to :meth:`KBSource.accept` once it is served."""


class KBSource(Protocol):
    """Where a following engine's KB comes from."""

    def changed(self) -> bool:
        """Whether the KB may differ from the one last accepted (cheap: called once per query)."""
        ...

    def probe(self) -> Hashable:
        """A cheap fingerprint of the source now: when it moves, a failed read is worth trying again."""
        ...

    def read(self) -> Reading | None:
        """The KB now, or ``None`` when it is the one last accepted after all."""
        ...

    def accept(self, mark: object) -> None:
        """The KB read with ``mark`` is served now."""
        ...

    def fallback(self) -> Reading | None:
        """What to serve after a failed read: ``None`` (the snapshot served) or an empty KB.

        ``None`` keeps the snapshot served (it is still the source's KB, only its new version cannot
        be read yet); a reading (an empty KB) when the KB served is no longer the source's, so it must
        not be served any more.
        """
        ...


class _Unseen:
    """Marks a source that has accepted nothing yet (never equal to a stamp or a version)."""


_UNSEEN = _Unseen()


class _Folder:
    """A KB folder held open, so its identity (device and inode) cannot pass to a folder made later.

    Where a folder cannot be opened (Windows), its identity is read with ``stat`` and not held.
    """

    __slots__ = ("__weakref__", "ident")

    def __init__(self, ident: tuple[int, int], fd: int | None) -> None:
        self.ident = ident
        if fd is not None:
            weakref.finalize(self, os.close, fd)

    @classmethod
    def open(cls, path: Path) -> _Folder | None:
        """The folder at ``path`` now; ``None`` when there is none.

        Raises:
            OSError: the folder cannot be looked at (e.g. permissions).
        """
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:
            try:
                st = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                return None
            return cls((st.st_dev, st.st_ino), None) if stat.S_ISDIR(st.st_mode) else None
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise
        return cls((st.st_dev, st.st_ino), fd)


def _folder_stat(path: Path) -> tuple[int, int] | None:
    """The folder's inode and modification time (an entry added or removed moves it), or ``None``."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


class _Mark(NamedTuple):
    """What a :class:`StoreSource` read.

    The manifest's stamp and version, the folder, the generation, and the embedder and dimension of
    its vectors.
    """

    stamp: object
    version: object
    folder: _Folder | None
    generation: int | None
    shape: tuple[str, int]


class StoreSource:
    """A KB folder: changed when its manifest was written again, read as its current generation.

    The per-query check is :meth:`AnchorStore.stamp` (one ``stat``). When the stamp moved, the
    manifest is read: the same generation and digest (a manifest written again with the same
    content, or a stamp that moved for another reason) reads nothing more.

    When the stamp moved, the folder is also looked at. A folder that is gone, or that holds
    neither a manifest nor the generation served (deleted: ``UserKBs.delete``, ``rm -r``), reads
    as an empty KB. A folder replaced by another (another device and inode than the one held open
    since the last read) holds another KB: it is read even if its manifest looks the same, and
    if it cannot be read :meth:`fallback` serves an empty KB rather than the one before; so it
    does when the manifest names a generation older than the one served (a KB deleted and made
    again in the same folder starts its numbers over). A manifest lost while the generation
    served is still on disk is damage, not a deletion: the KB served stays (see
    :meth:`AnchorStore.rollback`).

    Args:
        store: the KB folder's store.
        half_from: kinds of this many rows or more are read in float16 (see
            :meth:`AnchorStore.load_packed`); ``None`` reads every kind in float32 (for an index that
            copies the vectors elsewhere, such as Chroma).
        digests: keep the rows' text digests (an index synced by digest, such as Chroma's, needs
            them; the numpy index does not).
    """

    def __init__(
        self, store: AnchorStore, *, half_from: int | None = DEFAULT_IVF.min_rows, digests: bool = True
    ) -> None:
        self.store = store
        self._half_from = half_from
        self._digests = digests
        self._stamp: object = _UNSEEN
        self._version: object = _UNSEEN
        self._folder: _Folder | None = None  # the folder the KB served came from
        self._generation: int | None = None  # the generation served (None: an empty KB)
        self._seen: _Folder | None = None  # the folder the last read found
        self._shape = ("", 0)  # embedder and dimension of the KB served: an empty KB's

    def __repr__(self) -> str:
        return f"StoreSource({str(self.store.directory)!r})"

    def changed(self) -> bool:
        """Whether the manifest's stamp moved since the KB last accepted (one ``stat``)."""
        return self.store.stamp() != self._stamp

    def probe(self) -> Hashable:
        """The manifest's stamp and the folder's inode and modification time."""
        return self.store.stamp(), _folder_stat(self.store.directory)

    def read(self) -> Reading | None:
        """The folder's current generation (an empty KB when it holds none), or ``None`` if unchanged."""
        stamp = self.store.stamp()
        self._seen = None
        folder = _Folder.open(self.store.directory)
        self._seen = folder
        first = self._version is _UNSEEN  # a new source: a folder without a KB is an error
        if not first and (folder is None or self._kb_gone()):
            return self._nothing(stamp, folder)
        replaced = not first and self._replaced(folder)
        version = self.store.current_version()
        if not replaced and version is not None and version == self._version:
            self._stamp = stamp
            return None
        # The turn vectors are the builder's; the expansions are read by row, so they stay on disk.
        loaded = self.store.load_packed(
            vector_kinds=ANCHOR_KINDS,
            mapped_kinds=(EXPANSION_KIND,),
            half_from=self._half_from,
            digests=self._digests,
        )
        shape = (loaded.vectors.embedder, loaded.vectors.dim)
        if version is not None and loaded.generation == version[0]:
            return loaded, _Mark(stamp, version, folder, loaded.generation, shape)
        # A save landed between the manifest read and the load: look again at the next query.
        return loaded, _Mark(_UNSEEN, (loaded.generation, ""), folder, loaded.generation, shape)

    def accept(self, mark: object) -> None:
        """Note the stamp, version, folder, generation and vectors' shape of the KB served now."""
        assert isinstance(mark, _Mark)
        self._stamp, self._version, self._folder, self._generation, self._shape = mark

    def fallback(self) -> Reading | None:
        """An empty KB when the folder was replaced or its generations went back, else ``None``."""
        seen = self._seen
        if seen is None or self._version is None:
            return None  # the folder could not be looked at, or nothing is served already
        if self._replaced(seen):
            why = "the folder was replaced by another"
        elif self._went_back():
            why = "the folder's generations went back (its KB deleted and made again, or rolled back)"
        else:
            return None  # the KB served is still the folder's; only its new version cannot be read
        logger.info("%s: %s; serving no KB until its KB can be read", self, why)
        return self._empty(), _Mark(_UNSEEN, None, seen, None, self._shape)

    def _went_back(self) -> bool:
        """Whether the manifest names a generation older than the one served."""
        try:
            current = self.store.current_generation()
        except (GravityError, OSError):
            return False
        return current is not None and self._generation is not None and current < self._generation

    def _replaced(self, folder: _Folder | None) -> bool:
        """Whether ``folder`` is another folder than the one the KB served came from."""
        return folder is not None and (self._folder is None or folder.ident != self._folder.ident)

    def _kb_gone(self) -> bool:
        """Whether the folder holds no KB any more: no manifest, and not the generation served."""
        if self.store.exists():
            return False
        return self._generation is None or self._generation not in self.store.generations()

    def _nothing(self, stamp: object, folder: _Folder | None) -> Reading | None:
        """An empty KB for a folder that is gone or holds none (``None`` if one is served already)."""
        mark = _Mark(stamp, None, folder, None, self._shape)
        if self._version is None:  # an empty KB is served already
            self.accept(mark)
            return None
        logger.info(
            "%s: %s; serving no KB", self, "the folder is gone" if folder is None else "it holds no KB"
        )
        return self._empty(), mark

    def _empty(self) -> LoadedKB:
        embedder, dim = self._shape
        return LoadedKB(
            kb=KnowledgeBase(), vectors=AnchorVectors(embedder=embedder, dim=dim), generation=None
        )


class BuilderSource:
    """An in-process :class:`~gravity_core.build.builder.AnchorBuilder`: changed by each ``add`` that adds.

    Every ``add`` that extracts something ends by embedding the changed anchors, which replaces
    each kind's :class:`~gravity_core.storage.anchor_vectors.KindVectors`; the check compares those
    objects (and the builder's KB and vectors objects) by identity. A read copies the KB, so the
    snapshot served is not changed by the builder's next ``add``.

    Queries must not overlap an ``add`` running in another thread while the engine reads the
    builder again: the builder changes its KB in place and offers no lock to read it under. A
    builder in another thread or process should write to a store, and the engine follow the folder
    (:meth:`GravityEngine.from_dir <gravity_core.query.engine.GravityEngine.from_dir>`).

    Args:
        builder: the builder.
    """

    def __init__(self, builder: AnchorBuilder) -> None:
        self.builder = builder
        self._seen: tuple[object, ...] = ()

    def __repr__(self) -> str:
        return f"BuilderSource({self.builder!r})"

    def _mark(self) -> tuple[object, ...]:
        vectors = self.builder.vectors
        return (self.builder.kb, vectors, *(vectors.kinds.get(kind) for kind in ANCHOR_KINDS))

    def changed(self) -> bool:
        """Whether the builder's KB or vectors objects are others than those last accepted (by identity)."""
        mark = self._mark()
        return len(mark) != len(self._seen) or any(a is not b for a, b in zip(mark, self._seen, strict=True))

    def probe(self) -> Hashable:
        """The identities of the builder's KB and vectors objects."""
        return tuple(id(part) for part in self._mark())

    def read(self) -> Reading | None:
        """A copy of the builder's KB with its vectors, or ``None`` when they are those last accepted."""
        mark = self._mark()
        if len(mark) == len(self._seen) and all(a is b for a, b in zip(mark, self._seen, strict=True)):
            return None
        vectors = self.builder.vectors
        kinds = {kind: rows for kind in ANCHOR_KINDS if (rows := vectors.kinds.get(kind)) is not None}
        # Each KindVectors is replaced, never changed, by the builder's next refresh: shared as is.
        copied = AnchorVectors(embedder=vectors.embedder, dim=vectors.dim, kinds=kinds)
        return LoadedKB(kb=self.builder.kb.model_copy(deep=True), vectors=copied, generation=None), mark

    def accept(self, mark: object) -> None:
        """Note the builder's objects the KB served now was read from."""
        assert isinstance(mark, tuple)
        self._seen = mark

    def fallback(self) -> Reading | None:
        """``None``: the snapshot served stays, the builder's KB being always the builder's."""
        return None


class KBView(Protocol):
    """What an engine reads its KB through."""

    @property
    def snapshot(self) -> KBSnapshot:
        """The snapshot served now (no check)."""
        ...

    @property
    def follows(self) -> bool:
        """Whether the snapshot follows a source."""
        ...

    def current(self) -> KBSnapshot:
        """The snapshot a query should use: the newest complete one."""
        ...

    def refresh(self) -> bool:
        """Check the source now; whether a new snapshot is served."""
        ...


class FixedKB:
    """A snapshot that never changes (an engine made from a KB object, or with ``follow=False``)."""

    def __init__(self, snapshot: KBSnapshot) -> None:
        self._snapshot = snapshot

    @property
    def snapshot(self) -> KBSnapshot:
        """The one snapshot this view serves."""
        return self._snapshot

    @property
    def follows(self) -> bool:
        """``False``: the snapshot follows no source."""
        return False

    def current(self) -> KBSnapshot:
        """The one snapshot, with nothing to check."""
        return self._snapshot

    def refresh(self) -> bool:
        """``False``: there is no source to check, so never a new snapshot."""
        return False


class LiveKB:
    """The newest complete snapshot of a :class:`KBSource`; thread-safe.

    Args:
        source: where the KB comes from.
        prepare: makes the snapshot of a KB read from ``source`` (``revision`` numbers it); it may
            raise a :class:`~gravity_core.errors.GravityError` (e.g. vectors of another embedder),
            and then the current snapshot stays.
        first: the snapshot to serve until the source changes.
        first_mark: the mark of the KB ``first`` was made from (see :meth:`KBSource.accept`).
        clock: monotonic seconds (for the retry intervals).
    """

    def __init__(
        self,
        source: KBSource,
        prepare: Callable[[LoadedKB, int], KBSnapshot],
        first: KBSnapshot,
        first_mark: object,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._prepare = prepare
        self._snapshot = first
        self._clock = clock
        self._lock = threading.Lock()
        self._retry_at = 0.0
        self._wait = RETRY_AFTER_S
        self._failed: Hashable = None  # the source's probe when a read last failed
        source.accept(first_mark)

    @property
    def snapshot(self) -> KBSnapshot:
        """The snapshot served now, without checking the source."""
        return self._snapshot

    @property
    def follows(self) -> bool:
        """``True``: the snapshot follows its source."""
        return True

    @property
    def source(self) -> KBSource:
        """Where the KB comes from."""
        return self._source

    def current(self) -> KBSnapshot:
        """The served snapshot, read again first if the source changed.

        Unchanged, this costs one :meth:`KBSource.changed` call and no lock. When several threads
        find a change, one reads and the others wait for its snapshot. After a failed read the
        source is read again once it moves on (a new build), else after the retry interval.
        """
        if not self._source.changed() or self._waiting():
            return self._snapshot
        with self._lock:
            if self._source.changed() and not self._waiting():
                self._reload()
            return self._snapshot

    def _waiting(self) -> bool:
        """Whether a failed read waits for its retry: its interval runs and the source has not moved."""
        return self._clock() < self._retry_at and self._source.probe() == self._failed

    def refresh(self) -> bool:
        """Check the source now, even while a failed read waits for its retry; whether it changed."""
        with self._lock:
            return self._source.changed() and self._reload()

    def _reload(self) -> bool:
        before = self._snapshot
        probe = self._source.probe()
        try:
            reading = self._source.read()
            if reading is None:
                return False
            loaded, mark = reading
            fresh = self._prepare(loaded, before.revision + 1)
        except (GravityError, OSError) as exc:
            self._retry_at, self._failed = self._clock() + self._wait, probe
            served = self._serve_fallback(before)
            logger.warning(
                "%s changed but cannot be read yet (%s); %s %s, trying again in %.1f s",
                self._source,
                exc,
                "now serving" if served else "still serving",
                _describe(self._snapshot),
                self._wait,
            )
            self._wait = min(self._wait * 2, MAX_RETRY_AFTER_S)
            return served
        self._source.accept(mark)
        self._snapshot = fresh  # one assignment: a query sees the old snapshot or the new one
        self._retry_at, self._wait, self._failed = 0.0, RETRY_AFTER_S, None
        logger.info("%s: now serving %s (was %s)", self._source, _describe(fresh), _describe(before))
        return True

    def _serve_fallback(self, before: KBSnapshot) -> bool:
        """After a failed read, serve what the source gives instead, if anything; whether it did."""
        fallback = self._source.fallback()
        if fallback is None:
            return False
        loaded, mark = fallback
        try:
            fresh = self._prepare(loaded, before.revision + 1)
        except (GravityError, OSError) as exc:  # an empty KB's index failed (a Chroma server down)
            logger.error("%s: cannot serve an empty KB instead (%s)", self._source, exc)
            return False
        self._source.accept(mark)
        self._snapshot = fresh
        return True


def _describe(snapshot: KBSnapshot) -> str:
    kb = snapshot.kb
    if snapshot.generation is not None:
        where = f"generation {snapshot.generation}"
    else:
        where = "the builder's KB" if kb.utterances else "an empty KB"
    return (
        f"{where} ({len(kb.utterances)} utterances, {len(kb.entities)} entities, "
        f"{len(kb.events)} events, {len(kb.topics)} topics)"
    )


def first_reading(source: KBSource) -> Reading:
    """A new source's KB (for an engine's first snapshot); raises what the source raises."""
    reading = source.read()
    if reading is None:  # pragma: no cover - a fresh source has accepted nothing
        raise AssertionError(f"{source!r} read nothing on its first read")
    return reading
