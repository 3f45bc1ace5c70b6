"""The anchors of an agent's turn: which KB, which question, asked when, within what share of a budget.

An agent framework (LangChain's ``create_agent``, a LlamaIndex agent, an MCP host) asks before each
model call for the anchors of the user's latest message. :class:`TurnAnchors` answers it the same
way for all of them: from one engine, or from the KB of the user the run names
(:class:`~gravity_core.serving.users.UserKBs`), formatted within the anchors' share of a token budget
(:meth:`ContextPolicy.anchor_tokens <gravity_core.context.policy.ContextPolicy.anchor_tokens>`) and
dated by the run, else by the message, else by the KB. Nothing here imports a framework.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import date

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.errors import ConfigurationError
from gravity_core.loaders import read_timestamp
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.question_date import QUESTION_DATE_KEY, as_question_date
from gravity_core.query.types import AnchorContext
from gravity_core.serving.messages import TIMESTAMP_KEYS, NeutralMessage
from gravity_core.serving.users import UserKBs, check_user_id

__all__ = [
    "DEFAULT_TOKEN_BUDGET",
    "USER_ID_KEY",
    "TurnAnchors",
    "context_value",
    "latest_user_message",
    "message_date",
    "run_question_date",
]

DEFAULT_TOKEN_BUDGET = 3000
"""Tokens of a model call given to memory by default: the anchors take the policy's share (300 with
the default policy, its cap), the conversation the rest."""

USER_ID_KEY = "user_id"
"""The field (or key) of a run's context that names its user."""


def context_value(context: object, key: str) -> object | None:
    """``context[key]`` for a mapping, else ``context.<key>``; ``None`` when it has none (or is ``None``)."""
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(key)
    return getattr(context, key, None)


def run_question_date(context: object) -> date | None:
    """The ``question_date`` a run's context gives (field or key), as a date; ``None`` when not set.

    Raises:
        ConfigurationError: the value is not a date, a datetime or an ISO date string.
    """
    return as_question_date(
        context_value(context, QUESTION_DATE_KEY), f"the run context's {QUESTION_DATE_KEY}"
    )


def message_date(message: NeutralMessage, record: str = "the latest user message") -> date | None:
    """The day of the message's own timestamp, read as the message adapter reads it; ``None`` without one.

    The metadata keys are :data:`~gravity_core.serving.messages.TIMESTAMP_KEYS`, the first set one wins.

    Raises:
        InputDataError: the timestamp cannot be read (names ``record`` and the field).
    """
    stamped = message.fields(TIMESTAMP_KEYS)
    if not stamped:
        return None
    field, value = stamped[0]
    return read_timestamp(value, record=record, field=field).date()


def latest_user_message(messages: list[NeutralMessage]) -> NeutralMessage | None:
    """The last message of role ``"user"`` with text, or ``None``."""
    return next((m for m in reversed(messages) if m.role == "user" and m.text.strip()), None)


class TurnAnchors:
    """Answers an agent's turn with GRAVITY: the anchors for the latest user message within a budget share.

    Args:
        engine: the engine of the one KB served; not together with ``users``.
        users: the KBs of many users, the user named by each run; not together with ``engine``.
        token_budget: the tokens of a model call given to memory; the anchors take
            ``policy.anchor_tokens(token_budget, config.token_budget)`` of them.
        policy: how the budget is shared (default :data:`~gravity_core.context.policy.DEFAULT_POLICY`).
        config: query settings (default: the engine's, or each user's engine's).
        owner: the name errors give the caller (e.g. ``"GravityMiddleware"``).
        how: how the caller's user names the run's user, for the error when a run names none.

    Raises:
        ConfigurationError: both or neither of ``engine`` and ``users``; a budget below 1, or one that
            leaves the anchors nothing under ``policy``.
    """

    def __init__(
        self,
        engine: GravityEngine | None = None,
        *,
        users: UserKBs | None = None,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        policy: ContextPolicy = DEFAULT_POLICY,
        config: QueryConfig | None = None,
        owner: str = "TurnAnchors",
        how: str = "give the run a context with a user_id",
    ) -> None:
        if (engine is None) == (users is None):
            raise ConfigurationError(
                f"{owner} needs exactly one of engine= (one KB) or users= (a KB per user)"
            )
        if engine is not None and not isinstance(engine, GravityEngine):
            raise ConfigurationError(f"{owner}'s engine must be a GravityEngine, got {type(engine).__name__}")
        if users is not None and not isinstance(users, UserKBs):
            raise ConfigurationError(f"{owner}'s users must be a UserKBs, got {type(users).__name__}")
        if policy.anchor_tokens(token_budget) == 0:
            raise ConfigurationError(
                f"{owner}'s token_budget={token_budget} leaves the anchors nothing under its policy "
                f"(they take {policy.anchor_share:g} of what exceeds {policy.host_reserve} tokens, and "
                f"nothing below {policy.min_anchor_tokens}): give a larger token_budget"
            )
        self.engine = engine
        self.users = users
        self.token_budget = token_budget
        self.policy = policy
        self.config = config
        self.owner = owner
        self.how = how

    def user_of(self, context: object) -> str | None:
        """The run's user (checked) with ``users``; ``None`` with one engine, whatever the context says.

        Raises:
            ConfigurationError: with ``users``, the context names no user (saying how to name one),
                or its ``user_id`` cannot name a user.
        """
        if self.users is None:
            return None
        user_id = context_value(context, USER_ID_KEY)
        if user_id is None:
            raise ConfigurationError(
                f"{self.owner} serves many users (users=) and this run names none: it expected the run "
                f"context's {USER_ID_KEY!r} (a field or key); {self.how}"
            )
        return check_user_id(user_id)

    def engine_of(self, user_id: str | None) -> GravityEngine:
        """The engine that serves ``user_id`` (the one engine when there are no ``users``)."""
        if self.users is None:
            assert self.engine is not None  # exactly one of them, checked in __init__
            return self.engine
        if user_id is None:
            raise ConfigurationError(f"{self.owner} serves many users (users=): name the user")
        return self.users.engine(user_id)

    def budget(self, engine: GravityEngine) -> int:
        """The anchors' tokens: the policy's share of ``token_budget``, capped by the query settings'."""
        cap = (self.config or engine.config).token_budget
        return self.policy.anchor_tokens(self.token_budget, cap)

    def anchors(self, question: str, *, user_id: str | None, question_date: date | None) -> AnchorContext:
        """GRAVITY's anchors for ``question`` from ``user_id``'s KB (or the one engine's), within the share.

        ``question_date=None`` dates the question by the KB's latest day.
        """
        engine = self.engine_of(user_id)
        limit = self.budget(engine)
        if limit == 0:  # the query settings' own budget is below the policy's minimum
            return AnchorContext(question)
        config = (self.config or engine.config).model_copy(update={"token_budget": limit})
        if self.users is not None and user_id is not None:
            # UserKBs.query also drops the engine of a user deleted meanwhile.
            return self.users.query(user_id, question, config=config, question_date=question_date)
        return engine.query(question, config=config, question_date=question_date)

    async def aanchors(
        self, question: str, *, user_id: str | None, question_date: date | None
    ) -> AnchorContext:
        """:meth:`anchors` in a worker thread, so the event loop is not blocked by loading or scoring."""
        return await asyncio.to_thread(self.anchors, question, user_id=user_id, question_date=question_date)
