"""GRAVITY for LangChain agents: a ``create_agent`` middleware that gives every model call the user's anchors.

Before each model call the middleware answers the run's latest user message with GRAVITY and adds
the anchor blocks to the system message; after each run it can add the run's new messages to the
user's KB in the background. Needs ``langchain`` (``create_agent``) besides ``langchain-core``:
``pip install 'gravity-memory[langchain]'``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from types import TracebackType
from typing import Any

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables.config import ensure_config, get_callback_manager_for_config

from gravity_core.build import AnchorBuilder
from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.errors import ConfigurationError, MissingDependencyError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.serving.agent_turns import (
    DEFAULT_TOKEN_BUDGET,
    TurnAnchors,
    latest_user_message,
    message_date,
    run_question_date,
)
from gravity_core.serving.messages import DEFAULT_SESSION
from gravity_core.serving.turn_ingestion import TurnIngestion
from gravity_core.serving.users import UserKBs
from gravity_langchain.messages import neutral_message, utterances_from_messages
from gravity_langchain.per_user import USER_ID_KEY
from gravity_langchain.retrieval_call import ANCHORS_EVENT, anchors_event_data

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
    )
    from langgraph.runtime import Runtime
except ImportError as _exc:  # langchain-core alone runs the retriever and chains, not create_agent
    raise MissingDependencyError("langchain", "langchain", "GravityMiddleware (LangChain agents)") from _exc

__all__ = ["GravityMiddleware"]

logger = logging.getLogger(__name__)

_HOW = (
    "pass it to the run, e.g. agent.invoke(inputs, context={'user_id': '...'}) or a context_schema "
    "dataclass with a user_id field"
)
_SINGLE_KB_INGEST = (
    "ingest=True with one engine needs builder=: the AnchorBuilder of the engine's KB, saving to the "
    "folder the engine follows, e.g. AnchorBuilder(extractor, embedder, store=AnchorStore(kb_dir)) beside "
    "GravityEngine.from_dir(kb_dir)"
)

ModelCall = ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]


class GravityMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Gives each model call of a ``create_agent`` agent GRAVITY's anchors for the user's latest message.

    **Before each model call** (``wrap_model_call`` / ``awrap_model_call``) the latest human message
    of the request is asked of the KB, the anchor blocks are formatted within the context policy's
    share of ``token_budget`` (:meth:`ContextPolicy.anchor_tokens`) and appended to the system
    message (the agent's own system prompt stays first). The question is dated by the run context's
    ``question_date`` (field or key), else by the message's own timestamp (metadata ``timestamp``,
    ``time`` or ``created_at``, read as :func:`~gravity_langchain.utterances_from_messages` reads it),
    else by the KB's latest day. The selected anchors go out as the :data:`ANCHORS_EVENT` custom
    event, with the retriever's payload (:func:`anchors_event_data`) and, per user, ``user_id``.

    **Per user** (``users=``): the run context's ``user_id`` (field or key) picks the user's KB
    (:meth:`UserKBs.engine`); a run that names no user, or an id that cannot name one, is refused
    before the model is called, and another user's KB is never read.

    **Ingestion** (``ingest=True``): after each run (``after_agent``), the thread's human and AI
    messages not handed in before (known by message id; LangGraph gives every message one) are turned
    into utterances by the one message adapter (session: the thread id; time: the message's own, else
    the run's ``question_date``, else now) and built into the KB by a worker thread the middleware owns,
    off the response path. The engines follow their folders, so a later turn sees the new anchors.
    A failed build is logged and retried with the next run, never raised into the agent. Call
    :meth:`flush` to wait for the builds (tests, scripts) and :meth:`close` at shutdown.

    Args:
        engine: the engine of the one KB served; not together with ``users``.
        users: the KBs of many users (:class:`~gravity_core.serving.users.UserKBs`).
        token_budget: tokens of a model call given to memory; the anchors take the policy's share.
        policy: how the budget is shared (default: the shipped context policy).
        config: query settings (default: the engine's).
        ingest: add each run's new messages to the KB in the background.
        builder: with one engine and ``ingest``: the builder of the engine's KB, saving to the folder
            the engine follows (``GravityEngine.from_dir``).
        speakers: speaker names by role for ingested messages (e.g. ``{"user": "Maya"}``).
        clock: the time of ingested messages that carry none and whose run gives no ``question_date``
            (default: now, UTC).

    Raises:
        ConfigurationError: both or neither of ``engine`` and ``users``; a budget that leaves the
            anchors nothing; ``builder`` without ``ingest``, with ``users``, or missing (or not
            saving to a folder an engine follows) for one engine with ``ingest``.

    Example:
        ```python
        memory = GravityMiddleware(users=UserKBs("kbs/"), ingest=True)
        agent = create_agent(model, tools, middleware=[memory], checkpointer=InMemorySaver())
        agent.invoke({"messages": [("user", "Where did I hike last week?")]},
                     {"configurable": {"thread_id": "maya-1"}}, context={"user_id": "maya"})
        ```
    """

    def __init__(
        self,
        engine: GravityEngine | None = None,
        *,
        users: UserKBs | None = None,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        policy: ContextPolicy = DEFAULT_POLICY,
        config: QueryConfig | None = None,
        ingest: bool = False,
        builder: AnchorBuilder | None = None,
        speakers: Mapping[str, str] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__()
        self.turns = TurnAnchors(
            engine,
            users=users,
            token_budget=token_budget,
            policy=policy,
            config=config,
            owner="GravityMiddleware",
            how=_HOW,
        )
        self.ingestion = _ingestion(engine, users, ingest, builder)
        self.speakers = dict(speakers) if speakers is not None else None
        self.clock = clock or (lambda: datetime.now(UTC))

    # -- before each model call -------------------------------------------------------------------

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelCall:
        """Append the anchors for the latest user message to the system message, then call the model."""
        asked = self._question(request)
        if asked is None:
            return handler(request)
        question, user_id, when = asked
        context = self.turns.anchors(question, user_id=user_id, question_date=when)
        if _in_a_run():
            dispatch_custom_event(ANCHORS_EVENT, _event(context, user_id))
        return handler(_with_anchors(request, context))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCall:
        """:meth:`wrap_model_call` for an async run (the query runs in a worker thread)."""
        asked = self._question(request)
        if asked is None:
            return await handler(request)
        question, user_id, when = asked
        context = await self.turns.aanchors(question, user_id=user_id, question_date=when)
        if _in_a_run():
            await adispatch_custom_event(ANCHORS_EVENT, _event(context, user_id))
        return await handler(_with_anchors(request, context))

    def _question(self, request: ModelRequest[Any]) -> tuple[str, str | None, date | None] | None:
        """The question, its user and its date; ``None`` when the request holds no user message."""
        run_context = request.runtime.context if request.runtime is not None else None
        user_id = self.turns.user_of(run_context)  # refused before anything else when missing
        latest = latest_user_message([neutral_message(m) for m in request.messages])
        if latest is None:
            logger.debug("no user message with text in the model request: no anchors added")
            return None
        when = run_question_date(run_context) or message_date(latest)
        return latest.text.strip(), user_id, when

    # -- after each run ---------------------------------------------------------------------------

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Hand the run's new messages to the background ingestion (with ``ingest=True``)."""
        if self.ingestion is None:
            return None
        try:
            self._ingest(state["messages"], runtime)
        except Exception:  # logged, never raised: the agent's answer is ready and must not be lost
            logger.exception("the run's messages could not be handed to GRAVITY's ingestion")
        return None

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """:meth:`after_agent` for an async run (it only converts and queues, it does not build)."""
        return self.after_agent(state, runtime)

    def _ingest(self, messages: Sequence[BaseMessage], runtime: Runtime[Any]) -> None:
        assert self.ingestion is not None
        user_id = self.turns.user_of(runtime.context)
        info = runtime.execution_info
        session = info.thread_id if info is not None and info.thread_id else DEFAULT_SESSION
        default_time = run_question_date(runtime.context) or self.clock()
        utterances = utterances_from_messages(
            messages, session=session, default_time=default_time, speakers=self.speakers
        )
        self.ingestion.submit(user_id, utterances)

    # -- waiting for ingestion --------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the ingestion handed in so far; whether it all finished within ``timeout`` seconds."""
        return True if self.ingestion is None else self.ingestion.flush(timeout)

    async def aflush(self, timeout: float | None = None) -> bool:
        """:meth:`flush` without blocking the event loop."""
        return await asyncio.to_thread(self.flush, timeout)

    def close(self) -> None:
        """Wait for the ingestion handed in and stop its worker; runs after this add nothing."""
        if self.ingestion is not None:
            self.ingestion.close()

    def __enter__(self) -> GravityMiddleware:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def _ingestion(
    engine: GravityEngine | None, users: UserKBs | None, ingest: bool, builder: AnchorBuilder | None
) -> TurnIngestion | None:
    """The background ingestion the arguments ask for, refused where it could not reach the engine."""
    if builder is not None and users is not None:
        raise ConfigurationError(
            "builder= goes with one engine; with users= each user's KB is built by UserKBs"
        )
    if not ingest:
        if builder is not None:
            raise ConfigurationError("builder= is only used with ingest=True")
        return None
    if users is not None:
        return TurnIngestion(users=users)
    if builder is None:
        raise ConfigurationError(_SINGLE_KB_INGEST)
    if builder.store is None or engine is None or not engine.follows or engine.generation is None:
        raise ConfigurationError(
            f"{_SINGLE_KB_INGEST}; an in-memory builder, or an engine that does not follow a KB folder, "
            "would never serve the new turns"
        )
    return TurnIngestion(builder=builder)


def _in_a_run() -> bool:
    """Whether a custom event has a run to belong to (a middleware called outside an agent has none)."""
    return get_callback_manager_for_config(ensure_config()).parent_run_id is not None


def _event(context: AnchorContext, user_id: str | None) -> dict[str, Any]:
    data = anchors_event_data(context)
    return data if user_id is None else {**data, USER_ID_KEY: user_id}


def _with_anchors(request: ModelRequest[Any], context: AnchorContext) -> ModelRequest[Any]:
    """The request with the anchor blocks appended to its system message (or as it, when it has none)."""
    if not context.text:
        return request
    system = request.system_message
    if system is None:
        return request.override(system_message=SystemMessage(context.text))
    if isinstance(system.content, str):
        content: str | list[str | dict[Any, Any]] = f"{system.content}\n\n{context.text}"
    else:
        content = [*system.content, {"type": "text", "text": f"\n\n{context.text}"}]
    return request.override(system_message=system.model_copy(update={"content": content}))
