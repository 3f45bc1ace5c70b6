"""Any LangChain chat model as GRAVITY's extraction model; the factory behind ``--model openai:NAME``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from gravity_core.errors import MissingDependencyError, ProviderError
from gravity_core.llm.base import Message
from gravity_langchain._errors import is_provider_fault

__all__ = ["LangChainChatModel", "openai_chat_model"]


def _to_langchain(messages: Sequence[Message]) -> list[BaseMessage]:
    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return [kinds[m["role"]](content=m["content"]) for m in messages]


class LangChainChatModel:
    """Wraps a LangChain ``BaseChatModel`` in GRAVITY's messages-in, text-out protocol.

    Args:
        model: any LangChain chat model (``ChatOpenAI``, a fake, a local model...).
        name: the name used in the response-cache key; defaults to the model's own name.
    """

    def __init__(self, model: BaseChatModel, name: str | None = None) -> None:
        self.model = model
        self._name = name or str(
            getattr(model, "model_name", None) or getattr(model, "model", None) or model.get_name()
        )

    @property
    def model_name(self) -> str:
        """Identifier used in the response cache key."""
        return self._name

    def complete(self, messages: Sequence[Message]) -> str:
        """Send the messages to the chat model and return its text."""
        try:
            answer: Any = self.model.invoke(_to_langchain(messages))
        except Exception as exc:
            if is_provider_fault(exc):
                raise ProviderError(
                    str(exc), provider=self._name, status_code=getattr(exc, "status_code", None)
                ) from exc
            raise
        return answer.text if isinstance(answer, BaseMessage) else str(answer)


def openai_chat_model(name: str) -> LangChainChatModel:
    """``ChatOpenAI(model=name, temperature=0)`` wrapped for GRAVITY (needs OPENAI_API_KEY)."""
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:
        raise MissingDependencyError("langchain-openai", "openai", "The OpenAI model provider") from exc
    return LangChainChatModel(ChatOpenAI(model=name, temperature=0), name=f"openai:{name}")
