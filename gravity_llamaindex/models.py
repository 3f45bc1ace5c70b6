"""Any LlamaIndex LLM as GRAVITY's extraction model (messages in, text out)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import LLM

from gravity_core.errors import ConfigurationError, GravityError
from gravity_core.llm.base import Message
from gravity_core.llm.faults import provider_faults_as_errors
from gravity_core.llm.retry import as_provider_error

__all__ = ["LlamaIndexChatModel"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

_ROLES = {"system": MessageRole.SYSTEM, "user": MessageRole.USER, "assistant": MessageRole.ASSISTANT}


class LlamaIndexChatModel:
    """Wraps a LlamaIndex ``LLM`` in GRAVITY's :class:`~gravity_core.llm.base.ChatModel` protocol.

    ``complete`` sends the messages with ``llm.chat`` (completion-only LLMs get LlamaIndex's own
    messages-to-prompt conversion) and returns the reply's text. GRAVITY parses the JSON itself, so
    no structured-output support is needed from the model.

    Args:
        llm: any LlamaIndex LLM (``OpenAI``, ``Ollama``, ``MockLLM``...).
        name: the name used in GRAVITY's response-cache key; defaults to the LLM's model name.

    Example:
        ```python
        from gravity_core.extract.llm import LLMExtractor

        extractor = LLMExtractor(LlamaIndexChatModel(llm), fused=True)
        ```
    """

    def __init__(self, llm: LLM, name: str | None = None) -> None:
        if not isinstance(llm, LLM):
            raise ConfigurationError(f"expected a LlamaIndex LLM, got {type(llm).__name__}")
        self.llm = llm
        model = getattr(llm.metadata, "model_name", "") or ""
        self._name = name or f"llamaindex:{type(llm).__name__}:{model or 'unknown'}"

    def __repr__(self) -> str:
        return f"LlamaIndexChatModel({self._name!r})"

    @property
    def model_name(self) -> str:
        """Identifier used in the response cache key."""
        return self._name

    @dispatcher.span
    def complete(self, messages: Sequence[Message]) -> str:
        """Send ``messages`` to the LLM and return its text.

        Raises:
            ConfigurationError: a message has an unknown role.
            ProviderError: anything the LLM raised: transient faults (rate limit, timeout,
                connection) are retryable, the rest (a rejected key, an unknown model, a bug)
                not, and the message says what to check.
        """
        chat = []
        for message in messages:
            role = _ROLES.get(message["role"])
            if role is None:
                raise ConfigurationError(f"unknown message role {message['role']!r}")
            chat.append(ChatMessage(role=role, content=message["content"]))
        try:
            with provider_faults_as_errors(self._name):
                response = self.llm.chat(chat)
        except GravityError:
            raise
        except Exception as exc:
            raise as_provider_error(exc, self._name) from exc
        return response.message.content or ""
