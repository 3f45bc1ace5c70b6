"""A memory block for LlamaIndex ``Memory``: the anchors for the latest user message."""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.memory import BaseMemoryBlock

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

    Args:
        engine: a GRAVITY engine, or an :class:`~gravity_llamaindex.AnchorProvider`.
        name: the block's name, also its tag in the memory template.
        priority: ``Memory``'s truncation priority (0 = never truncated; the injection already fits
            the engine's token budget).
        **kwargs: other ``BaseMemoryBlock`` fields (``description``, ``accept_short_term_memory``).

    Example:
        ```python
        memory = Memory.from_defaults(session_id="maya", memory_blocks=[GravityMemoryBlock(engine)])
        ```
    """

    name: str = Field(default="gravity", description="The name of the memory block.")
    accept_short_term_memory: bool = Field(
        default=False, description="GRAVITY ignores writes; the KB is built out of band."
    )
    _provider: AnchorProvider = PrivateAttr()

    def __init__(
        self, engine: EngineLike, *, name: str = "gravity", priority: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(name=name, priority=priority, **kwargs)
        self._provider = as_provider(engine)

    @property
    def provider(self) -> AnchorProvider:
        """Where the anchors come from."""
        return self._provider

    @dispatcher.span
    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        question = latest_user_text(messages)
        if not question:
            return ""
        return (await self._provider.aget(question)).text

    async def _aput(self, messages: list[ChatMessage]) -> None:
        logger.debug(
            "GravityMemoryBlock ignores %d flushed messages (the KB is built out of band)", len(messages)
        )
