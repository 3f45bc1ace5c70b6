"""GravityStore: any LangGraph store, whose queried searches also bring the selected anchors' source turns."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable
from datetime import date, datetime
from typing import cast

from langgraph.store.base import BaseStore, Op, Result, SearchItem, SearchOp

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.question_date import as_question_date
from gravity_core.query.types import AnchorContext
from gravity_core.serving.provenance import ProvenanceNotices, source_turns_for
from gravity_core.serving.users import UserKBs, check_user_id
from gravity_langchain.store_fetch import Addition, SourceLookup, Wanted

__all__ = ["GravityStore"]

_Asked = tuple[tuple[str, ...], str]  # a search's namespace prefix and query

logger = logging.getLogger(__name__)


class GravityStore(BaseStore):
    """A LangGraph store whose searches with a query also return the turns GRAVITY's anchors come from.

    Wraps any :class:`~langgraph.store.base.BaseStore` (``InMemoryStore``, ``PostgresStore``, ...).
    ``get``, ``put`` (``index``, ``ttl`` and deletes included), ``list_namespaces`` and searches
    without a ``query`` go to the wrapped store unchanged, and so does every search GRAVITY has
    nothing to add to. For a search with a query, the engine selects anchors for the query (no
    model call) and the turns the selected anchors come from are fetched from
    the wrapped store by key; the store's own hits and those turns are merged by the
    :class:`~gravity_core.context.policy.ContextPolicy` as in
    :class:`~gravity_langchain.retriever.GravityRetriever` (the store's first two hits first,
    then every second place a source turn), and ``limit`` and ``offset`` apply to the merged list.

    **Which items are source turns.** An item holds the turn whose utterance id is its key, or,
    when its value lists utterance ids under ``"gravity_utterance_ids"``
    (:data:`~gravity_core.context.provenance.UTTERANCE_IDS_KEY`), those turns (e.g. a chunk keyed by
    its first turn's id). Turns are looked up by key in every namespace under the search's
    ``namespace_prefix`` (at most ``max_namespaces`` of them; beyond that nothing is added and the
    log says so once), and only those that pass the search's ``filter`` are added (checked with
    LangGraph's filter language, :func:`~gravity_langchain.store_filter.matches_filter`). A store
    that holds none of them is told once in the log. The lookup does not refresh the turns' TTLs.

    **What a search returns.** When GRAVITY adds turns, every item is a
    :class:`~gravity_langchain.store_items.GravitySearchItem`: the store's item with its value
    unchanged and the store's score for its own hits (``None`` for a fetched turn), plus
    ``gravity``, why it is there (``gravity_slot`` ``"question"`` or ``"provenance"`` and, for a
    turn, the anchor that names it in ``gravity_found_by``). Otherwise the result is the wrapped
    store's, as it returned it. The anchors' text is not an item: :meth:`anchors` returns it.

    **Many users.** With ``users=`` (a :class:`~gravity_core.serving.users.UserKBs`) instead of
    ``engine=``, the user of a search is the namespace label at ``user_namespace_index`` (1 for
    namespaces such as ``("memories", user_id)``), checked with
    :func:`~gravity_core.serving.users.check_user_id`; a search whose prefix is too short to name
    a user gets nothing from GRAVITY (the log says so once).

    Args:
        store: the store to wrap.
        engine: the GRAVITY engine over the KB (give this or ``users``).
        users: the KBs of many users (give this or ``engine``).
        user_namespace_index: with ``users``, the place of the user id in a namespace.
        policy: how the source turns join the store's hits (the shipped policy by default;
            ``dataclasses.replace(DEFAULT_POLICY, source_every=0)`` adds none).
        config: query settings of the engine (default: the engine's own).
        question_date: the date questions are asked, for phrases such as "last month" (default:
            the KB's latest day).
        max_namespaces: namespaces under a search's prefix in which turns are looked up, at most.

    Example:
        ```python
        store = GravityStore(InMemoryStore(index={"dims": 384, "embed": embeddings}), engine)
        store.put(("chat", "u1"), turn.id, {"text": f"{turn.speaker}: {turn.text}"})
        items = store.search(("chat", "u1"), query="Where does Maya work now?", limit=5)
        ```
    """

    def __init__(
        self,
        store: BaseStore,
        engine: GravityEngine | None = None,
        *,
        users: UserKBs | None = None,
        user_namespace_index: int | None = None,
        policy: ContextPolicy = DEFAULT_POLICY,
        config: QueryConfig | None = None,
        question_date: date | datetime | str | None = None,
        max_namespaces: int = 100,
    ) -> None:
        if not isinstance(store, BaseStore):
            raise ConfigurationError(f"GravityStore wraps a LangGraph BaseStore, got {type(store).__name__}")
        if (engine is None) == (users is None):
            raise ConfigurationError(
                "GravityStore needs exactly one of engine= (one KB) or users= (a KB per user)"
            )
        if users is not None and (user_namespace_index is None or user_namespace_index < 0):
            raise ConfigurationError(
                "with users=, give user_namespace_index=: the place (0 or more) of the user id in a "
                "namespace, e.g. 1 for ('memories', user_id)"
            )
        if users is None and user_namespace_index is not None:
            raise ConfigurationError("user_namespace_index= goes with users=, not with engine=")
        if max_namespaces < 1:
            raise ConfigurationError(f"max_namespaces must be at least 1, got {max_namespaces}")
        self.store = store
        self.engine = engine
        self.users = users
        self.user_namespace_index = user_namespace_index
        self.policy = policy
        self.config = config
        self.question_date = as_question_date(question_date)
        self.max_namespaces = max_namespaces
        # BaseStore's put/get read these to build their ops: the wrapped store's, so they build its ops.
        self.supports_ttl = store.supports_ttl
        self.ttl_config = store.ttl_config
        self._notices = ProvenanceNotices("GravityStore")
        self._told: set[str] = set()
        self._told_lock = threading.Lock()

    # -- the store -----------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order, in one batch of the wrapped store; queried searches get GRAVITY's turns.

        The turns are looked up before (a listing of namespaces and a batch of gets), so they never
        see the batch's own puts; ``InMemoryStore``'s searches do not see them either.
        """
        ops = list(ops)
        lookup = self._lookup(ops, {asked: self.anchors(asked[1], asked[0]) for asked in self._asked(ops)})
        found: dict[int, Addition] = {}
        if lookup is not None:
            gets = lookup.fetches(self.store.batch(lookup.listing()))
            found = lookup.additions(self.store.batch(gets) if gets else [], self._notices)
        return self._merged(found, self.store.batch(self._searches(ops, found)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async :meth:`batch`: the engine queries run concurrently in worker threads."""
        ops = list(ops)
        asked = self._asked(ops)
        answers = await asyncio.gather(*(self.aanchors(query, prefix) for prefix, query in asked))
        lookup = self._lookup(ops, dict(zip(asked, answers, strict=True)))
        found: dict[int, Addition] = {}
        if lookup is not None:
            gets = lookup.fetches(await self.store.abatch(lookup.listing()))
            found = lookup.additions(await self.store.abatch(gets) if gets else [], self._notices)
        return self._merged(found, await self.store.abatch(self._searches(ops, found)))

    # -- the anchors ---------------------------------------------------------------------------

    def anchors(self, query: str, namespace_prefix: tuple[str, ...] = ()) -> AnchorContext | None:
        """The engine's anchors for ``query`` (``.text``: the blocks to put in a prompt).

        ``None`` with ``users=`` when ``namespace_prefix`` names no user.
        """
        engine = self._engine(namespace_prefix)
        if engine is None:
            return None
        return engine.query(query, config=self.config, question_date=self.question_date)

    async def aanchors(self, query: str, namespace_prefix: tuple[str, ...] = ()) -> AnchorContext | None:
        """Async :meth:`anchors` (the engine query runs in a worker thread)."""
        return await asyncio.to_thread(self.anchors, query, namespace_prefix)

    # -- shared --------------------------------------------------------------------------------

    @staticmethod
    def _queried(op: Op) -> SearchOp | None:
        """``op`` if GRAVITY takes part in it: a search with a query, a limit from 1, an offset from 0."""
        if isinstance(op, SearchOp) and op.query and op.limit >= 1 and op.offset >= 0:
            return op
        return None

    def _asked(self, ops: list[Op]) -> list[_Asked]:
        """The engine's questions of a batch, each once: queried searches the policy can add turns to."""
        asked: dict[_Asked, None] = {}
        for op in ops:
            search = self._queried(op)
            if search is not None and self.policy.places_sources(search.offset + search.limit):
                asked[(search.namespace_prefix, search.query or "")] = None
        return list(asked)

    def _lookup(self, ops: list[Op], answers: dict[_Asked, AnchorContext | None]) -> SourceLookup | None:
        """The lookup of the turns the selected anchors come from (``None``: no search has any)."""
        wanted: dict[int, Wanted] = {}
        for at, op in enumerate(ops):
            search = self._queried(op)
            context = None if search is None else answers.get((search.namespace_prefix, search.query or ""))
            if search is not None and context is not None:
                turns = source_turns_for(self.policy, context, search.offset + search.limit)
                if turns:
                    wanted[at] = Wanted(search, turns)
        return SourceLookup(wanted, self.max_namespaces, self._too_many) if wanted else None

    @staticmethod
    def _searches(ops: list[Op], found: dict[int, Addition]) -> list[Op]:
        """The ops the wrapped store runs: each search GRAVITY adds to asks for ``offset + limit`` hits."""
        return [found[at].search if at in found else op for at, op in enumerate(ops)]

    def _merged(self, found: dict[int, Addition], results: list[Result]) -> list[Result]:
        merged = list(results)
        for at, addition in found.items():
            hits = results[at]
            assert isinstance(hits, list)  # a search's result
            merged[at] = addition.results(self.policy, cast(list[SearchItem], hits))
            logger.debug("GravityStore: %d source turns joined a search", len(addition.sourced))
        return merged

    def _engine(self, namespace_prefix: tuple[str, ...]) -> GravityEngine | None:
        if self.users is None:
            return self.engine
        at = self.user_namespace_index
        assert at is not None  # checked in __init__
        if len(namespace_prefix) <= at:
            self._once(
                "no_user",
                "GravityStore: a search of %r names no user (namespace label %d); GRAVITY adds nothing to it",
                namespace_prefix,
                at,
            )
            return None
        return self.users.engine(check_user_id(namespace_prefix[at]))

    def _too_many(self, namespace_prefix: tuple[str, ...]) -> None:
        self._once(
            "too_many",
            "GravityStore: more than %d namespaces under %r; the anchors' source turns are not looked "
            "up there (raise max_namespaces=, or search a narrower prefix)",
            self.max_namespaces,
            namespace_prefix,
        )

    def _once(self, notice: str, message: str, *args: object) -> None:
        """Log ``message`` the first time this store has ``notice`` to give."""
        with self._told_lock:
            if notice in self._told:
                return
            self._told.add(notice)
        logger.info(message, *args)
