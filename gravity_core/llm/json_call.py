"""Ask a chat model for JSON that fills a pydantic model, re-asking a bounded number of times."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gravity_core.errors import ConfigurationError, GravityError, UnexpectedModelOutput
from gravity_core.llm.base import ChatModel, Message, StructuredChatModel
from gravity_core.llm.cache import ResponseCache
from gravity_core.llm.retry import as_provider_error
from gravity_core.llm.text import answer_text, clean_text, clean_value

__all__ = ["REASK_TEMPLATE", "call_json", "extract_json", "parse_json_answer"]

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

REASK_TEMPLATE = (
    "Your previous answer could not be used. {error}\n"
    "Answer again with only the corrected JSON object, following the JSON schema given above, "
    "and no other text."
)
"""The user message appended after an unusable answer; ``{error}`` says what was wrong."""

_MAX_ERRORS_SHOWN = 8


@dataclass(frozen=True)
class _Scan:
    objects: list[tuple[dict[str, Any], int]]  # decoded objects with the length of their text
    parse_error: str | None  # why the object at the first '{' could not be decoded, if it could not


def _describe_decode_error(exc: json.JSONDecodeError, text: str) -> str:
    truncated = exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip())
    if truncated:
        return f"The JSON object is incomplete, as if cut off ({exc.msg} at line {exc.lineno})."
    return f"The JSON is invalid: {exc.msg} at line {exc.lineno} column {exc.colno}."


def _scan(text: str) -> _Scan:
    # strict=False lets raw newlines inside strings through, a common slip of models.
    decoder = json.JSONDecoder(strict=False)
    objects: list[tuple[dict[str, Any], int]] = []
    parse_error: str | None = None
    pos = text.find("{")
    while pos != -1:
        try:
            value, end = decoder.raw_decode(text, pos)
        except RecursionError:
            # Hostile or runaway nesting: every later '{' is inside it, so stop here.
            if parse_error is None and not objects:
                parse_error = "The JSON is nested too deeply to read."
            break
        except json.JSONDecodeError as exc:
            if parse_error is None and not objects:
                parse_error = _describe_decode_error(exc, text)
            if exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip()):
                break  # everything after this '{' is inside an object that never closes
            pos = text.find("{", pos + 1)
            continue
        if isinstance(value, dict):
            objects.append((value, end - pos))
        # Objects nested in one that decoded are parts of it, never the answer.
        pos = text.find("{", end)
    return _Scan(objects=objects, parse_error=parse_error)


def extract_json(text: str) -> dict[str, Any]:
    """The first JSON object in a model's answer.

    Tolerates code fences and prose around the object: decoding starts at each ``{`` in turn
    (with :meth:`json.JSONDecoder.raw_decode`) until one yields an object.

    Raises:
        ValueError: the text holds no decodable JSON object; the message says why.
    """
    scan = _scan(text)
    if scan.objects:
        return scan.objects[0][0]
    raise ValueError(scan.parse_error or _no_object_message(text))


def _no_object_message(text: str) -> str:
    return "The answer is empty." if not text.strip() else "The answer contains no JSON object."


def _describe_validation_error(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    parts = [
        f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
        for err in errors[:_MAX_ERRORS_SHOWN]
    ]
    if len(errors) > _MAX_ERRORS_SHOWN:
        parts.append(f"... and {len(errors) - _MAX_ERRORS_SHOWN} more")
    return "The JSON does not match the schema: " + "; ".join(parts) + "."


def parse_json_answer(text: str, response_model: type[T]) -> T:
    r"""Parse a model's answer into ``response_model``.

    Every JSON object found in the text is tried, in order; the first that validates wins. Its
    strings are cleaned first (:func:`~gravity_core.llm.text.clean_value`): a JSON escape such as
    ``"\ud800"`` decodes to a lone surrogate, which could never be stored or hashed.

    Raises:
        ValueError: no object validates; the message explains the problem in words meant for
            the model (it is sent back verbatim on a re-ask).
    """
    scan = _scan(text)
    validation_errors: list[tuple[int, ValidationError]] = []
    for obj, size in scan.objects:
        try:
            return response_model.model_validate(clean_value(obj))
        except ValidationError as exc:
            validation_errors.append((size, exc))
    problems: list[str] = []
    if scan.parse_error is not None:
        problems.append(scan.parse_error)
    if validation_errors:
        # Report on the largest object: it is the one most likely meant as the answer.
        _, largest = max(validation_errors, key=lambda item: item[0])
        problems.append(_describe_validation_error(largest))
    raise ValueError(" ".join(problems) or _no_object_message(text))


def _complete(
    model: ChatModel,
    messages: Sequence[Message],
    cache: ResponseCache | None,
    response_model: type[BaseModel],
) -> str:
    """The model's answer as clean text (cached); any exception of the model is a GravityError.

    Raises:
        UnexpectedModelOutput: the model could not read its own answer (see :func:`call_json`).
        ProviderError: anything else the model raised that is not a GravityError.
    """
    if cache is not None:
        cached = cache.get(model.model_name, messages)
        if cached is not None:
            return cached
    try:
        if isinstance(model, StructuredChatModel):
            answer: object = model.complete_structured(messages, response_model)
        else:
            answer = model.complete(messages)
    except GravityError:
        raise
    except Exception as exc:
        raise as_provider_error(exc, model.model_name) from exc
    completion = answer_text(answer, model.model_name)
    if cache is not None:
        cache.put(model.model_name, messages, completion)
    return completion


def call_json(
    model: ChatModel,
    messages: Sequence[Message],
    response_model: type[T],
    *,
    max_attempts: int = 3,
    cache: ResponseCache | None = None,
) -> tuple[T, str]:
    """Ask ``model`` and parse its answer into ``response_model``, re-asking on bad output.

    On an answer that is not valid JSON for ``response_model``, the answer is appended as an
    assistant message, followed by a user message stating the error (:data:`REASK_TEMPLATE`),
    and the model is asked again, up to ``max_attempts`` requests in total. Every request goes
    through ``cache`` when one is given, re-asks included (their key covers the whole
    conversation), so a rebuild replays the same answers. An exchange that ends without a usable
    answer is removed from the cache again, so asking later (e.g. ``gravity build --retry-failed``)
    reaches the model instead of replaying the failure. A model that implements
    :class:`~gravity_core.llm.base.StructuredChatModel` is held to ``response_model`` by its own
    means (tool calling, JSON mode) through ``complete_structured``; its answer is validated the same way.
    A model that raises :class:`~gravity_core.errors.UnexpectedModelOutput` for one answer (an
    adapter whose structured output could not be read) counts as having given an unusable answer.

    Answers are cleaned before they are cached or parsed (:mod:`gravity_core.llm.text`: ``None``
    and ``bytes`` become text, lone surrogates and control characters go). Any exception the model
    raises that is not a :class:`~gravity_core.errors.GravityError` is raised as a
    :class:`~gravity_core.errors.ProviderError` naming the model.

    Args:
        model: the chat model.
        messages: the prompt.
        response_model: the pydantic model the answer must fill.
        max_attempts: how many requests at most, the first one included.
        cache: optional response cache.

    Returns:
        The parsed answer and the raw completion it came from.

    Raises:
        UnexpectedModelOutput: no answer was usable after ``max_attempts`` requests.
        ProviderError: the model failed (see :func:`~gravity_core.llm.retry.as_provider_error`).
        ConfigurationError: ``max_attempts`` is below 1.
    """
    if max_attempts < 1:
        raise ConfigurationError(f"max_attempts must be at least 1, got {max_attempts}")
    conversation: list[Message] = list(messages)
    asked: list[list[Message]] = []
    completion = ""
    error = ""
    for attempt in range(1, max_attempts + 1):
        asked.append(list(conversation))
        try:
            completion = _complete(model, conversation, cache, response_model)
        except UnexpectedModelOutput as exc:
            completion, error = clean_text(exc.last_completion), exc.reason
        else:
            try:
                return parse_json_answer(completion, response_model), completion
            except ValueError as exc:
                error = str(exc)
        if attempt < max_attempts:
            logger.warning(
                "%s gave an unusable answer for %s (attempt %d of %d), asking again: %s",
                model.model_name,
                response_model.__name__,
                attempt,
                max_attempts,
                error,
            )
            conversation.append({"role": "assistant", "content": completion})
            conversation.append({"role": "user", "content": REASK_TEMPLATE.format(error=error)})
    if cache is not None:
        for request in asked:
            cache.discard(model.model_name, request)
    raise UnexpectedModelOutput(
        f"{model.model_name} did not answer with valid JSON for {response_model.__name__}: {error}",
        last_completion=completion,
        n_attempts=max_attempts,
    )
