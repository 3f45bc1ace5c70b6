"""The engine as the LlamaIndex components use it: one answer per question, shared and observed."""

from __future__ import annotations

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
from gravity_llamaindex.instrumentation import GravityAnchorsEvent

__all__ = ["AnchorProvider", "EngineLike", "as_provider", "as_question_date"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_CACHE_SIZE = 16

_Key = tuple[int, str, date | None]


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

    Args:
        engine: the GRAVITY engine over a loaded KB.
        config: query settings (default: the engine's).
        question_date: the date questions are asked, for phrases such as "last month" (a date, a
            datetime or an ISO string; default: the date of the KB's latest utterance). A
            component's own ``question_date`` or a dated query bundle
            (:class:`~gravity_llamaindex.GravityQueryBundle`) overrides it for its questions.
        cache_size: how many recent questions are remembered (0 turns the cache off).

    Example:
        ```python
        provider = AnchorProvider(engine)
        retriever = GravityFusionRetriever.from_index(index, provider)
        postprocessor = GravityNodePostprocessor(provider)
        ```
    """

    def __init__(
        self,
        engine: GravityEngine,
        *,
        config: QueryConfig | None = None,
        question_date: date | datetime | str | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        if cache_size < 0:
            raise ConfigurationError(f"cache_size must be >= 0, got {cache_size}")
        self.engine = engine
        self.config = config
        self.question_date = as_question_date(question_date)
        self.cache_size = cache_size
        self._cache: OrderedDict[_Key, AnchorContext] = OrderedDict()
        self._lock = threading.Lock()
        self._revision = engine.revision  # the KB version the kept answers belong to

    def __repr__(self) -> str:
        return f"AnchorProvider(kb={len(self.engine.kb.utterances)} utterances, cache_size={self.cache_size})"

    def _key(self, question: str, question_date: date | datetime | str | None) -> _Key:
        asked = as_question_date(question_date)
        # An engine that follows its KB checks for a new version here, as a query would.
        revision = self.engine.current_snapshot().revision
        return revision, question, asked if asked is not None else self.question_date

    def cached(
        self, question: str, *, question_date: date | datetime | str | None = None
    ) -> AnchorContext | None:
        """The remembered answer to ``question`` asked on ``question_date`` about the KB version
        served now, if any (no engine call)."""
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
    ) -> AnchorContext:
        """The anchors, expansions and injection text for ``question``.

        Args:
            question: the user's question, as in ``QueryBundle.query_str``.
            query_embedding: the question's embedding by the engine's own embedder, if already
                computed (it is then not computed again).
            question_date: the date this question is asked (default: the provider's
                ``question_date``, else the KB's latest day).

        Raises:
            ConfigurationError: ``question_date`` is not a date, a datetime or an ISO date string.
        """
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
    ) -> AnchorContext:
        """:meth:`get` without blocking the event loop (the engine runs in a worker thread)."""
        key = self._key(question, question_date)
        found = self._lookup(key)
        if found is not None:
            return found
        context = await self.engine.aquery(
            question, config=self.config, query_embedding=query_embedding, question_date=key[2]
        )
        return self._remember(key, context)

    def clear(self) -> None:
        """Forget every remembered answer."""
        with self._lock:
            self._cache.clear()

    def _remember(self, key: _Key, context: AnchorContext) -> AnchorContext:
        logger.debug(
            "GRAVITY selected %d anchors and %d expansions for %r",
            len(context.anchors),
            len(context.expansions),
            context.question,
        )
        dispatcher.event(GravityAnchorsEvent.from_context(context))
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


def as_provider(engine: EngineLike) -> AnchorProvider:
    """``engine`` itself if it is a provider, else a new provider around it."""
    if isinstance(engine, AnchorProvider):
        return engine
    if isinstance(engine, GravityEngine):
        return AnchorProvider(engine)
    raise ConfigurationError(f"expected a GravityEngine or an AnchorProvider, got {type(engine).__name__}")
