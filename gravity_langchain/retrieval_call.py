"""The settings of one GravityRetriever call, and the arguments a LangChain retriever refuses.

LangChain's retrievers ignore arguments they do not take, so a misspelt ``fetch_k`` or another
retriever's ``top_k`` would silently do nothing; GRAVITY's retrievers refuse them, naming what
to use instead.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.vectorstores import VectorStoreRetriever

from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.question_date import QUESTION_DATE_KEY, as_question_date
from gravity_core.query.types import AnchorContext
from gravity_core.serving.answer_cache import AnswerCache, UserAnswerCaches
from gravity_core.serving.users import UserKBs
from gravity_langchain.per_user import USER_ID_KEY, UserFilter, required_user_id, user_search_arguments

__all__ = [
    "ANCHORS_EVENT",
    "CALL_ARGUMENTS",
    "INSTEAD",
    "RetrievalCall",
    "anchors_event_data",
    "call_serving",
    "check_serving",
    "call_hint",
    "configured_question_date",
    "refuse_call_arguments",
    "refuse_search_arguments",
    "refuse_unknown_arguments",
    "with_user_search",
]

ANCHORS_EVENT = "gravity_anchors_selected"
"""Name of the custom callback event that carries the selected anchors (``on_custom_event``).

Not ``"gravity_anchors"``: that is the name of the anchors runnable's run (and the prompt variable).
"""

_WRAP_YOUR_RETRIEVER = (
    "GravityRetriever runs similarity searches by vector; for MMR or a score threshold wrap your "
    "store's own retriever: GravityRetriever(engine=..., retriever=store.as_retriever(search_type=..., "
    "search_kwargs=...))"
)
INSTEAD = {
    "search_type": _WRAP_YOUR_RETRIEVER,
    "score_threshold": _WRAP_YOUR_RETRIEVER,
    "lambda_mult": _WRAP_YOUR_RETRIEVER,
    "top_k": "use k= (documents returned) or fetch_k= (documents fetched per query)",
    "n_results": "use k= (documents returned) or fetch_k= (documents fetched per query)",
    "vectorstore": "use vector_store=",
    "store": "use vector_store=",
    "base_retriever": "use retriever=",
}
"""Arguments of LangChain's VectorStoreRetriever (or other retrievers) GravityRetriever does not take,
and what to do instead."""

CALL_ARGUMENTS = ("k", "fetch_k", QUESTION_DATE_KEY, USER_ID_KEY)
"""The keyword arguments GravityRetriever itself takes in invoke(); the others go to the store's search."""


def configured_question_date(config: RunnableConfig | None) -> date | None:
    """The question date in ``config["configurable"]["question_date"]`` (``None`` when not set).

    Raises:
        ConfigurationError: the value is not a date, a datetime or an ISO date string.
    """
    configurable = ensure_config(config).get("configurable") or {}
    return as_question_date(configurable.get(QUESTION_DATE_KEY), f"configurable[{QUESTION_DATE_KEY!r}]")


def anchors_event_data(context: AnchorContext) -> dict[str, Any]:
    """Payload of the :data:`ANCHORS_EVENT` event: question, anchors (kind, id, score, reason), expansions."""
    return {
        "question": context.question,
        "anchors": [
            {"kind": a.kind.value, "id": a.id, "score": float(a.score), "reason": a.reason}
            for a in context.anchors
        ],
        "expansions": list(context.expansions),
        "tokens": context.tokens,
    }


def call_hint(name: str, known: Iterable[str], instead: Mapping[str, str] = INSTEAD) -> str:
    """What to use instead of argument ``name``, or the known argument it looks misspelt from."""
    if name in instead:
        return f" ({instead[name]})"
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def refuse_unknown_arguments(
    owner: type[BaseRetriever], data: Mapping[str, Any], instead: Mapping[str, str] = INSTEAD
) -> None:
    """Raise for constructor arguments ``owner`` has no field for (LangChain's retrievers ignore them).

    Raises:
        ConfigurationError: naming each unknown argument, what to use instead (or the field it
            looks like a misspelling of), and the arguments ``owner`` takes.
    """
    known = owner.model_fields
    unknown = [name for name in data if name not in known]
    if not unknown:
        return
    supported = ", ".join(n for n in known if n not in ("name", "tags", "metadata"))
    raise ConfigurationError(
        f"{owner.__name__} got unknown argument(s) "
        + "; ".join(f"{name!r}{call_hint(name, known, instead)}" for name in unknown)
        + f". It takes: {supported} (and LangChain's name, tags, metadata)"
    )


def refuse_call_arguments(kwargs: Mapping[str, Any]) -> None:
    """Refuse other retrievers' per-call arguments and misspelt GRAVITY ones."""
    for name in kwargs:
        hint = call_hint(name, CALL_ARGUMENTS)
        if name in INSTEAD or (name not in CALL_ARGUMENTS and hint):
            raise ConfigurationError(
                f"GravityRetriever.invoke got {name!r}{hint}; it takes k, fetch_k, question_date and "
                "user_id, and passes other keyword arguments to the store's search"
            )


def refuse_search_arguments(search_kwargs: Mapping[str, Any]) -> None:
    """Refuse GRAVITY's own call arguments and other retrievers' settings in ``search_kwargs``."""
    for name in search_kwargs:
        if name in CALL_ARGUMENTS:
            raise ConfigurationError(f"set {name} with {name}=, not in search_kwargs")
        if name in INSTEAD:
            raise ConfigurationError(f"search_kwargs[{name!r}] is not supported: {INSTEAD[name]}")


@dataclass(frozen=True)
class RetrievalCall:
    """The settings of one retrieval and the engine (with its answer cache, if any) of its user.

    Attributes:
        top: documents returned.
        fetch: documents fetched per query.
        search: the store's (or retriever's) extra search arguments.
        asked: the question date.
        engine: the engine of the call's user.
        cache: that engine's answer cache, when the retriever has one.
        user_id: the call's user, with ``users=``.
        config: the query settings (``None``: the engine's).
    """

    top: int
    fetch: int
    search: dict[str, Any]
    asked: date | None
    engine: GravityEngine
    cache: AnswerCache | None
    user_id: str | None
    config: QueryConfig | None

    def ask(self, question: str, vector: Sequence[float] | None) -> AnchorContext:
        """GRAVITY's answer for ``question`` (through the cache when there is one)."""
        if self.cache is not None:
            return self.cache.get(question, **self._query(vector))
        return self.engine.query(question, **self._query(vector))

    async def aask(self, question: str, vector: Sequence[float] | None) -> AnchorContext:
        """:meth:`ask` without blocking the event loop."""
        if self.cache is not None:
            return await self.cache.aget(question, **self._query(vector))
        return await self.engine.aquery(question, **self._query(vector))

    def _query(self, vector: Sequence[float] | None) -> dict[str, Any]:
        return {"config": self.config, "query_embedding": vector, "question_date": self.asked}

    def event_data(self, context: AnchorContext) -> dict[str, Any]:
        """The anchors event's payload, naming the user on a per-user call."""
        data = anchors_event_data(context)
        return data if self.user_id is None else {**data, USER_ID_KEY: self.user_id}

    def emit(self, context: AnchorContext, run_manager: CallbackManagerForRetrieverRun) -> None:
        """Dispatch the anchors event to the run's callbacks."""
        dispatch_custom_event(
            ANCHORS_EVENT, self.event_data(context), config={"callbacks": run_manager.get_child()}
        )

    async def aemit(self, context: AnchorContext, run_manager: AsyncCallbackManagerForRetrieverRun) -> None:
        """:meth:`emit` for an async run."""
        await adispatch_custom_event(
            ANCHORS_EVENT, self.event_data(context), config={"callbacks": run_manager.get_child()}
        )


_NO_USER_FILTER = (
    "GravityRetriever(users=...) needs user_filter=: the store holds every user's documents, so each "
    "search must keep to the call's user, e.g. user_filter=lambda u: {'filter': {'user_id': u}} for "
    "Chroma; with a store per user, build a GravityRetriever(engine=users.engine(u), ...) per user"
)


def check_serving(
    engine: GravityEngine | None,
    users: UserKBs | None,
    cache: AnswerCache | UserAnswerCaches | None,
    user_filter: UserFilter | None,
    retriever: BaseRetriever | None,
) -> None:
    """Exactly one of ``engine`` and ``users``, each with the cache and the user filter it takes.

    Raises:
        ConfigurationError: naming what is missing or does not fit.
    """
    if (engine is None) == (users is None):
        raise ConfigurationError(
            "GravityRetriever needs exactly one of engine= (one KB) or users= (a KB per user)"
        )
    if users is None:
        if user_filter is not None:
            raise ConfigurationError("user_filter= goes with users=, not with engine=")
        if cache is not None and (not isinstance(cache, AnswerCache) or cache.engine is not engine):
            raise ConfigurationError("the cache was made for another engine")
        return
    if user_filter is None:
        raise ConfigurationError(_NO_USER_FILTER)
    if cache is not None and (not isinstance(cache, UserAnswerCaches) or cache.users is not users):
        raise ConfigurationError(
            "with users=, the cache must be a UserAnswerCaches(users) of the same users (one cache "
            "per user), not a single engine's AnswerCache"
        )
    if retriever is not None and not isinstance(retriever, VectorStoreRetriever):
        raise ConfigurationError(
            f"with users=, a {type(retriever).__name__} may not apply user_filter's arguments "
            "to its searches: give vector_store= (or its as_retriever())"
        )


def call_serving(
    engine: GravityEngine | None,
    users: UserKBs | None,
    cache: AnswerCache | UserAnswerCaches | None,
    user_id: object,
) -> tuple[GravityEngine, AnswerCache | None, str | None]:
    """The engine of a call, its answer cache (if any) and the checked user id (with ``users``)."""
    if users is None:
        if user_id is not None:
            raise ConfigurationError(
                "user_id= names the user of a GravityRetriever(users=...); this one serves one engine"
            )
        assert engine is not None  # checked by check_serving
        return engine, cache if isinstance(cache, AnswerCache) else None, None
    user = required_user_id(user_id, "this GravityRetriever")
    if isinstance(cache, UserAnswerCaches):
        found = cache.for_user(user)
        return found.engine, found, user
    return users.engine(user), None, user


def with_user_search(
    search: Mapping[str, Any], user_filter: UserFilter, retriever: BaseRetriever | None, user_id: str
) -> dict[str, Any]:
    """``search`` plus ``user_filter``'s arguments for the user; refused where they would overlap."""
    own = user_search_arguments(user_filter, user_id)
    given = set(search)
    if isinstance(retriever, VectorStoreRetriever):
        given |= set(retriever.search_kwargs)
    clash = sorted(given & own.keys())
    if clash:
        raise ConfigurationError(
            f"{', '.join(clash)} is set by user_filter for each user's searches: put the condition "
            "into user_filter instead of search_kwargs or the invoke() arguments"
        )
    return {**search, **own}
