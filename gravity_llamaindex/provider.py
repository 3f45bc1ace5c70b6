"""The engine as the LlamaIndex components use it: one answer per question, shared and observed.

A provider serves one engine, or many users' KBs (``users=``, a :class:`~gravity_core.serving.users.UserKBs`):
then every question names its user and is answered by that user's provider (:meth:`for_user`),
whose cache holds that user's answers only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import date, datetime

import numpy as np
from llama_index.core.instrumentation import get_dispatcher

from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.question_date import as_question_date
from gravity_core.query.types import AnchorContext
from gravity_core.serving.answer_cache import DEFAULT_CACHE_SIZE, AnswerCache, UserAnswerCaches
from gravity_core.serving.users import UserKBs
from gravity_llamaindex.instrumentation import GravityAnchorsEvent

__all__ = ["MISSING_USER_ID", "AnchorProvider", "EngineLike", "as_provider", "as_question_date"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

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
        self.users = users
        self.user_id: str | None = None  # set on the provider of one user of ``users``
        self.config = config
        self.question_date = as_question_date(question_date)
        self.cache_size = cache_size
        self._answers = (
            None if engine is None else AnswerCache(engine, maxsize=cache_size, on_answer=_emit_of(None))
        )
        self._per_user = (
            None if users is None else UserAnswerCaches(users, maxsize=cache_size, on_answer=_emit)
        )

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
        return self._cache().engine

    def _cache(self) -> AnswerCache:
        if self._answers is None:
            raise ConfigurationError(
                "this AnchorProvider serves many users' KBs (users=): use provider.for_user(user_id).engine"
            )
        return self._answers

    def for_user(self, user_id: str | None) -> AnchorProvider:
        """The provider answering ``user_id``'s questions.

        A provider of one engine returns itself (the engine answers every query, whatever user it
        names). A provider of many users returns a provider over the user's own answer cache
        (:class:`~gravity_core.serving.answer_cache.UserAnswerCaches`), kept while ``users`` hands
        out the same engine for the user.

        Raises:
            ConfigurationError: the provider serves many users and ``user_id`` is ``None`` (the
                message says to pass ``GravityQueryBundle(q, user_id=...)``) or cannot name a user
                (:func:`~gravity_core.serving.users.check_user_id`).
        """
        if self._per_user is None:
            return self
        if user_id is None:
            raise ConfigurationError(MISSING_USER_ID)
        answers = self._per_user.for_user(user_id)
        made = AnchorProvider(
            answers.engine, config=self.config, question_date=self.question_date, cache_size=self.cache_size
        )
        made._answers, made.user_id = answers, user_id
        return made

    async def afor_user(self, user_id: str | None) -> AnchorProvider:
        """:meth:`for_user` without blocking the event loop (a user's KB may load from disk)."""
        if self.users is None:
            return self
        return await asyncio.to_thread(self.for_user, user_id)

    def _asked(self, question_date: date | datetime | str | None) -> date | None:
        asked = as_question_date(question_date)
        return asked if asked is not None else self.question_date

    def cached(
        self,
        question: str,
        *,
        question_date: date | datetime | str | None = None,
        user_id: str | None = None,
    ) -> AnchorContext | None:
        """The remembered answer to ``question``, if any, without calling the engine.

        That is the answer to ``question`` asked on ``question_date`` (by ``user_id``, for a provider
        of many users) about the KB version served now.
        """
        if self.users is not None:
            return self.for_user(user_id).cached(question, question_date=question_date)
        return self._cache().cached(question, config=self.config, question_date=self._asked(question_date))

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
        provider = self.for_user(user_id) if self.users is not None else self
        return provider._cache().get(
            question,
            config=self.config,
            query_embedding=query_embedding,
            question_date=self._asked(question_date),
        )

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
        provider = await self.afor_user(user_id) if self.users is not None else self
        return await provider._cache().aget(
            question,
            config=self.config,
            query_embedding=query_embedding,
            question_date=self._asked(question_date),
        )

    def clear(self) -> None:
        """Forget every remembered answer (every user's, for a provider of many users)."""
        for answers in (self._answers, self._per_user):
            if answers is not None:
                answers.clear()


def _emit_of(user_id: str | None) -> Callable[[AnchorContext], None]:
    return lambda context: _emit(user_id, context)


def _emit(user_id: str | None, context: AnchorContext) -> None:
    """Log and emit the :class:`GravityAnchorsEvent` of an answer the engine computed."""
    logger.debug(
        "GRAVITY selected %d anchors and %d expansions for %r",
        len(context.anchors),
        len(context.expansions),
        context.question,
    )
    dispatcher.event(GravityAnchorsEvent.from_context(context, user_id=user_id))


EngineLike = GravityEngine | AnchorProvider
"""What the components accept: an engine, or a provider shared between components."""


def as_provider(engine: EngineLike | None = None, *, users: UserKBs | None = None) -> AnchorProvider:
    """The provider a component asks: ``engine`` itself if it is a provider, else a new one.

    The new provider is around the engine, or around ``users`` (one engine per user).

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
