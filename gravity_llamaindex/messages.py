"""LlamaIndex chat messages and nodes to and from GRAVITY utterances."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, time

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.schema import TextNode
from pydantic import ValidationError

from gravity_core.errors import InputDataError
from gravity_core.loaders import read_timestamp
from gravity_core.schema import Utterance

__all__ = ["CONVERSATION_ROLES", "nodes_from_utterances", "utterances_from_chat_messages"]

logger = logging.getLogger(__name__)

CONVERSATION_ROLES = frozenset(
    {MessageRole.USER, MessageRole.ASSISTANT, MessageRole.CHATBOT, MessageRole.MODEL}
)
"""Roles whose messages are conversation turns; system, tool and function messages are skipped."""

_DEFAULT_SPEAKERS = {
    MessageRole.USER: "User",
    MessageRole.ASSISTANT: "Assistant",
    MessageRole.CHATBOT: "Assistant",
    MessageRole.MODEL: "Assistant",
}


def _aware(value: datetime | date) -> datetime:
    """A plain date as midnight UTC (as :class:`Utterance` stores it); datetimes unchanged."""
    return value if isinstance(value, datetime) else datetime.combine(value, time(0, 0), tzinfo=UTC)


def utterances_from_chat_messages(
    messages: Iterable[ChatMessage],
    *,
    session: str = "chat",
    timestamp: datetime | date | None = None,
    speakers: Mapping[str, str] | None = None,
) -> list[Utterance]:
    """Turn LlamaIndex ``ChatMessage`` objects into GRAVITY utterances, in order.

    Each field comes from the message's ``additional_kwargs`` when present, else from the arguments:

    - ``speaker`` (or ``name``): the speaker's name; otherwise ``speakers[role]``, else ``"User"``
      for user messages and ``"Assistant"`` for assistant messages. Names matter: GRAVITY builds
      entity profiles from them, so pass real names when you know them.
    - ``session_id`` (set by LlamaIndex ``Memory``) or ``session``: the session.
    - ``timestamp``: a datetime (one without a zone is taken as UTC), a date, an ISO 8601 string
      or a Unix time in seconds (finite, years 1-9999; a bool is not one); otherwise the
      ``timestamp`` argument, else the current UTC time. Relative times such as "yesterday" are
      resolved against it.
    - ``attachments``: descriptions of what was shared (a list of strings, e.g. image captions).
    - ``id``: the utterance id; otherwise ``"<session>:<n>"``, n counting the session's turns in
      ``messages`` from 1. Pass the whole history each time (turns already in the KB are skipped),
      or give messages explicit ids.

    Messages with another role (system, tool, function) or without text are skipped.

    Args:
        messages: the chat messages.
        session: the session of messages that name none.
        timestamp: the time of messages that carry none.
        speakers: role name (``"user"``, ``"assistant"``) to speaker name.

    Raises:
        InputDataError: a message's timestamp or id cannot be used; a timestamp error names the
            message as ``messages[i]`` (its position in ``messages``) and the field as
            ``additional_kwargs["timestamp"]``.
    """
    default_time = _aware(timestamp) if timestamp is not None else datetime.now(UTC)
    names = {**{role.value: name for role, name in _DEFAULT_SPEAKERS.items()}, **(speakers or {})}
    counters: dict[str, int] = {}
    out: list[Utterance] = []
    for index, message in enumerate(messages):
        role = MessageRole(message.role)
        text = (message.content or "").strip()
        if role not in CONVERSATION_ROLES or not text:
            continue
        extra = message.additional_kwargs
        turn_session = str(extra.get("session_id") or session)
        counters[turn_session] = counters.get(turn_session, 0) + 1
        turn_id = str(extra.get("id") or f"{turn_session}:{counters[turn_session]}")
        speaker = str(extra.get("speaker") or extra.get("name") or names[role.value])
        raw_time = extra.get("timestamp")
        when = (
            read_timestamp(
                raw_time, record=f"messages[{index}] (id {turn_id!r})", field='additional_kwargs["timestamp"]'
            )
            if raw_time is not None
            else default_time
        )
        try:
            out.append(
                Utterance(
                    id=turn_id,
                    speaker=speaker,
                    text=text,
                    session=turn_session,
                    timestamp=when,
                    attachments=extra.get("attachments") or [],
                )
            )
        except ValidationError as exc:
            problem = exc.errors()[0]
            field = ".".join(str(part) for part in problem["loc"])
            raise InputDataError(problem["msg"], record=turn_id, field=field) from exc
    logger.debug("%d utterances from chat messages", len(out))
    return out


def nodes_from_utterances(utterances: Sequence[Utterance]) -> list[TextNode]:
    """One ``TextNode`` per utterance, for the host's own index of the conversation.

    The node's id is the utterance id (the ids GRAVITY's anchors cite), its text
    ``"<speaker>: <text>"`` (attachment captions included), and its metadata ``speaker``,
    ``session``, ``id`` and ``date``; the metadata is kept out of the embedding, and the LLM sees
    ``session``, ``id`` and ``date`` above the text.
    """
    nodes: list[TextNode] = []
    for utterance in utterances:
        metadata = {
            "speaker": utterance.speaker,
            "session": utterance.session,
            "id": utterance.id,
            "date": utterance.day.isoformat(),
        }
        nodes.append(
            TextNode(
                id_=utterance.id,
                text=f"{utterance.speaker}: {utterance.full_text()}",
                metadata=metadata,
                excluded_embed_metadata_keys=list(metadata),
                excluded_llm_metadata_keys=["speaker"],
            )
        )
    return nodes
