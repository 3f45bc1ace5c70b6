"""LangChain messages as GRAVITY utterances, and a KB built (or extended) from them."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, time
from typing import Protocol

from langchain_core.messages import BaseMessage

from gravity_core.build import DEFAULT_BATCH_SIZE, AnchorBuilder
from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.extract.base import Extractor
from gravity_core.loaders import read_timestamp
from gravity_core.schema import Utterance
from gravity_core.store import AnchorStore

__all__ = ["DEFAULT_ROLES", "MessageSource", "build_kb_from_messages", "utterances_from_messages"]

logger = logging.getLogger(__name__)

DEFAULT_ROLES: Mapping[str, str] = {"human": "User", "ai": "Assistant"}
"""Speaker names of unnamed messages by message type; types not listed (system, tool) are skipped."""

_TIME_KEYS = ("timestamp", "time", "created_at")


class _HasMessages(Protocol):
    @property
    def messages(self) -> Sequence[BaseMessage]: ...


MessageSource = Sequence[BaseMessage] | _HasMessages
"""A list of messages, or a chat history object with a ``messages`` attribute."""


def _default_time(value: datetime | date) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return datetime.combine(value, time(0, 0), tzinfo=UTC)


def _message_time(message: BaseMessage, record: str) -> datetime | None:
    """The first timestamp the message carries, read by :func:`gravity_core.loaders.read_timestamp`."""
    sources = (
        ("additional_kwargs", message.additional_kwargs),
        ("response_metadata", message.response_metadata),
    )
    for name, source in sources:
        for key in _TIME_KEYS:
            if source.get(key) is not None:
                return read_timestamp(source[key], record=record, field=f'{name}["{key}"]')
    return None


def _message_list(messages: MessageSource) -> list[BaseMessage]:
    items = getattr(messages, "messages", messages)
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise ConfigurationError(
            f"expected a sequence of LangChain messages or a chat history, got {type(messages).__name__}"
        )
    for index, item in enumerate(items):
        if not isinstance(item, BaseMessage):
            raise ConfigurationError(f"item {index} is a {type(item).__name__}, not a LangChain message")
    return list(items)


def utterances_from_messages(
    messages: MessageSource,
    *,
    session: str = "session_1",
    default_time: datetime | date | None = None,
    roles: Mapping[str, str] = DEFAULT_ROLES,
) -> list[Utterance]:
    """Turn LangChain messages into GRAVITY utterances, in order.

    - speaker: ``message.name``, else ``roles[message.type]`` ("User", "Assistant"); messages of
      a type not in ``roles`` (system prompts, tool results) are skipped, as are messages
      without text (e.g. a bare tool call).
    - timestamp: ``additional_kwargs`` or ``response_metadata`` key ``"timestamp"`` (or
      ``"time"``, ``"created_at"``): an ISO 8601 string, a datetime, a date or a Unix time in
      seconds (finite, years 1-9999; a bool is not one); a time without zone is taken as UTC.
      Otherwise ``default_time``.
    - session: ``additional_kwargs["session"]`` if set, else ``session``.
    - attachments: ``additional_kwargs["attachments"]``, a list of descriptions of what was
      shared (e.g. an image caption), as in :attr:`Utterance.attachments`.
    - id: ``message.id``, else ``"<session>:<n>"`` with ``n`` the 1-based position in
      ``messages``, so ids stay stable when the same history grows.

    Args:
        messages: the messages, or a chat history with a ``messages`` attribute.
        session: the session id of messages that carry none.
        default_time: the timestamp of messages that carry none.
        roles: speaker names by message type.

    Raises:
        InputDataError: a message has no usable timestamp and no ``default_time`` is given, or an
            unreadable or out-of-range one (the message names ``messages[i]`` and the field, e.g.
            ``additional_kwargs["timestamp"]``).
        ConfigurationError: ``messages`` is not a sequence of LangChain messages.
    """
    if not session:
        raise ConfigurationError("session must be a non-empty string")
    fallback = _default_time(default_time) if default_time is not None else None
    out: list[Utterance] = []
    for position, message in enumerate(_message_list(messages), start=1):
        speaker = message.name or roles.get(message.type)
        text = message.text.strip()
        if not speaker or not text:
            logger.debug("skipping message %d (%s): no speaker role or no text", position, message.type)
            continue
        own_session = message.additional_kwargs.get("session")
        session_id = own_session if isinstance(own_session, str) and own_session else session
        record = message.id or f"{session_id}:{position}"
        where = f"messages[{position - 1}] (id {record!r})"
        moment = _message_time(message, where) or fallback
        if moment is None:
            raise InputDataError(
                "the message has no timestamp (additional_kwargs or response_metadata 'timestamp') "
                "and no default_time was given",
                record=where,
                field="timestamp",
            )
        out.append(
            Utterance(
                id=record,
                speaker=speaker,
                text=text,
                session=session_id,
                timestamp=moment,
                attachments=_attachments(message, record),
            )
        )
    return out


def _attachments(message: BaseMessage, record: str) -> list[str]:
    value = message.additional_kwargs.get("attachments")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputDataError(
            f"additional_kwargs['attachments'] must be a list of strings, got {type(value).__name__}",
            record=record,
            field="attachments",
        )
    return [item for item in value if item.strip()]


def build_kb_from_messages(
    messages: MessageSource,
    kb_dir: str | os.PathLike[str] | None = None,
    *,
    embedder: Embedder | None = None,
    extractor: Extractor | None = None,
    session: str = "session_1",
    default_time: datetime | date | None = None,
    roles: Mapping[str, str] = DEFAULT_ROLES,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> AnchorBuilder:
    """Build a KB from LangChain messages, or extend the one in ``kb_dir`` with the new ones.

    Messages already in the KB (same id) are skipped, so calling it again with a grown history
    adds only the new messages.

    Args:
        messages: the messages, or a chat history with a ``messages`` attribute.
        kb_dir: where the KB is saved (and read from, if it exists); ``None`` keeps it in memory.
        embedder: the anchor embedder (default: the offline MiniLM); must match an existing KB's.
        extractor: default: the offline extractor over ``embedder``; pass
            ``LLMExtractor(LangChainChatModel(chat_model))`` to extract with a chat model.
        session: see :func:`utterances_from_messages`.
        default_time: see :func:`utterances_from_messages`.
        roles: see :func:`utterances_from_messages`.
        batch_size: utterances per extractor call.

    Returns:
        The builder: ``builder.kb`` is the KB, ``builder.vectors`` its anchor vectors.
    """
    if embedder is None:
        from gravity_core.embeddings import default_embedder

        embedder = default_embedder()
    if extractor is None:
        from gravity_core.extract.offline import OfflineExtractor

        extractor = OfflineExtractor(embedder)
    utterances = utterances_from_messages(messages, session=session, default_time=default_time, roles=roles)
    store = AnchorStore(kb_dir) if kb_dir is not None else None
    builder = AnchorBuilder(extractor, embedder, batch_size=batch_size, store=store)
    report = builder.add(utterances)
    logger.info("KB from messages: %d added, %d already known", report.added, report.skipped)
    return builder
