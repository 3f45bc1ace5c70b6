"""One KB per user: a root folder holding each user's KB in its own folder, engines kept in an LRU.

Every read and write names the user, and a user's id decides the one folder (and, with Chroma, the
collections) that serves it: nothing of one user is ever read for another. An id is checked before
it becomes a path: no separators, no ``.``/``..``, no control characters (a trailing newline
included), at most 128 characters. Ids that differ only by case (``Alice``, ``alice``) would share
one folder on macOS and Windows, so a root never holds both: the second is refused.

A deleted user's KB is never served again, by this process or another: the engines that follow
its folder find it gone and serve nothing, and an id given to someone new starts empty (see
:class:`~gravity_core.query.live.StoreSource`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import date, datetime
from pathlib import Path
from typing import Any

from gravity_core.build.builder import DEFAULT_BATCH_SIZE, AnchorBuilder, BuildReport
from gravity_core.build.forget import ForgetReport, ForgetRequest
from gravity_core.embeddings.base import Embedder
from gravity_core.errors import AnchorStoreError, ConfigurationError
from gravity_core.extract.base import Extractor
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import AnchorIndex, ChromaAnchorIndex, NumpyAnchorIndex
from gravity_core.query.types import AnchorContext
from gravity_core.schema import KnowledgeBase, Utterance
from gravity_core.storage.anchor_vectors import AnchorVectors
from gravity_core.storage.generation_dirs import WRITER_LOCK, writer_lock
from gravity_core.storage.os_errors import os_errors
from gravity_core.storage.store import MANIFEST, AnchorStore
from gravity_core.text.tokens import TokenCounter

__all__ = ["UserKBs", "case_twin_problem", "check_user_id"]

logger = logging.getLogger(__name__)

_USER_ID = re.compile(r"[A-Za-z0-9_@+=-][A-Za-z0-9_@+=.-]{0,127}")  # matched in full (fullmatch)
# A folder being deleted: renamed to this first (a name no user id can take), then removed.
_DELETING = ".deleting-{user}.{token}"
_DELETING_TOKEN = re.compile(r"[0-9a-f]{8}")

ExtractorFactory = Callable[[Embedder, AnchorStore], Extractor]
IndexFactory = Callable[[str], AnchorIndex]


def check_user_id(user_id: object) -> str:
    r"""``user_id`` if it can name a user's folder; a :class:`ConfigurationError` saying why not.

    Allowed: letters, digits and ``_ @ + = - .``, 1 to 128 characters, not starting with a dot
    (so never ``.`` or ``..``, never a hidden file, never a path). The whole id must match: a
    trailing newline (``"u1\n"``) is refused like any other control character.

    This looks at the id only. Whether another user's id differs from it only by case is a
    question about a root folder: :class:`UserKBs` refuses such an id when it would build, forget,
    delete or load it (:func:`case_twin_problem` for a list of ids).
    """
    if not isinstance(user_id, str):
        raise ConfigurationError(f"a user id must be a string, got {type(user_id).__name__}")
    if not _USER_ID.fullmatch(user_id):
        shown = user_id if len(user_id) <= 60 else user_id[:60] + "..."
        raise ConfigurationError(
            f"user id {shown!r} cannot name a folder: use 1-128 letters, digits or _ @ + = - . "
            "(not starting with '.'); hash or encode other ids (e.g. an e-mail's sha256) first"
        )
    return user_id


def case_twin_problem(user_id: str, other: str, where: str) -> str:
    """Why ``user_id`` is refused when ``other`` (``where``) differs from it only by case."""
    return (
        f"user id {user_id!r} differs only by case from user {other!r} {where}: on macOS and Windows "
        "both would be one folder, so one user's KB would serve the other; use ids that differ "
        "otherwise (e.g. lower-case every id)"
    )


class UserKBs:
    """The KBs of many users under one root folder: ``<root>/<user id>/`` is a normal KB folder.

    Builds, forgets and queries take the user id; the engines of the ``max_engines`` users queried
    most recently stay loaded (each follows its folder, so another process's build shows up), the
    others are dropped and loaded again when next asked for. Safe to share between threads; builds
    of one user from several threads or processes take turns on the folder's writer lock.

    A user deleted by any process (:meth:`delete`) gets no anchors at this object's next query: the
    engine following the folder finds it gone. A new user whose id differs from an existing
    user's only by case is refused (:meth:`builder`).

    Args:
        root: the folder holding the users' KB folders (created by the first build).
        embedder: the anchor embedder of every user's KB (default: the offline MiniLM).
        extractor: makes the extractor of a build from the embedder and the user's store
            (default: the offline extractor; for an LLM, an ``LLMExtractor`` whose cache is
            ``ResponseCache(store.cache_dir)``, so a user's cached answers stay in their folder).
        index: makes a user's anchor index from the user id, e.g.
            ``lambda user: ChromaAnchorIndex.server(host, port, kb_name=f"user-{user}")`` for
            collections per user on a Chroma server (default: in-process numpy).
        config: default query settings of every engine.
        max_engines: loaded engines kept at most.
        batch_size: utterances per extractor call.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        embedder: Embedder | None = None,
        extractor: ExtractorFactory | None = None,
        index: IndexFactory | None = None,
        config: QueryConfig | None = None,
        max_engines: int = 64,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if max_engines < 1:
            raise ConfigurationError(f"max_engines must be at least 1, got {max_engines}")
        if embedder is None:
            from gravity_core.embeddings import default_embedder

            embedder = default_embedder()
        self.root = Path(root)
        self.embedder = embedder
        self.config = config
        self.max_engines = max_engines
        self.batch_size = batch_size
        self._extractor = extractor or self._offline_extractor
        self._index = index
        self._nlp: Any | None = None
        self._nlp_lock = threading.Lock()
        self.counter = TokenCounter()  # one cl100k encoding for every user's engine
        self._engines: OrderedDict[str, GravityEngine] = OrderedDict()
        self._empty: GravityEngine | None = None
        self._lock = threading.Lock()

    def folder(self, user_id: str) -> Path:
        """The user's KB folder (whether or not it exists yet).

        Checks the id (:func:`check_user_id`) and nothing on disk: on macOS and Windows the path
        of ``Alice`` is also ``alice``'s folder. The methods that build, forget, delete or load
        refuse an id that differs from another user's only by case.
        """
        return self.root / check_user_id(user_id)

    def users(self) -> list[str]:
        """The ids of the users who have a KB, sorted."""
        with os_errors(self.root, action="read"):
            if not self.root.is_dir():
                return []
            return sorted(
                p.name for p in self.root.iterdir() if _USER_ID.fullmatch(p.name) and (p / MANIFEST).is_file()
            )

    def builder(self, user_id: str) -> AnchorBuilder:
        """A builder of the user's KB (reads what the folder holds).

        A new user's folder is made now, unless another user's id differs from ``user_id`` only
        by case (made first, then looked for: of two processes making ``Alice`` and ``alice`` at
        once, at most one goes on). A build that fails before its first save leaves the folder
        empty: :meth:`add` removes it.

        Raises:
            ConfigurationError: the id cannot name a folder, or differs only by case from the id
                of a user who has a folder under the root.
        """
        store = AnchorStore(self._own_folder(user_id, create=True))
        return AnchorBuilder(
            self._extractor(self.embedder, store), self.embedder, batch_size=self.batch_size, store=store
        )

    def add(self, user_id: str, utterances: Iterable[Utterance]) -> BuildReport:
        """Build the user's new utterances into their KB.

        Raises:
            AnchorStoreError: another build of the same user holds the folder's writer lock.
            ConfigurationError: see :meth:`builder`.
        """
        builder = self.builder(user_id)
        try:
            report = builder.add(utterances)
        except BaseException:
            self.drop_if_empty(user_id)
            raise
        logger.info("user %s: +%d utterances", user_id, report.added)
        return report

    def drop_if_empty(self, user_id: str) -> None:
        """Remove the user's folder if it is empty (a first build that failed before its first save)."""
        with contextlib.suppress(OSError):
            self.folder(user_id).rmdir()

    def forget(
        self,
        user_id: str,
        *,
        utterances: Iterable[str] = (),
        sessions: Iterable[str] = (),
        speakers: Iterable[str] = (),
        before: date | datetime | None = None,
    ) -> ForgetReport:
        """Forget what the request names from the user's KB (see :meth:`AnchorBuilder.forget`).

        Raises:
            ConfigurationError: the user has no KB, or the request names what it does not hold.
        """
        request = ForgetRequest(tuple(utterances), tuple(sessions), tuple(speakers), before)
        self._require(user_id)
        builder = self.builder(user_id)
        report = builder.forget(request)
        if self._index is not None:  # the user's Chroma rows go now, not at the engine's next query
            index = self._index(user_id)
            if isinstance(index, ChromaAnchorIndex):
                index.sync(builder.vectors)
        return report

    def delete(self, user_id: str) -> bool:
        """Delete the user's whole KB folder (a user who asks to be forgotten entirely).

        The user's Chroma collections go too when the index is a ``ChromaAnchorIndex``.

        Takes the folder's writer lock first, so no build of the user is cut off half-way. The
        folder is then renamed away at once (to a hidden name no user id can take) and removed:
        every engine following it, in any process, finds it gone at its next query and serves
        nothing of it; a build of the same id afterwards starts a new, empty KB. Where a folder
        cannot be renamed (Windows, while a file in it is open), its manifest goes first and then
        the rest. What a delete killed half-way left is removed by the next delete of the user.
        Returns whether there was a folder.

        Raises:
            AnchorStoreError: a build of the user holds the folder's writer lock.
            ConfigurationError: the id differs only by case from another user's (on macOS and
                Windows its path is the other user's folder).
        """
        folder = self._own_folder(user_id)
        with self._lock:
            self._engines.pop(user_id, None)
        if self._index is not None:  # the user's Chroma rows go with the folder
            index = self._index(user_id)
            if isinstance(index, ChromaAnchorIndex):
                index.drop()
        self._remove_leftovers(user_id)
        if not folder.exists():
            return False
        doomed = self.root / _DELETING.format(user=user_id, token=secrets.token_hex(4))
        with os_errors(folder):
            with writer_lock(folder):
                try:
                    os.rename(folder, doomed)  # one step: readers see the KB or no folder
                    renamed = True
                except OSError:
                    renamed = False
                    _empty_in_place(folder)
            if not renamed:
                # Only the lock file is left, unless a build of the user started meanwhile: keep that.
                with contextlib.suppress(OSError):
                    (folder / WRITER_LOCK).unlink()
                    folder.rmdir()
        if renamed:
            with os_errors(doomed):
                _remove_tree(doomed)
        logger.info("user %s: KB folder deleted", user_id)
        return True

    def _remove_leftovers(self, user_id: str) -> None:
        """Remove what deletes of the user that were killed half-way left (renamed, not yet removed)."""
        prefix = _DELETING.format(user=user_id, token="")
        with os_errors(self.root, action="read"):
            if not self.root.is_dir():
                return
            leftovers = [
                p
                for p in self.root.iterdir()
                if p.name.startswith(prefix) and _DELETING_TOKEN.fullmatch(p.name[len(prefix) :])
            ]
        for path in leftovers:
            with os_errors(path):
                _remove_tree(path)

    def engine(self, user_id: str) -> GravityEngine:
        """The query engine over the user's KB (an empty one while the user has none).

        Raises:
            AnchorStoreError: the user's folder holds a KB that does not load.
        """
        folder = self.folder(user_id)
        with self._lock:
            engine = self._engines.get(user_id)
            if engine is not None:
                self._engines.move_to_end(user_id)
                return engine
        if not (folder / MANIFEST).is_file():
            return self._empty_engine()
        self._own_folder(user_id)
        index = self._index(user_id) if self._index is not None else None
        try:
            loaded = GravityEngine.from_dir(
                folder, embedder=self.embedder, config=self.config, index=index, counter=self.counter
            )
        except AnchorStoreError:
            if not (folder / MANIFEST).is_file():  # deleted while it was being loaded
                return self._empty_engine()
            raise
        with self._lock:
            engine = self._engines.setdefault(user_id, loaded)
            self._engines.move_to_end(user_id)
            while len(self._engines) > self.max_engines:
                dropped, _ = self._engines.popitem(last=False)
                logger.debug("engine of user %s dropped from the LRU", dropped)
        return engine

    def query(
        self,
        user_id: str,
        question: str,
        *,
        config: QueryConfig | None = None,
        question_date: date | None = None,
    ) -> AnchorContext:
        """The anchors of ``question`` from the user's KB (:meth:`GravityEngine.query`)."""
        engine = self.engine(user_id)
        context = engine.query(question, config=config, question_date=question_date)
        if engine.generation is None and engine is not self._empty:
            # The folder was deleted (by another process): its engine serves nothing, so drop it.
            with self._lock:
                if self._engines.get(user_id) is engine:
                    del self._engines[user_id]
        return context

    def loaded(self) -> list[str]:
        """Users whose engines are loaded now, least recently used first."""
        with self._lock:
            return list(self._engines)

    def _require(self, user_id: str) -> None:
        if not (self.folder(user_id) / MANIFEST).is_file():
            raise ConfigurationError(f"user {user_id!r} has no KB under {self.root}")

    def _own_folder(self, user_id: str, *, create: bool = False) -> Path:
        """The user's folder, unless it is (or would be) shared with a user whose id differs by case.

        ``create`` makes a new user's folder.

        A folder made here is looked for twins after it is made, and removed again if it has one:
        of two processes making case twins at once, the later ``mkdir`` always sees the earlier
        folder, so at most one of them goes on. An existing folder costs one more ``stat`` (of the
        id with its case swapped: only a case-insensitive disk finds the same folder there, and
        only then is the root listed to learn the folder's real name).

        Raises:
            ConfigurationError: the id cannot name a folder, or has a case twin under the root.
        """
        folder = self.folder(user_id)
        with os_errors(self.root, action="write" if create else "read"):
            if create:
                self.root.mkdir(parents=True, exist_ok=True)
                try:
                    folder.mkdir()
                except FileExistsError:
                    pass
                else:
                    twin = self._case_twin(user_id)
                    if twin is not None:
                        self.drop_if_empty(user_id)
                        raise ConfigurationError(
                            case_twin_problem(user_id, twin, f"who has a folder under {self.root}")
                        )
                    return folder
            if self._case_insensitive_alias(user_id):
                twin = self._case_twin(user_id)
                if twin is not None:
                    raise ConfigurationError(
                        case_twin_problem(user_id, twin, f"whose folder under {self.root} this id names")
                    )
        return folder

    def _case_insensitive_alias(self, user_id: str) -> bool:
        """Whether the id with its case swapped names the same existing folder (a case-insensitive disk)."""
        swapped = user_id.swapcase()
        if swapped == user_id:
            return False
        try:
            return os.path.samefile(self.root / user_id, self.root / swapped)
        except OSError:  # no such folder (a case-sensitive disk, or no folder at all)
            return False

    def _case_twin(self, user_id: str) -> str | None:
        """The name of an entry of the root that differs from ``user_id`` only by case, if any."""
        key = user_id.casefold()
        return next(
            (name for name in os.listdir(self.root) if name != user_id and name.casefold() == key),
            None,
        )

    def _empty_engine(self) -> GravityEngine:
        """One engine over an empty KB, shared by every user who has none yet (it never changes)."""
        with self._lock:
            if self._empty is None:
                vectors = AnchorVectors(embedder=self.embedder.name, dim=self.embedder.dim)
                self._empty = GravityEngine(
                    KnowledgeBase(),
                    NumpyAnchorIndex.from_vectors(vectors),
                    self.embedder,
                    config=self.config,
                    counter=self.counter,
                )
            return self._empty

    def _offline_extractor(self, embedder: Embedder, store: AnchorStore) -> Extractor:
        """The offline extractor of a user's build, sharing one loaded spaCy pipeline with all users.

        The user's parses and answers are kept in their own KB folder.
        """
        from gravity_core.extract.choice import make_extractor
        from gravity_core.text.nlp import load_pipeline

        with self._nlp_lock:
            if self._nlp is None:
                self._nlp = load_pipeline()
        return make_extractor(embedder, cache_dir=store.cache_dir, pipeline=self._nlp)


def _empty_in_place(folder: Path) -> None:
    """Delete what ``folder`` holds but its writer lock, the manifest first (readers then find no KB)."""
    manifest = folder / MANIFEST
    if manifest.is_file() and not manifest.is_symlink():
        manifest.unlink()
    for path in folder.iterdir():
        if path.name == WRITER_LOCK:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _remove_tree(path: Path) -> None:
    """Remove a folder being deleted, also while another delete of the same user removes it."""
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        shutil.rmtree(path)  # again, to raise what stops it
