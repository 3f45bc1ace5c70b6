"""Any LangChain chat model as GRAVITY's extraction model; the factory behind ``--model openai:NAME``."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel, ValidationError

from gravity_core.errors import GravityError, MissingDependencyError, ProviderError, UnexpectedModelOutput
from gravity_core.llm.base import Message
from gravity_core.llm.faults import is_provider_fault, status_code
from gravity_core.llm.retry import as_provider_error

__all__ = ["OPENAI_TIMEOUT_S", "LangChainChatModel", "openai_chat_model"]

logger = logging.getLogger(__name__)


def _to_langchain(messages: Sequence[Message]) -> list[BaseMessage]:
    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return [kinds[m["role"]](content=m["content"]) for m in messages]


# What structured output raises for an answer it cannot read (the model's fault, not the provider's):
# openai's LengthFinishReasonError / ContentFilterFinishReasonError, langchain-core's refusal error.
# Matched by class name (and bases) so no SDK is imported.
_UNREADABLE_ANSWER_NAMES = frozenset(
    {"LengthFinishReasonError", "ContentFilterFinishReasonError", "ModelRefusalError"}
)


def _is_unreadable_answer(exc: BaseException) -> bool:
    if isinstance(exc, ValidationError | OutputParserException | ValueError) and not is_provider_fault(exc):
        return True
    return any(cls.__name__ in _UNREADABLE_ANSWER_NAMES for cls in type(exc).__mro__)


def _content_of(completion: Any) -> str | None:
    """The first choice's text of an OpenAI-style ``ChatCompletion`` (or its JSON), if any."""
    choices = (
        completion.get("choices") if isinstance(completion, dict) else getattr(completion, "choices", None)
    )
    if not isinstance(choices, list) or not choices:
        return None
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else getattr(first, "message", None)
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    return content if isinstance(content, str) else None


def _raw_answer(exc: BaseException) -> str | None:
    """The text of the answer a structured-output call failed to read, when the error carries it.

    From, in turn: the completion an openai ``LengthFinishReasonError`` holds; the text an
    ``OutputParserException`` kept; the input of a pydantic ``json_invalid`` error (the whole
    answer); the body of the HTTP response the error was raised on (langchain-openai attaches it).
    """
    content = _content_of(getattr(exc, "completion", None))
    if content is not None:
        return content
    if isinstance(exc, OutputParserException) and isinstance(exc.llm_output, str):
        return exc.llm_output
    raw_message = getattr(exc, "raw_message", None)
    if isinstance(raw_message, BaseMessage):
        return raw_message.text
    if isinstance(exc, ValidationError):
        for error in exc.errors(include_url=False):
            if error["type"] == "json_invalid" and isinstance(error.get("input"), str):
                return str(error["input"])
    response = getattr(exc, "response", None)
    read_body = getattr(response, "json", None)
    if getattr(response, "status_code", None) == 200 and callable(read_body):
        try:
            return _content_of(read_body())
        except Exception:  # noqa: BLE001 - a body that is not JSON carries no answer
            return None
    return None


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
        """Send the messages to the chat model and return its text.

        Raises:
            ProviderError: anything the chat model raised: transient faults (rate limit, timeout,
                connection, 5xx) are retryable, the rest (a rejected key, an unknown model, a
                bad request, a bug) not, and the message says what to check.
        """
        answer = self._invoke(self.model, messages)
        return answer.text if isinstance(answer, BaseMessage) else str(answer)

    def complete_structured(self, messages: Sequence[Message], response_model: type[BaseModel]) -> str:
        """Ask through ``with_structured_output(response_model)`` when the model supports it.

        Returns JSON text for GRAVITY to validate: the parsed object, else the raw tool-call
        arguments or text (so a bad answer is re-asked like any other). An answer the structured
        output could not read (not JSON, cut off at the length limit, a refusal) is returned as
        its raw text too, or, when the error does not carry it, raised as
        :class:`~gravity_core.errors.UnexpectedModelOutput` (which ``call_json`` re-asks). Models
        without structured output (``NotImplementedError``) are asked with :meth:`complete`.

        Raises:
            UnexpectedModelOutput: an unreadable answer whose text is unknown.
            ProviderError: as :meth:`complete`.
        """
        if response_model not in self._structured:
            try:
                self._structured[response_model] = self.model.with_structured_output(
                    response_model, include_raw=True
                )
            except NotImplementedError:
                self._structured[response_model] = None
            except Exception as exc:  # noqa: BLE001 - e.g. a schema this provider's mode refuses
                logger.warning(
                    "%s cannot be held to %s (%s: %s); asking for plain text",
                    self._name,
                    response_model.__name__,
                    type(exc).__name__,
                    exc,
                )
                self._structured[response_model] = None
        structured = self._structured[response_model]
        if structured is None:
            return self.complete(messages)
        try:
            result = self._invoke(structured, messages, answer_errors=True)
        except _UnreadableAnswer as unreadable:
            error = unreadable.error
            raw = _raw_answer(error)
            if raw is not None:
                return raw  # GRAVITY's own parser says what is wrong with it, and re-asks
            raise UnexpectedModelOutput(
                f"{self._name} gave a structured answer that could not be read: "
                f"{type(error).__name__}: {error}",
                last_completion="",
                n_attempts=1,
            ) from error
        parsed = result.get("parsed") if isinstance(result, dict) else None
        if isinstance(parsed, BaseModel):
            return parsed.model_dump_json()
        raw = result.get("raw") if isinstance(result, dict) else result
        if isinstance(raw, AIMessage) and raw.tool_calls:
            return json.dumps(raw.tool_calls[0]["args"])
        return raw.text if isinstance(raw, BaseMessage) else str(raw)

    def _invoke(
        self, runnable: Runnable[Any, Any], messages: Sequence[Message], *, answer_errors: bool = False
    ) -> Any:
        try:
            return runnable.invoke(_to_langchain(messages))
        except GravityError:
            raise
        except Exception as exc:
            if is_provider_fault(exc):
                raise ProviderError(str(exc), provider=self._name, status_code=status_code(exc)) from exc
            if answer_errors and _is_unreadable_answer(exc) and not _has_error_status(exc):
                raise _UnreadableAnswer(exc) from exc
            raise as_provider_error(exc, self._name) from exc


class _UnreadableAnswer(Exception):
    """Internal: the structured call got an answer but could not read it."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _has_error_status(exc: BaseException) -> bool:
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and status >= 400


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
