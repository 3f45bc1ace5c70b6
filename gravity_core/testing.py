"""Fakes for testing code that uses GRAVITY, without a real model or network.

``FakeChatModel`` answers from a script (an exception in the script is raised, to stand for a
provider fault); ``RecordedModel`` answers by matching the prompt against recorded keys, so a
multi-batch build can be replayed from hand-written JSON.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from gravity_core.errors import ConfigurationError, GravityError, InputDataError
from gravity_core.llm.base import Message

__all__ = ["FakeChatModel", "FakeModelError", "RecordedModel", "recorded_model_from_file"]


class FakeModelError(GravityError):
    """A fake model was asked something its script does not cover."""

    __test__ = False


def _copy(messages: Sequence[Message]) -> list[Message]:
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def _preview(messages: Sequence[Message], limit: int = 200) -> str:
    last = messages[-1]["content"] if messages else ""
    return last if len(last) <= limit else last[:limit] + "..."


class FakeChatModel:
    """A :class:`~gravity_core.llm.base.ChatModel` with scripted answers.

    Args:
        responses: the answers, returned in order, or a function from the messages to the answer.
            An exception in the list is raised instead (e.g. a rate-limit error, to test retries).
        model_name: the name it reports (part of cache keys).

    Attributes:
        calls: the message lists it was asked, in order.

    Raises:
        FakeModelError: from :meth:`complete` once a list of answers is used up.
    """

    __test__ = False

    def __init__(
        self,
        responses: Sequence[str | BaseException] | Callable[[Sequence[Message]], str],
        model_name: str = "fake",
    ) -> None:
        self._responses = responses if callable(responses) else list(responses)
        self._model_name = model_name
        self._lock = threading.Lock()
        self.calls: list[list[Message]] = []

    @property
    def model_name(self) -> str:
        """The name given at construction."""
        return self._model_name

    def complete(self, messages: Sequence[Message]) -> str:
        """The next scripted answer (or the function's answer); a scripted exception is raised."""
        with self._lock:
            self.calls.append(_copy(messages))
            index = len(self.calls) - 1
        if callable(self._responses):
            return self._responses(messages)
        if index >= len(self._responses):
            raise FakeModelError(
                f"FakeChatModel {self._model_name!r} has {len(self._responses)} scripted answer(s) "
                f"but was asked a request #{index + 1}; last message: {_preview(messages)!r}"
            )
        answer = self._responses[index]
        if isinstance(answer, BaseException):
            raise answer
        return answer


RecordedKey = str | tuple[str, ...]
"""A substring of the prompt, or several that must all appear."""


class RecordedModel:
    """A :class:`~gravity_core.llm.base.ChatModel` answering from recorded answers by prompt content.

    Each key is a substring (or a tuple of substrings that must all appear) of the request's
    messages; exactly one key must match. Since every GRAVITY prompt embeds its response model's
    JSON schema, the model's class name (``"EntityExtraction"``, ``"EventExtraction"``,
    ``"TopicExtraction"``, ``"FusedExtraction"``, ``"BatchSummary"``) selects the task, and an
    utterance id such as ``"[D1:1]"`` selects the batch::

        RecordedModel({("EntityExtraction", "[D1:1]"): entities_json, ...})

    A value that is a list gives successive answers for repeated requests matching the key
    (useful to script a re-ask); a string is returned every time.

    Args:
        answers: key -> answer (or list of answers).
        model_name: the name it reports (part of cache keys).

    Attributes:
        calls: the message lists it was asked, in order.

    Raises:
        ConfigurationError: a key or an answer that is not a string or strings.
    """

    __test__ = False

    def __init__(
        self,
        answers: Mapping[RecordedKey, str | Sequence[str]],
        model_name: str = "recorded",
    ) -> None:
        self._answers: dict[tuple[str, ...], str | list[str]] = {}
        for key, value in answers.items():
            parts = (key,) if isinstance(key, str) else tuple(key)
            if not parts or not all(isinstance(p, str) for p in parts):
                raise ConfigurationError(f"RecordedModel: a key must be a string or strings, got {key!r}")
            if not isinstance(value, str) and not (
                isinstance(value, Sequence) and all(isinstance(v, str) for v in value)
            ):
                raise ConfigurationError(
                    f"RecordedModel: the answer for {key!r} must be a string or strings, got {value!r}"[:200]
                )
            self._answers[parts] = value if isinstance(value, str) else list(value)
        self._model_name = model_name
        self._used: dict[tuple[str, ...], int] = {}
        self._lock = threading.Lock()
        self.calls: list[list[Message]] = []

    @property
    def model_name(self) -> str:
        """The name given at construction."""
        return self._model_name

    def complete(self, messages: Sequence[Message]) -> str:
        """The recorded answer whose key matches ``messages``.

        Raises:
            FakeModelError: no key or several keys match, or a list of answers is used up.
        """
        with self._lock:
            self.calls.append(_copy(messages))
        prompt = "\n".join(m["content"] for m in messages)
        matches = [key for key in self._answers if all(part in prompt for part in key)]
        if len(matches) != 1:
            found = "no recorded key matches" if not matches else f"several keys match: {matches}"
            raise FakeModelError(f"RecordedModel: {found}; last message: {_preview(messages)!r}")
        key = matches[0]
        value = self._answers[key]
        if isinstance(value, str):
            return value
        with self._lock:
            index = self._used.get(key, 0)
            self._used[key] = index + 1
        if index >= len(value):
            raise FakeModelError(f"RecordedModel: the {len(value)} answer(s) recorded for {key} are used up")
        return value[index]


def recorded_model_from_file(path: str) -> RecordedModel:
    """A :class:`RecordedModel` from a JSON file, for ``gravity build --model recorded:PATH``.

    The file holds a list of ``{"match": [substring, ...], "answer": text or [texts]}``; ``match``
    may also be a single substring.

    Raises:
        InputDataError: the file is missing, not JSON, or a record is not of that shape (the
            message names the file, the record as ``#n`` from 1, and the field).
    """
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            entries = json.load(handle)
    except (OSError, ValueError, RecursionError) as exc:
        raise InputDataError(f"cannot read recorded answers: {exc}", path=path) from exc
    if not isinstance(entries, list):
        raise InputDataError(f"expected a list of {_SHAPE} objects, got {_kind(entries)}", path=path)
    answers: dict[RecordedKey, str | Sequence[str]] = {}
    first_seen: dict[tuple[str, ...], int] = {}
    for number, entry in enumerate(entries, start=1):
        record = f"#{number}"
        if not isinstance(entry, dict):
            raise InputDataError(f"expected an object {_SHAPE}, got {_kind(entry)}", path=path, record=record)
        for name in ("match", "answer"):
            if name not in entry:
                raise InputDataError(f"is missing (expected {_SHAPE})", path=path, record=record, field=name)
        match, answer = entry["match"], entry["answer"]
        if isinstance(match, str):
            match = [match]
        if not _strings(match):
            raise InputDataError(
                f"must be a non-empty list of strings, got {_kind(entry['match'])}",
                path=path,
                record=record,
                field="match",
            )
        if not isinstance(answer, str) and not _strings(answer):
            raise InputDataError(
                f"must be a string or a non-empty list of strings, got {_kind(answer)}",
                path=path,
                record=record,
                field="answer",
            )
        key = tuple(match)
        if key in first_seen:
            raise InputDataError(
                f"repeats the match of record #{first_seen[key]}: {list(key)}",
                path=path,
                record=record,
                field="match",
            )
        first_seen[key] = number
        answers[key] = answer
    return RecordedModel(answers, model_name=f"recorded:{path}")


_SHAPE = '{"match": [...], "answer": ...}'


def _strings(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def _kind(value: object) -> str:
    shown = _json_preview(value)
    return f"{type(value).__name__} {shown}"


def _json_preview(value: object, limit: int = 60) -> str:
    """``value`` as short JSON text, for an error message."""
    import json

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
