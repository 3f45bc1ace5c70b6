"""The minimal model protocol: messages in, text out.

Adapters for LangChain chat models, LlamaIndex LLMs and OpenAI live in the integration packages;
gravity_core only needs this.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, TypedDict, runtime_checkable

from pydantic import BaseModel

__all__ = ["ChatModel", "Message", "StructuredChatModel"]


class Message(TypedDict):
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    content: str


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers a list of messages with text."""

    @property
    def model_name(self) -> str:
        """Identifier used in the response cache key."""
        ...

    def complete(self, messages: Sequence[Message]) -> str:
        """Return the model's answer to ``messages``."""
        ...


@runtime_checkable
class StructuredChatModel(ChatModel, Protocol):
    """A chat model that can be held to a response schema (tool calling, JSON mode...).

    GRAVITY still validates the answer and re-asks on errors, so the method returns JSON text.
    """

    def complete_structured(self, messages: Sequence[Message], response_model: type[BaseModel]) -> str:
        """Return the model's answer to ``messages`` as JSON text for ``response_model``."""
        ...
