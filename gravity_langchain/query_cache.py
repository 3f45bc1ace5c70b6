"""One engine query per question, shared by the retriever and the anchors runnable of a chain.

In ``RunnablePassthrough.assign(context=... | retriever, gravity_anchors=anchors)`` both branches
need the same :class:`~gravity_core.query.types.AnchorContext` (the retriever its expansions, the
runnable its text), and LangChain runs the two branches at the same time. A
:class:`GravityQueryCache` given to both computes it once: the first caller runs the query, a
caller that arrives while it runs waits for that result, and the last few results are kept.

The cache follows its engine's KB: results are kept per KB version (``engine.revision``), and each
lookup first lets an engine that follows its KB check for a new version (one ``stat``), so a chain
built once serves the anchors of sessions added after it was built.

A retriever and a chain serving many users (``users=``) share a :class:`UserQueryCaches` instead: one
:class:`GravityQueryCache` per user, for the engine that serves that user now.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future
from datetime import date

import numpy as np

from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.serving.users import UserKBs

__all__ = ["GravityQueryCache", "UserQueryCaches"]

logger = logging.getLogger(__name__)

_Key = tuple[int, str, QueryConfig, date | None]


class GravityQueryCache:
    """Runs ``engine.query`` once per (question, config, question date), shares the result; thread-safe.

    An engine's answer depends only on the question, the config, the question date and the KB version
    it serves, so results are kept per version: when the engine follows its KB
    (``GravityEngine.from_dir`` or ``from_builder``) and a new version appears, the cache forgets the
    old answers and the next lookup runs the engine again. A query running while the version changes
    still finishes, but its answer is not kept.

    Args:
        engine: the GRAVITY engine.
        maxsize: how many recent results are kept.

    Example:
        ```python
        cache = GravityQueryCache(engine)
        retriever = GravityRetriever(engine=engine, vector_store=store, cache=cache)
        anchors = gravity_anchors_runnable(cache)   # same cache: one engine query per question
        ```
    """

    def __init__(self, engine: GravityEngine, *, maxsize: int = 32) -> None:
        if maxsize < 1:
            raise ConfigurationError(f"maxsize must be at least 1, got {maxsize}")
        self.engine = engine
        self.maxsize = maxsize
        self._lock = threading.Lock()
        self._done: OrderedDict[_Key, AnchorContext] = OrderedDict()
        self._running: dict[_Key, Future[AnchorContext]] = {}
        self._revision = engine.revision  # the KB version the kept answers belong to

    def __len__(self) -> int:
        return len(self._done)

    def get(
        self,
        question: str,
        *,
        config: QueryConfig | None = None,
        query_embedding: Sequence[float] | np.ndarray | None = None,
        question_date: date | None = None,
    ) -> AnchorContext:
        """The engine's answer for ``question``, computed at most once while it is cached.

        Args:
            question: the user's question.
            config: query settings (default: the engine's).
            query_embedding: the question's vector from the same model as the engine's embedder,
                used if this call is the one that runs the query.
            question_date: the date the question is asked (default: the KB's latest utterance);
                answers for different dates are kept apart.
        """
        revision = self.engine.current_snapshot().revision  # an engine that follows checks its KB here
        key = (revision, question, config or self.engine.config, question_date)
        with self._lock:
            if revision > self._revision:  # a new KB version (a lagging caller's older one clears nothing)
                logger.debug("KB version %d: %d cached answers dropped", revision, len(self._done))
                self._done.clear()
                self._revision = revision
            done = self._done.get(key)
            if done is not None:
                self._done.move_to_end(key)
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
        except BaseException as exc:
            with self._lock:
                del self._running[key]
            owned.set_exception(exc)
            raise
        with self._lock:
            del self._running[key]
            if revision == self._revision == self.engine.revision:
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
        """Forget the cached results (queries running now still finish)."""
        with self._lock:
            self._done.clear()


class UserQueryCaches:
    """A :class:`GravityQueryCache` per user of a :class:`~gravity_core.serving.users.UserKBs`; thread-safe.

    :meth:`for_user` gives the cache of ``users.engine(user_id)``: a new one when that engine
    changed (loaded again after the users' LRU dropped it, or the user's KB was deleted), so a
    user's answers are only ever served to that user, from that user's engine. The caches of the
    ``users.max_engines`` users asked for most recently are kept.

    Args:
        users: the users' KBs.
        maxsize: how many recent results are kept per user.

    Example:
        ```python
        caches = UserQueryCaches(users)
        retriever = GravityRetriever(users=users, vector_store=store, user_filter=..., cache=caches)
        anchors = gravity_anchors_runnable(caches)   # same caches: one engine query per question
        ```
    """

    def __init__(self, users: UserKBs, *, maxsize: int = 32) -> None:
        if maxsize < 1:
            raise ConfigurationError(f"maxsize must be at least 1, got {maxsize}")
        self.users = users
        self.maxsize = maxsize
        self._lock = threading.Lock()
        self._caches: OrderedDict[str, GravityQueryCache] = OrderedDict()

    def for_user(self, user_id: str) -> GravityQueryCache:
        """The cache of the engine serving ``user_id`` now.

        Raises:
            ConfigurationError: ``user_id`` cannot name a user.
            AnchorStoreError: the user's folder holds a KB that does not load.
        """
        engine = self.users.engine(user_id)
        with self._lock:
            cache = self._caches.get(user_id)
            if cache is None or cache.engine is not engine:
                cache = GravityQueryCache(engine, maxsize=self.maxsize)
                self._caches[user_id] = cache
            self._caches.move_to_end(user_id)
            while len(self._caches) > self.users.max_engines:
                self._caches.popitem(last=False)
        return cache
