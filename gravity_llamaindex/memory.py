"""A memory block for LlamaIndex ``Memory``: the anchors for the latest user message."""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.memory import BaseMemoryBlock

from gravity_core.serving.users import UserKBs, check_user_id
from gravity_llamaindex.provider import AnchorProvider, EngineLike, as_provider

__all__ = ["GravityMemoryBlock", "latest_user_text"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


def latest_user_text(messages: list[ChatMessage] | None) -> str:
    """The text of the last user message with text in ``messages`` (``""`` if there is none)."""
    for message in reversed(messages or []):
        if message.role == MessageRole.USER and (message.content or "").strip():
            return (message.content or "").strip()
    return ""


class GravityMemoryBlock(BaseMemoryBlock[str]):
    """Serves GRAVITY's anchor blocks to chat engines and agents through LlamaIndex ``Memory``.

    On each ``Memory.aget`` the block answers the latest user message (the ``input`` passed to
    ``aget``, else the last user turn of the history) with ``AnchorContext.text``: the priority
    instruction and the topic, entity and event blocks. ``Memory`` renders it inside
    ``<memory><gravity>...</gravity></memory>`` in the system message.

    Writes are a no-op, on purpose: ``Memory`` passes a block only the messages it flushes out of
    short-term memory, which is neither every turn nor in time for the next question, and GRAVITY's
    build works on batches of turns (one extraction per ~40 turns). Build the KB out of band from
    the stored history with :func:`~gravity_llamaindex.build_kb_from_chat_messages`; an engine made
    with ``GravityEngine.from_dir`` on that folder follows it, so the block serves the new anchors
    without being made again. ``accept_short_term_memory`` is therefore off by default.

    **Many users.** ``Memory`` hands a block no query bundle, so with ``users=`` the user is named
    by ``user_id`` (a ``Memory`` usually belongs to one user's session), or per call by the
    ``user_id`` keyword of ``Memory.aget(..., user_id=...)``, which wins.

    Args:
        engine: a GRAVITY engine, or an :class:`~gravity_llamaindex.AnchorProvider`; not together
            with ``users``.
        users: the KBs of many users (:class:`~gravity_core.serving.users.UserKBs`); not together with
            ``engine``.
        user_id: with ``users``, the user whose anchors the block serves (unless a call names one).
        name: the block's name, also its tag in the memory template.
        priority: ``Memory``'s truncation priority (0 = never truncated; the injection already fits
            the engine's token budget).
        **kwargs: other ``BaseMemoryBlock`` fields (``description``, ``accept_short_term_memory``).

    Raises:
        ConfigurationError: both or neither of ``engine`` and ``users``, or a ``user_id`` that
            cannot name a user; at a call, with ``users``: no user named.

    Example:
        ```python
        memory = Memory.from_defaults(session_id="maya", memory_blocks=[GravityMemoryBlock(engine)])
        block = GravityMemoryBlock(users=kbs, user_id="maya")
        ```
    """

    name: str = Field(default="gravity", description="The name of the memory block.")
    accept_short_term_memory: bool = Field(
        default=False, description="GRAVITY ignores writes; the KB is built out of band."
    )
    _provider: AnchorProvider = PrivateAttr()
    _user_id: str | None = PrivateAttr(default=None)

    def __init__(
        self,
        engine: EngineLike | None = None,
        *,
        users: UserKBs | None = None,
        user_id: str | None = None,
        name: str = "gravity",
        priority: int = 0,
        **kwargs: Any,
    ) -> None:
        provider = as_provider(engine, users=users)
        if user_id is not None:
            check_user_id(user_id)
        super().__init__(name=name, priority=priority, **kwargs)
        self._provider = provider
        self._user_id = user_id

    @property
    def provider(self) -> AnchorProvider:
        """Where the anchors come from."""
        return self._provider

    @property
    def user_id(self) -> str | None:
        """The user served when a call names none (with ``users=``)."""
        return self._user_id

    @dispatcher.span
    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        question = latest_user_text(messages)
        if not question:
            return ""
        user_id = block_kwargs.get("user_id", self._user_id)
        return (await self._provider.aget(question, user_id=user_id)).text

    async def _aput(self, messages: list[ChatMessage]) -> None:
        logger.debug(
            "GravityMemoryBlock ignores %d flushed messages (the KB is built out of band)", len(messages)
        )
