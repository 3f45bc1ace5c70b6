"""Conversation loaders: files in, ``list[Utterance]`` out, in conversation order.

Formats: LoCoMo (:func:`load_locomo`), LongMemEval (:func:`load_longmemeval`) and plain utterance
files in JSON or JSON Lines (:func:`load_utterances`). :func:`load_conversation` picks the format
from the file's content. :func:`read_timestamp` reads the timestamp of a chat message for the
framework adapters. A malformed file raises :class:`~gravity_core.errors.InputDataError`
naming the file, the record and the field.
"""

from __future__ import annotations

import logging
from typing import Literal, get_args

from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.loaders._common import (
    DEFAULT_MAX_INPUT_BYTES,
    Document,
    PathLike,
    brief_repr,
    check_max_bytes,
    read_document,
)
from gravity_core.loaders.locomo import load_locomo, locomo_from_document, locomo_sample_ids
from gravity_core.loaders.longmemeval import load_longmemeval, longmemeval_from_document
from gravity_core.loaders.timestamps import epoch_timestamp, read_timestamp
from gravity_core.loaders.utterances import load_utterances, utterances_from_document
from gravity_core.schema import Utterance

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "ConversationFormat",
    "load_conversation",
    "load_locomo",
    "load_longmemeval",
    "load_utterances",
    "epoch_timestamp",
    "locomo_sample_ids",
    "read_timestamp",
]

logger = logging.getLogger(__name__)

ConversationFormat = Literal["auto", "locomo", "longmemeval", "utterances"]


def _detect(document: Document) -> ConversationFormat:
    value = document.value
    first = value[0] if isinstance(value, list) and value else value
    if isinstance(first, dict):
        if "conversation" in first:
            return "locomo"
        if "haystack_sessions" in first:
            return "longmemeval"
    return "utterances"


def load_conversation(
    path: PathLike,
    *,
    sample: str | None = None,
    fmt: ConversationFormat = "auto",
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES,
) -> list[Utterance]:
    """Load a conversation file in any supported format.

    With ``fmt="auto"`` the format comes from the content: a list of objects with
    ``"conversation"`` is LoCoMo, objects with ``"haystack_sessions"`` are LongMemEval, anything
    else is read as plain utterances.

    Args:
        path: the conversation file.
        sample: the sample to load: a LoCoMo ``sample_id`` or a LongMemEval ``question_id``
            (see :func:`load_locomo` and :func:`load_longmemeval` for the ids it gives).
            Plain utterance files have no samples.
        fmt: the format, or ``"auto"`` to detect it.
        max_bytes: the most bytes read from the file (default :data:`DEFAULT_MAX_INPUT_BYTES`,
            512 MiB); at most ``max_bytes + 1`` are read, so an endless stream stops too.

    Returns:
        The utterances in conversation order.

    Raises:
        ConfigurationError: ``fmt`` is unknown, ``sample`` is given for a plain utterance file, or
            ``max_bytes`` is not a positive integer.
        InputDataError: the file is unreadable, larger than ``max_bytes`` or malformed, has no
            such sample, or holds no utterance.
    """
    if fmt not in get_args(ConversationFormat):
        raise ConfigurationError(
            f"unknown conversation format {fmt!r}; expected one of {', '.join(get_args(ConversationFormat))}"
        )
    if fmt == "utterances" and sample is not None:
        raise ConfigurationError(_no_samples_message(path, sample))
    check_max_bytes(max_bytes)
    document = read_document(path, max_bytes=max_bytes)
    kind = _detect(document) if fmt == "auto" else fmt
    logger.debug("loading %s as %s", document.path, kind)
    if kind == "locomo":
        utterances = locomo_from_document(document, sample)
    elif kind == "longmemeval":
        utterances = longmemeval_from_document(document, sample)
    elif sample is not None:
        raise ConfigurationError(_no_samples_message(path, sample))
    else:
        utterances = utterances_from_document(document)
    if not utterances:
        what = f"sample {brief_repr(sample)}" if sample is not None else "the file"
        message = f"{what} holds no utterance (empty sessions or haystack)"
        raise InputDataError(message, path=str(document.path))
    return utterances


def _no_samples_message(path: PathLike, sample: str) -> str:
    return (
        f"sample {brief_repr(sample)} was given, but {path} is a plain utterance file, which has no samples; "
        "a sample selects a conversation of a LoCoMo or LongMemEval file"
    )
