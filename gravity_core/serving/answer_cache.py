"""One engine query per question, shared by every component that needs its answer.

A chain's retriever and anchors runnable, or a LlamaIndex query's transform, retriever,
postprocessor and prompt slot, all need the same :class:`~gravity_core.query.types.AnchorContext`,
often at the same time. An :class:`AnswerCache` given to all of them computes it once: the first
caller runs the query, a caller that arrives while it runs waits for that result (single flight),
and the last few results are kept.

The cache follows its engine's KB: answers are kept per KB version (``engine.revision``), and each
lookup first lets an engine that follows its KB check for a new version (one ``stat``), so a
component built once serves the anchors of sessions added after it was built.

Components serving many users share a :class:`UserAnswerCaches` instead: one :class:`AnswerCache`
per user, for the engine that serves that user now.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from datetime import date

import numpy as np

from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.serving.users import UserKBs, check_user_id

__all__ = ["DEFAULT_CACHE_SIZE", "AnswerCache", "AnswerListener", "UserAnswerCaches"]

logger = logging.getLogger(__name__)

DEFAULT_CACHE_SIZE = 32
"""How many recent answers a cache keeps unless told otherwise."""

AnswerListener = Callable[[AnchorContext], None]
"""Called with each answer the engine computes (once per computation, not per cache hit)."""

_Key = tuple[int, str, QueryConfig, date | None]


class AnswerCache:
    """Runs ``engine.query`` once per (question, config, question date) and shares it; thread-safe.

    An engine's answer depends only on the question, the config, the question date and the KB
    version it serves, so answers are kept per version: when the engine follows its KB
    (``GravityEngine.from_dir`` or ``from_builder``) and a new version appears, the cache forgets
    the old answers and the next lookup runs the engine again. A query running while the version
    changes still finishes, but its answer is not kept.

    Args:
        engine: the GRAVITY engine.
        maxsize: how many recent answers are kept (0: none are kept, but callers asking the same
            question at the same time still share one engine query).
        on_answer: called with each answer the engine computes, in the computing caller's thread.

    Raises:
        ConfigurationError: a negative ``maxsize``.

    Example:
        ```python
        cache = AnswerCache(engine)
        retriever = GravityRetriever(engine=engine, vector_store=store, cache=cache)
        anchors = gravity_anchors_runnable(cache)  # same cache: one engine query per question
        ```
    """

    def __init__(
        self,
        engine: GravityEngine,
        *,
        maxsize: int = DEFAULT_CACHE_SIZE,
        on_answer: AnswerListener | None = None,
    ) -> None:
        if maxsize < 0:
            raise ConfigurationError(f"maxsize must be >= 0, got {maxsize}")
        self.engine = engine
        self.maxsize = maxsize
        self._on_answer = on_answer
        self._lock = threading.Lock()
        self._done: OrderedDict[_Key, AnchorContext] = OrderedDict()
        self._running: dict[_Key, Future[AnchorContext]] = {}
        self._revision = engine.revision  # the KB version the kept answers belong to

    def __len__(self) -> int:
        return len(self._done)

    def _key(self, question: str, config: QueryConfig | None, question_date: date | None) -> _Key:
        revision = self.engine.current_snapshot().revision  # an engine that follows checks its KB here
        return revision, question, config or self.engine.config, question_date

    def _kept(self, key: _Key) -> AnchorContext | None:
        """The kept answer for ``key``; drops the answers of older KB versions first."""
        if key[0] > self._revision:  # a new KB version (a lagging caller's older one clears nothing)
            logger.debug("KB version %d: %d cached answers dropped", key[0], len(self._done))
            self._done.clear()
            self._revision = key[0]
        done = self._done.get(key)
        if done is not None:
            self._done.move_to_end(key)
        return done

    def cached(
        self, question: str, *, config: QueryConfig | None = None, question_date: date | None = None
    ) -> AnchorContext | None:
        """The kept answer to ``question`` about the KB version served now, if any (no engine query)."""
        key = self._key(question, config, question_date)
        with self._lock:
            return self._kept(key)

    def get(
        self,
        question: str,
        *,
        config: QueryConfig | None = None,
        query_embedding: Sequence[float] | np.ndarray | None = None,
        question_date: date | None = None,
    ) -> AnchorContext:
        """The engine's answer for ``question``, computed at most once while it is kept.

        Args:
            question: the user's question.
            config: query settings (default: the engine's).
            query_embedding: the question's vector from the same model as the engine's embedder,
                used if this call is the one that runs the query.
            question_date: the date the question is asked (default: the KB's latest utterance);
                answers for different dates are kept apart.
        """
        key = self._key(question, config, question_date)
        with self._lock:
            done = self._kept(key)
            if done is not None:
                return done
            running = self._running.get(key)
            if running is None:
                owned: Future[AnchorContext] = Future()
                self._running[key] = owned
        if running is not None:
            return running.result()
        try:
            result = self.engine.query(
                question, config=key[2], query_embedding=query_embedding, question_date=question_date
            )
            if self._on_answer is not None:
                self._on_answer(result)
        except BaseException as exc:
            with self._lock:
                del self._running[key]
            owned.set_exception(exc)
            raise
        with self._lock:
            del self._running[key]
            if self.maxsize and key[0] == self._revision == self.engine.revision:
                self._done[key] = result
                while len(self._done) > self.maxsize:
                    self._done.popitem(last=False)
        owned.set_result(result)
        return result

    async def aget(
        self,
        question: str,
        *,
        config: QueryConfig | None = None,
        query_embedding: Sequence[float] | np.ndarray | None = None,
        question_date: date | None = None,
    ) -> AnchorContext:
        """:meth:`get` in a worker thread, so the event loop is not blocked by the scoring."""
        return await asyncio.to_thread(
            self.get, question, config=config, query_embedding=query_embedding, question_date=question_date
        )

    def clear(self) -> None:
        """Forget the kept answers (queries running now still finish)."""
        with self._lock:
            self._done.clear()


class UserAnswerCaches:
    """An :class:`AnswerCache` per user of a :class:`~gravity_core.serving.users.UserKBs`; thread-safe.

    :meth:`for_user` gives the cache of ``users.engine(user_id)``: a new one when that engine
    changed (loaded again after the users' LRU dropped it, or the user's KB was deleted), so a
    user's answers are only ever served to that user, from that user's engine. The caches of the
    ``users.max_engines`` users asked for most recently are kept; a user without a KB gets a cache
    that is not kept (their empty engine is made anew for each query).

    Args:
        users: the users' KBs.
        maxsize: how many recent answers are kept per user.
        on_answer: called with the user id and each answer an engine computes for that user.

    Example:
        ```python
        caches = UserAnswerCaches(users)
        retriever = GravityRetriever(users=users, vector_store=store, user_filter=..., cache=caches)
        anchors = gravity_anchors_runnable(caches)  # same caches: one engine query per question
        ```
    """

    def __init__(
        self,
        users: UserKBs,
        *,
        maxsize: int = DEFAULT_CACHE_SIZE,
        on_answer: Callable[[str, AnchorContext], None] | None = None,
    ) -> None:
        if maxsize < 0:
            raise ConfigurationError(f"maxsize must be >= 0, got {maxsize}")
        self.users = users
        self.maxsize = maxsize
        self._on_answer = on_answer
        self._lock = threading.Lock()
        self._caches: OrderedDict[str, AnswerCache] = OrderedDict()

    def for_user(self, user_id: str) -> AnswerCache:
        """The cache of the engine serving ``user_id`` now.

        Raises:
            ConfigurationError: ``user_id`` cannot name a user.
            AnchorStoreError: the user's folder holds a KB that does not load.
        """
        engine = self.users.engine(check_user_id(user_id))
        with self._lock:
            cache = self._caches.get(user_id)
            if cache is not None and cache.engine is engine:
                self._caches.move_to_end(user_id)
                return cache
        cache = AnswerCache(engine, maxsize=self.maxsize, on_answer=self._listener(user_id))
        if not engine.records.utterances:
            return cache
        with self._lock:
            self._caches[user_id] = cache
            self._caches.move_to_end(user_id)
            while len(self._caches) > self.users.max_engines:
                dropped, _ = self._caches.popitem(last=False)
                logger.debug("answer cache of user %s dropped", dropped)
        return cache

    async def afor_user(self, user_id: str) -> AnswerCache:
        """:meth:`for_user` without blocking the event loop (a user's KB may load from disk)."""
        return await asyncio.to_thread(self.for_user, user_id)

    def clear(self) -> None:
        """Forget every user's cache."""
        with self._lock:
            self._caches.clear()

    def _listener(self, user_id: str) -> AnswerListener | None:
        on_answer = self._on_answer
        if on_answer is None:
            return None
        return lambda context: on_answer(user_id, context)
