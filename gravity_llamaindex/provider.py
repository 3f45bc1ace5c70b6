"""The engine as the LlamaIndex components use it: one answer per question, shared and observed.

A provider serves one engine, or many users' KBs (``users=``, a :class:`~gravity_core.serving.users.UserKBs`):
then every question names its user and is answered by that user's provider (:meth:`for_user`),
whose cache holds that user's answers only.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from datetime import date, datetime

import numpy as np
from llama_index.core.instrumentation import get_dispatcher

from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.question_date import as_question_date
from gravity_core.query.types import AnchorContext
from gravity_core.serving.users import UserKBs, check_user_id
from gravity_llamaindex.instrumentation import GravityAnchorsEvent

__all__ = ["MISSING_USER_ID", "AnchorProvider", "EngineLike", "as_provider", "as_question_date"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_CACHE_SIZE = 16

_Key = tuple[int, str, date | None]

MISSING_USER_ID = (
    "this GRAVITY component serves many users' KBs (users=) and the query names no user: "
    "pass GravityQueryBundle(question, user_id=...) where LlamaIndex takes the query "
    "(query_engine.query, retriever.retrieve, postprocess_nodes)"
)
"""The message of the :class:`ConfigurationError` raised for a query that names no user."""


class AnchorProvider:
    """Answers questions with a :class:`GravityEngine`, remembering the last few answers.

    One LlamaIndex query can reach GRAVITY several times: the query transform, the fusion retriever,
    the node postprocessor and the QA template's ``{gravity_anchors}`` slot (which LlamaIndex formats
    up to three times per query) all need the same answer. Components built from the same provider
    share its cache, so the engine runs once per question and one :class:`GravityAnchorsEvent` is
    emitted. Every component also accepts a bare engine and then makes a provider of its own.

    The cache is keyed by the KB version (``engine.revision``), the question text and its date:
    an engine that follows its KB (:meth:`GravityEngine.from_dir`, ``from_builder``) serves a new
    version as soon as it is complete, and the provider's answers for the old one are dropped then,
    so a query engine built once keeps serving the newest anchors.

    **Many users.** Built with ``users=`` (a :class:`~gravity_core.serving.users.UserKBs`) instead of an
    engine, the provider answers each question with the engine of the user it names
    (``get(question, user_id=...)``, or the components' ``GravityQueryBundle(q, user_id=...)``).
    Each user gets a provider of their own (:meth:`for_user`) holding that user's engine and
    answers, so the same question asked by two users is answered twice, once from each KB. A
    user's provider is made again when ``users`` hands out another engine for them (the KB was
    deleted, or its engine dropped from the LRU and loaded again), and the users' providers kept
    are as many as ``users.max_engines``.

    Args:
        engine: the GRAVITY engine over a loaded KB; not together with ``users``.
        users: the KBs of many users, one engine per user; not together with ``engine``.
        config: query settings (default: the engine's).
        question_date: the date questions are asked, for phrases such as "last month" (a date, a
            datetime or an ISO string; default: the date of the KB's latest utterance). A
            component's own ``question_date`` or a dated query bundle
            (:class:`~gravity_llamaindex.GravityQueryBundle`) overrides it for its questions.
        cache_size: how many recent questions are remembered (0 turns the cache off).

    Raises:
        ConfigurationError: both or neither of ``engine`` and ``users``, or a negative ``cache_size``.

    Example:
        ```python
        provider = AnchorProvider(engine)
        retriever = GravityFusionRetriever.from_index(index, provider)
        postprocessor = GravityNodePostprocessor(provider)

        shared = AnchorProvider(users=UserKBs("kbs/"))  # one provider for every user's queries
        context = shared.get("Where did I hike?", user_id="u-17")
        ```
    """

    def __init__(
        self,
        engine: GravityEngine | None = None,
        *,
        users: UserKBs | None = None,
        config: QueryConfig | None = None,
        question_date: date | datetime | str | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        _check_source(engine, users, (GravityEngine,))
        if cache_size < 0:
            raise ConfigurationError(f"cache_size must be >= 0, got {cache_size}")
        self._engine = engine
        self.users = users
        self.user_id: str | None = None  # set on the provider of one user of ``users``
        self.config = config
        self.question_date = as_question_date(question_date)
        self.cache_size = cache_size
        self._cache: OrderedDict[_Key, AnchorContext] = OrderedDict()
        self._per_user: OrderedDict[str, AnchorProvider] = OrderedDict()
        self._lock = threading.Lock()
        self._revision = engine.revision if engine is not None else 0  # the KB version of the answers

    def __repr__(self) -> str:
        if self.users is not None:
            return f"AnchorProvider(users={str(self.users.root)!r}, cache_size={self.cache_size})"
        turns = len(self.engine.records.utterances)
        return f"AnchorProvider(kb={turns} utterances, cache_size={self.cache_size})"

    @property
    def engine(self) -> GravityEngine:
        """The engine answering the questions.

        Raises:
            ConfigurationError: the provider serves many users (``users=``); each user's engine is
                ``provider.for_user(user_id).engine``.
        """
        if self._engine is None:
            raise ConfigurationError(
                "this AnchorProvider serves many users' KBs (users=): use provider.for_user(user_id).engine"
            )
        return self._engine

    def for_user(self, user_id: str | None) -> AnchorProvider:
        """The provider answering ``user_id``'s questions.

        A provider of one engine returns itself (the engine answers every query, whatever user it
        names). A provider of many users returns the user's own provider over
        ``users.engine(user_id)``, made on first use and kept while ``users`` hands out the same
        engine for the user.

        Raises:
            ConfigurationError: the provider serves many users and ``user_id`` is ``None`` (the
                message says to pass ``GravityQueryBundle(q, user_id=...)``) or cannot name a user
                (:func:`~gravity_core.serving.users.check_user_id`).
        """
        if self.users is None:
            return self
        if user_id is None:
            raise ConfigurationError(MISSING_USER_ID)
        engine = self.users.engine(check_user_id(user_id))
        with self._lock:
            found = self._per_user.get(user_id)
            if found is not None and found._engine is engine:
                self._per_user.move_to_end(user_id)
                return found
        return self._add_user(user_id, engine)

    async def afor_user(self, user_id: str | None) -> AnchorProvider:
        """:meth:`for_user` without blocking the event loop (a user's KB may load from disk)."""
        if self.users is None:
            return self
        return await asyncio.to_thread(self.for_user, user_id)

    def _add_user(self, user_id: str, engine: GravityEngine) -> AnchorProvider:
        """A new provider of ``user_id``'s engine, kept unless the engine is the empty one ``users``
        makes anew for every query of a user without a KB."""
        made = AnchorProvider(
            engine, config=self.config, question_date=self.question_date, cache_size=self.cache_size
        )
        made.user_id = user_id
        if not engine.records.utterances:
            return made
        assert self.users is not None  # only called for a provider of many users
        with self._lock:
            self._per_user[user_id] = made
            self._per_user.move_to_end(user_id)
            while len(self._per_user) > self.users.max_engines:
                dropped, _ = self._per_user.popitem(last=False)
                logger.debug("provider of user %s dropped", dropped)
        logger.debug("provider of user %s made (KB version %d)", user_id, engine.revision)
        return made

    def _key(self, question: str, question_date: date | datetime | str | None) -> _Key:
        asked = as_question_date(question_date)
        # An engine that follows its KB checks for a new version here, as a query would.
        revision = self.engine.current_snapshot().revision
        return revision, question, asked if asked is not None else self.question_date

    def cached(
        self,
        question: str,
        *,
        question_date: date | datetime | str | None = None,
        user_id: str | None = None,
    ) -> AnchorContext | None:
        """The remembered answer to ``question`` asked on ``question_date`` (by ``user_id``, for a
        provider of many users) about the KB version served now, if any (no engine call)."""
        if self.users is not None:
            return self.for_user(user_id).cached(question, question_date=question_date)
        return self._lookup(self._key(question, question_date))

    def _lookup(self, key: _Key) -> AnchorContext | None:
        with self._lock:
            if key[0] > self._revision:  # a new KB version: the answers kept are about the old one
                logger.debug("KB version %d: %d cached answers dropped", key[0], len(self._cache))
                self._cache.clear()
                self._revision = key[0]
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
            return found

    @dispatcher.span
    def get(
        self,
        question: str,
        *,
        query_embedding: Sequence[float] | np.ndarray | None = None,
        question_date: date | datetime | str | None = None,
        user_id: str | None = None,
    ) -> AnchorContext:
        """The anchors, expansions and injection text for ``question``.

        Args:
            question: the user's question, as in ``QueryBundle.query_str``.
            query_embedding: the question's embedding by the engine's own embedder, if already
                computed (it is then not computed again).
            question_date: the date this question is asked (default: the provider's
                ``question_date``, else the KB's latest day).
            user_id: who asks, for a provider of many users (ignored by a provider of one engine).

        Raises:
            ConfigurationError: ``question_date`` is not a date, a datetime or an ISO date string;
                or the provider serves many users and ``user_id`` is missing or unusable.
        """
        if self.users is not None:
            return self.for_user(user_id).get(
                question, query_embedding=query_embedding, question_date=question_date
            )
        key = self._key(question, question_date)
        found = self._lookup(key)
        if found is not None:
            return found
        context = self.engine.query(
            question, config=self.config, query_embedding=query_embedding, question_date=key[2]
        )
        return self._remember(key, context)

    @dispatcher.span
    async def aget(
        self,
        question: str,
        *,
        query_embedding: Sequence[float] | np.ndarray | None = None,
        question_date: date | datetime | str | None = None,
        user_id: str | None = None,
    ) -> AnchorContext:
        """:meth:`get` without blocking the event loop (the engine runs in a worker thread)."""
        if self.users is not None:
            provider = await self.afor_user(user_id)
            return await provider.aget(question, query_embedding=query_embedding, question_date=question_date)
        key = self._key(question, question_date)
        found = self._lookup(key)
        if found is not None:
            return found
        context = await self.engine.aquery(
            question, config=self.config, query_embedding=query_embedding, question_date=key[2]
        )
        return self._remember(key, context)

    def clear(self) -> None:
        """Forget every remembered answer (every user's, for a provider of many users)."""
        with self._lock:
            self._cache.clear()
            self._per_user.clear()

    def _remember(self, key: _Key, context: AnchorContext) -> AnchorContext:
        logger.debug(
            "GRAVITY selected %d anchors and %d expansions for %r",
            len(context.anchors),
            len(context.expansions),
            context.question,
        )
        dispatcher.event(GravityAnchorsEvent.from_context(context, user_id=self.user_id))
        if self.cache_size:
            with self._lock:
                if not key[0] == self._revision == self.engine.revision:
                    return context  # the KB moved on while this ran: the answer is not kept
                self._cache[key] = context
                self._cache.move_to_end(key)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return context


EngineLike = GravityEngine | AnchorProvider
"""What the components accept: an engine, or a provider shared between components."""


def as_provider(engine: EngineLike | None = None, *, users: UserKBs | None = None) -> AnchorProvider:
    """The provider a component asks: ``engine`` itself if it is a provider, else a new provider
    around the engine, or around ``users`` (one engine per user).

    Raises:
        ConfigurationError: both or neither of ``engine`` and ``users``, or either of another type.
    """
    _check_source(engine, users, (GravityEngine, AnchorProvider))
    if users is not None:
        return AnchorProvider(users=users)
    if isinstance(engine, AnchorProvider):
        return engine
    return AnchorProvider(engine)


def _check_source(engine: object, users: object, engine_types: tuple[type, ...]) -> None:
    """Refuse anything but exactly one of an engine (of ``engine_types``) and a :class:`UserKBs`."""
    if engine is not None and users is not None:
        raise ConfigurationError(
            "pass engine= (one KB for every query) or users= (each query's user's KB), not both"
        )
    if engine is None and users is None:
        raise ConfigurationError(
            "a GRAVITY component needs engine= (a GravityEngine or an AnchorProvider) or users= (a UserKBs)"
        )
    if users is not None and not isinstance(users, UserKBs):
        raise ConfigurationError(f"users= expects a UserKBs, got {type(users).__name__}")
    if engine is not None and not isinstance(engine, engine_types):
        expected = " or ".join(f"a {t.__name__}" for t in engine_types)
        raise ConfigurationError(f"expected {expected}, got {type(engine).__name__}")
