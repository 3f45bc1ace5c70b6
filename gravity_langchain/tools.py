"""GRAVITY's memory as tools of a LangChain agent: search_memory, entity_profile, timeline, topic_arc.

Each tool wraps one :class:`~gravity_core.serving.memory_tools.MemoryTools` method, so its answer is
the escaped, budgeted text of GRAVITY's prompt blocks. A bad argument from the model (an empty
name, ``start`` after ``end``, a date that is not ``YYYY-MM-DD``) comes back as the tool's error
message (``ToolException``, ``handle_tool_error``), so the agent can correct itself and go on.

**Many users.** Made with ``users=`` (a :class:`~gravity_core.serving.users.UserKBs`), the tools
read the user id of each call from the agent's runtime context, ``runtime.context.user_id`` (or
``["user_id"]`` of a dict context), as LangChain's ``create_agent(..., context_schema=...)`` and
``agent.invoke(..., context=...)`` give it. A call without one, or with an id that cannot name a
user, fails with a :class:`~gravity_core.errors.ConfigurationError`: it never reads another user's KB.

Example:
    ```python
    from langchain.agents import create_agent

    agent = create_agent(model, tools=gravity_tools(engine))
    agent.invoke({"messages": [("user", "What did Maya do in March?")]})

    shared = create_agent(model, tools=gravity_tools(users=UserKBs("kbs")), context_schema=Context)
    shared.invoke({"messages": [...]}, context=Context(user_id="u-17"))
    ```
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from langchain.tools import ToolRuntime
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool, InjectedToolArg, StructuredTool, ToolException

from gravity_core.context.policy import placement_of
from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.query.engine import GravityEngine
from gravity_core.serving.agent_turns import context_value
from gravity_core.serving.memory_tools import (
    DEFAULT_TOOL_BUDGET,
    TOOL_NAMES,
    TOOL_SPECS,
    HostMemories,
    MemoryTools,
    MemoryToolsSource,
)
from gravity_core.serving.users import UserKBs, check_user_id
from gravity_langchain.per_user import USER_ID_KEY

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic.v1 import ValidationError as ValidationErrorV1

__all__ = ["TOOL_NAMES", "UserRetriever", "gravity_tools"]

UserRetriever = Callable[[str], BaseRetriever]
"""With ``users=``: the host retriever that searches only one user's documents, made from the user id."""

_NO_USER = (
    "GRAVITY's memory tools serve many users (users=) and this call names none: run them in an agent "
    "invoked with context={'user_id': '...'} (or a context_schema object with a user_id field)"
)

Runtime = Annotated[ToolRuntime[Any, Any] | None, InjectedToolArg()]
"""The agent's runtime, injected by LangChain's tool node (the model never sees or sets it)."""


class _Memory:
    """Where a call's tools and host documents come from: the one engine, or the call's user."""

    def __init__(
        self,
        engine: GravityEngine | None,
        users: UserKBs | None,
        retriever: BaseRetriever | UserRetriever | None,
        token_budget: int,
    ) -> None:
        self._source = MemoryToolsSource(engine, users, token_budget=token_budget)
        self._retriever: BaseRetriever | None = None
        self._user_retriever: UserRetriever | None = None
        if retriever is None:
            return
        if users is None:
            if not isinstance(retriever, BaseRetriever):
                raise ConfigurationError(
                    f"retriever must be a LangChain BaseRetriever, got {type(retriever).__name__}"
                )
            self._retriever = retriever
        elif isinstance(retriever, BaseRetriever) or not callable(retriever):
            raise ConfigurationError(
                "with users=, one retriever over every user's documents would mix users: pass a function "
                "from the user id to that user's retriever, e.g. lambda user_id: store.as_retriever("
                "search_kwargs={'filter': {'user_id': user_id}})"
            )
        else:
            self._user_retriever = retriever

    def user_id(self, runtime: ToolRuntime | None) -> str:
        user_id = context_value(None if runtime is None else runtime.context, USER_ID_KEY)
        if user_id is None:
            raise ConfigurationError(_NO_USER)
        return check_user_id(user_id)

    def tools(self, runtime: ToolRuntime | None) -> MemoryTools:
        return self._source.tools(lambda: self.user_id(runtime))

    def documents(self, runtime: ToolRuntime | None) -> HostMemories | None:
        """The host's search of the call, query -> texts with placements (``None`` without a retriever)."""
        retriever = self._retriever
        if self._user_retriever is not None:
            user_id = self.user_id(runtime)
            retriever = self._user_retriever(user_id)
            if not isinstance(retriever, BaseRetriever):
                raise ConfigurationError(
                    f"the retriever function must return a LangChain BaseRetriever for user {user_id!r}, "
                    f"got {type(retriever).__name__}"
                )
        if retriever is None:
            return None
        found = retriever
        return lambda query: [(d.page_content, placement_of(d.metadata)) for d in found.invoke(query)]


def _invalid_arguments(error: ValidationError | ValidationErrorV1) -> str:
    """What the model sent wrong, argument by argument (the tool's answer to arguments that do not fit)."""
    problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
    return f"invalid arguments: {problems}"


def _answer(call: Callable[[], str]) -> str:
    """``call()``, a bad argument turned into a tool error the model reads."""
    try:
        return call()
    except InputDataError as exc:
        raise ToolException(str(exc)) from exc


def gravity_tools(
    engine: GravityEngine | None = None,
    *,
    users: UserKBs | None = None,
    retriever: BaseRetriever | UserRetriever | None = None,
    token_budget: int = DEFAULT_TOOL_BUDGET,
) -> list[BaseTool]:
    """GRAVITY's read-only memory tools for a LangChain agent, named as :data:`TOOL_NAMES`.

    Args:
        engine: the engine over the KB (not together with ``users``).
        users: the KBs of many users, the user of each call named by the agent's runtime context.
        retriever: the host's own memory: ``search_memory`` then also returns its documents for the
            query after the anchors, the budget shared by
            :meth:`ContextPolicy.anchor_tokens <gravity_core.context.policy.ContextPolicy.anchor_tokens>`
            (the anchors get nothing below about 1,000 tokens: the documents fill it). With
            ``users``, a function from the user id to that user's retriever.
        token_budget: the most tokens (cl100k) one tool answer takes.

    Returns:
        The four tools, as :data:`~gravity_core.serving.memory_tools.TOOL_SPECS` describes them to
        the model, in that order (:data:`TOOL_NAMES`).

    Raises:
        ConfigurationError: both or neither of ``engine`` and ``users``, a ``token_budget`` below 1,
            or a ``retriever`` that does not fit (one ``BaseRetriever`` for many users would mix them).
    """
    memory = _Memory(engine, users, retriever, token_budget)

    def search_memory(query: str, question_date: str | None = None, runtime: Runtime = None) -> str:
        return _answer(
            lambda: memory.tools(runtime).search_tool(query, question_date, memory.documents(runtime))
        )

    def entity_profile(name: str, runtime: Runtime = None) -> str:
        return _answer(lambda: memory.tools(runtime).profile(name))

    def timeline(
        person: str | None = None,
        start: str | None = None,
        end: str | None = None,
        limit: int = 20,
        runtime: Runtime = None,
    ) -> str:
        return _answer(lambda: memory.tools(runtime).timeline_tool(person, start, end, limit))

    def topic_arc(topic: str, runtime: Runtime = None) -> str:
        return _answer(lambda: memory.tools(runtime).topic_arc(topic))

    functions = {f.__name__: f for f in (search_memory, entity_profile, timeline, topic_arc)}
    return [
        StructuredTool.from_function(
            functions[spec.name],
            name=spec.name,
            description=spec.description,
            args_schema=spec.arguments,
            handle_tool_error=True,
            handle_validation_error=_invalid_arguments,
        )
        for spec in TOOL_SPECS
    ]
