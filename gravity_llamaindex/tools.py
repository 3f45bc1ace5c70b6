"""GRAVITY's memory as tools of a LlamaIndex agent: search_memory, entity_profile, timeline, topic_arc.

Each tool wraps one :class:`~gravity_core.serving.memory_tools.MemoryTools` method, so its answer is
the escaped, budgeted text of GRAVITY's prompt blocks, and is offered to the model with the name,
description and argument schema of :data:`~gravity_core.serving.memory_tools.TOOL_SPECS` (the
LangChain tools use the same). A bad argument from the model raises
:class:`~gravity_core.errors.InputDataError` naming it; a LlamaIndex agent (``FunctionAgent``,
``AgentWorkflow``) hands the message back to the model as an error tool output and goes on. The
sync call runs in a worker thread when the agent calls the tool asynchronously (LlamaIndex's
``FunctionTool`` does this), so the scoring does not block the event loop.

**Many users.** A LlamaIndex agent has no per-call user, so with ``users=`` the tools are made for
one user (``user_id``), like :class:`~gravity_llamaindex.GravityMemoryBlock`: make them per session.

Example:
    ```python
    from llama_index.core.agent.workflow import FunctionAgent

    agent = FunctionAgent(tools=gravity_tools(engine), llm=llm, system_prompt="...")
    tools = gravity_tools(users=UserKBs("kbs"), user_id="u-17")  # one user's session
    ```
"""

from __future__ import annotations

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.tools import FunctionTool

from gravity_core.context.policy import placement_of
from gravity_core.errors import ConfigurationError
from gravity_core.query.engine import GravityEngine
from gravity_core.serving.memory_tools import (
    DEFAULT_TOOL_BUDGET,
    TOOL_NAMES,
    TOOL_SPECS,
    HostMemories,
    MemoryTools,
    MemoryToolsSource,
)
from gravity_core.serving.users import UserKBs, check_user_id
from gravity_llamaindex.per_user import UserRetriever, checked_retriever, retriever_of_user

__all__ = ["TOOL_NAMES", "gravity_tools"]


class _Memory:
    """Where a call's tools and host documents come from: the one engine, or the one user's KB."""

    def __init__(
        self,
        engine: GravityEngine | None,
        users: UserKBs | None,
        user_id: str | None,
        retriever: BaseRetriever | UserRetriever | None,
        token_budget: int,
    ) -> None:
        self._source = MemoryToolsSource(engine, users, token_budget=token_budget)
        if users is not None and user_id is None:
            raise ConfigurationError(
                "with users=, name the user whose memory the tools read: "
                "gravity_tools(users=..., user_id=...)"
            )
        if users is None and user_id is not None:
            raise ConfigurationError("user_id names a user of users=; an engine serves one KB")
        self._user_id = None if user_id is None else check_user_id(user_id)
        self._retriever: BaseRetriever | None = None
        self._user_retriever: UserRetriever | None = None
        if retriever is not None:
            self._retriever, self._user_retriever = checked_retriever(users is not None, retriever)

    def tools(self) -> MemoryTools:
        return self._source.tools(lambda: self._user_id)

    def documents(self) -> HostMemories | None:
        """The host's search, query -> texts with placements (``None`` without a retriever)."""
        retriever = self._retriever
        if self._user_retriever is not None:
            retriever = retriever_of_user(self._user_retriever, self._user_id)
        if retriever is None:
            return None
        found = retriever
        return lambda query: [
            (n.node.get_content(), placement_of(n.node.metadata)) for n in found.retrieve(query)
        ]


def gravity_tools(
    engine: GravityEngine | None = None,
    *,
    users: UserKBs | None = None,
    user_id: str | None = None,
    retriever: BaseRetriever | UserRetriever | None = None,
    token_budget: int = DEFAULT_TOOL_BUDGET,
) -> list[FunctionTool]:
    """GRAVITY's read-only memory tools for a LlamaIndex agent, named as :data:`TOOL_NAMES`.

    Args:
        engine: the engine over the KB (not together with ``users``).
        users: the KBs of many users; the tools read ``user_id``'s.
        user_id: with ``users``, the user whose memory the tools read.
        retriever: the host's own memory: ``search_memory`` then also returns its nodes' text for the
            query after the anchors, the budget shared by
            :meth:`ContextPolicy.anchor_tokens <gravity_core.context.policy.ContextPolicy.anchor_tokens>`
            (the anchors get nothing below about 1,000 tokens: the nodes fill it). With ``users``,
            a function from the user id to that user's retriever.
        token_budget: the most tokens (cl100k) one tool answer takes.

    Returns:
        The four tools, in the order of :data:`TOOL_NAMES`.

    Raises:
        ConfigurationError: both or neither of ``engine`` and ``users``; ``users`` without a
            (good) ``user_id``, or a ``user_id`` without ``users``; a ``token_budget`` below 1; a
            ``retriever`` that does not fit (one ``BaseRetriever`` for many users would mix them).
    """
    memory = _Memory(engine, users, user_id, retriever, token_budget)

    def search_memory(query: str, question_date: str | None = None) -> str:
        return memory.tools().search_tool(query, question_date, memory.documents())

    def entity_profile(name: str) -> str:
        return memory.tools().profile(name)

    def timeline(
        person: str | None = None, start: str | None = None, end: str | None = None, limit: int = 20
    ) -> str:
        return memory.tools().timeline_tool(person, start, end, limit)

    def topic_arc(topic: str) -> str:
        return memory.tools().topic_arc(topic)

    functions = {f.__name__: f for f in (search_memory, entity_profile, timeline, topic_arc)}
    return [
        FunctionTool.from_defaults(
            functions[spec.name], name=spec.name, description=spec.description, fn_schema=spec.arguments
        )
        for spec in TOOL_SPECS
    ]
