"""An agent's finished turns added to GRAVITY's KB in the background, each turn once.

An agent answers first and remembers after: :class:`TurnIngestion` takes the utterances of a turn
and builds them into the user's KB (:meth:`UserKBs.add <gravity_core.serving.users.UserKBs.add>`)
or the one KB's builder (:meth:`AnchorBuilder.add <gravity_core.build.builder.AnchorBuilder.add>`)
in a worker thread of its own, so the reply never waits for an extraction. The engines follow their
KB folders (:mod:`gravity_core.query.live`), so the next query sees the new anchors without being
made again. One worker builds one batch at a time: a KB folder takes one writer at a time.

An utterance id handed in once is not built again (the ids of a thread's messages stay the same as
the thread grows), and a build that fails is logged and its turns are taken again with the next
turn. The ids handed in are kept for the object's life (one short string per turn); a new object
hands a turn in again, and the build skips it (an id the KB holds is not extracted twice).
Nothing here imports a framework.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait

from gravity_core.build import AnchorBuilder
from gravity_core.errors import ConfigurationError
from gravity_core.schema import Utterance
from gravity_core.serving.users import UserKBs

__all__ = ["TurnIngestion"]

logger = logging.getLogger(__name__)


class TurnIngestion:
    """Builds an agent's turns into their KB in one background thread; :meth:`flush` waits for it.

    Args:
        users: the KBs of many users (each batch names its user); not together with ``builder``.
        builder: the builder of the one KB, saving to the folder the serving engine follows
            (``AnchorBuilder(..., store=AnchorStore(kb_dir))`` beside ``GravityEngine.from_dir(kb_dir)``);
            not together with ``users``.

    Raises:
        ConfigurationError: both or neither of ``users`` and ``builder``.
    """

    def __init__(self, *, users: UserKBs | None = None, builder: AnchorBuilder | None = None) -> None:
        if (users is None) == (builder is None):
            raise ConfigurationError("TurnIngestion needs exactly one of users= or builder=")
        self.users = users
        self.builder = builder
        self._lock = threading.Lock()
        self._taken: dict[str | None, set[str]] = {}
        self._pending: set[Future[None]] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    def submit(self, user_id: str | None, utterances: Sequence[Utterance]) -> Future[None] | None:
        """Build the utterances not handed in before into ``user_id``'s KB, in the background.

        ``user_id`` is ``None`` with a ``builder``. Returns the build's future (it never raises:
        a failed build is logged), or ``None`` when every utterance was handed in before.

        Raises:
            ConfigurationError: the ingestion is closed, or ``user_id`` does not fit the mode.
        """
        if (user_id is None) != (self.users is None):
            raise ConfigurationError(
                "name the user of each batch with users=, and none with builder= (one KB)"
            )
        with self._lock:
            if self._closed:
                raise ConfigurationError("this TurnIngestion is closed: no turns are added after close()")
            taken = self._taken.setdefault(user_id, set())
            fresh = [u for u in dict((u.id, u) for u in utterances).values() if u.id not in taken]
            if not fresh:
                return None
            taken.update(u.id for u in fresh)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gravity-ingest")
            future = self._executor.submit(self._build, user_id, fresh)
            self._pending.add(future)
        future.add_done_callback(self._done)
        return future

    def taken(self, user_id: str | None) -> frozenset[str]:
        """The utterance ids handed in for ``user_id`` (built, or waiting), less those whose build failed."""
        with self._lock:
            return frozenset(self._taken.get(user_id, ()))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the builds handed in so far; whether all finished within ``timeout`` seconds."""
        with self._lock:
            pending = list(self._pending)
        _, not_done = wait(pending, timeout=timeout)
        return not not_done

    def close(self) -> None:
        """Wait for the builds handed in, then stop the worker; later :meth:`submit` calls are refused."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    def _build(self, user_id: str | None, utterances: list[Utterance]) -> None:
        who = "the KB" if user_id is None else f"user {user_id}'s KB"
        try:
            if self.users is not None and user_id is not None:
                report = self.users.add(user_id, utterances)
            else:
                assert self.builder is not None  # exactly one of users and builder, checked in __init__
                report = self.builder.add(utterances)
        except Exception:  # logged, never raised: the agent has answered already
            logger.exception(
                "could not add %d turns to %s; they are taken again with the next turn", len(utterances), who
            )
            with self._lock:
                self._taken.get(user_id, set()).difference_update(u.id for u in utterances)
            return
        logger.info("%s: +%d turns (%d there already)", who, report.added, report.skipped)
