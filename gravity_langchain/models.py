"""Any LangChain chat model as GRAVITY's extraction model; the factory behind ``--model openai:NAME``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel

from gravity_core.errors import MissingDependencyError, ProviderError
from gravity_core.llm.base import Message
from gravity_langchain._errors import is_provider_fault

__all__ = ["OPENAI_TIMEOUT_S", "LangChainChatModel", "openai_chat_model"]


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
        self._structured: dict[type[BaseModel], Runnable[Any, Any] | None] = {}
        self._name = name or str(
            getattr(model, "model_name", None) or getattr(model, "model", None) or model.get_name()
        )

    @property
    def model_name(self) -> str:
        """Identifier used in the response cache key."""
        return self._name

    def complete(self, messages: Sequence[Message]) -> str:
        """Send the messages to the chat model and return its text."""
        answer = self._invoke(self.model, messages)
        return answer.text if isinstance(answer, BaseMessage) else str(answer)

    def complete_structured(self, messages: Sequence[Message], response_model: type[BaseModel]) -> str:
        """Ask through ``with_structured_output(response_model)`` when the model supports it.

        Returns JSON text for GRAVITY to validate: the parsed object, else the raw tool-call
        arguments or text (so a bad answer is re-asked like any other). Models without structured
        output (``NotImplementedError``) are asked with :meth:`complete`.
        """
        if response_model not in self._structured:
            try:
                self._structured[response_model] = self.model.with_structured_output(
                    response_model, include_raw=True
                )
            except NotImplementedError:
                self._structured[response_model] = None
        structured = self._structured[response_model]
        if structured is None:
            return self.complete(messages)
        result = self._invoke(structured, messages)
        parsed = result.get("parsed") if isinstance(result, dict) else None
        if isinstance(parsed, BaseModel):
            return parsed.model_dump_json()
        raw = result.get("raw") if isinstance(result, dict) else result
        if isinstance(raw, AIMessage) and raw.tool_calls:
            return json.dumps(raw.tool_calls[0]["args"])
        return raw.text if isinstance(raw, BaseMessage) else str(raw)

    def _invoke(self, runnable: Runnable[Any, Any], messages: Sequence[Message]) -> Any:
        try:
            return runnable.invoke(_to_langchain(messages))
        except Exception as exc:
            if is_provider_fault(exc):
                raise ProviderError(
                    str(exc), provider=self._name, status_code=getattr(exc, "status_code", None)
                ) from exc
            raise


#: Seconds one OpenAI request may take before it fails as a timeout (and is retried).
OPENAI_TIMEOUT_S = 120.0


def openai_chat_model(name: str) -> LangChainChatModel:
    """``ChatOpenAI(model=name, temperature=0)`` wrapped for GRAVITY (needs OPENAI_API_KEY).

    The SDK's own retries are off (``max_retries=0``) and each request times out after
    :data:`OPENAI_TIMEOUT_S`: :func:`gravity_core.providers.load_chat_model` wraps the model in
    :class:`~gravity_core.llm.retry.RetryingChatModel`, whose policy is then the only one.
    """
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:
        raise MissingDependencyError("langchain-openai", "openai", "The OpenAI model provider") from exc
    chat = ChatOpenAI(model=name, temperature=0, max_retries=0, timeout=OPENAI_TIMEOUT_S)
    return LangChainChatModel(chat, name=f"openai:{name}")
