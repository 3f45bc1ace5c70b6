"""The messages the ``remember`` tool takes, as GRAVITY utterances (through the one message adapter).

A message is ``{"content": ..., "role"?: ..., "speaker"?: ..., "timestamp"?: ..., "session"?: ...,
"id"?: ...}``. Its fields go to :func:`~gravity_core.serving.messages.utterances_from_neutral_messages`
as the message's metadata, so speaker, session and timestamp follow the same rules (and fail with
the same errors) as LangChain's and LlamaIndex's messages. Two defaults differ, because an agent
calls ``remember`` again and again with a few new messages each time:

- a message without a timestamp was said now (the call's time);
- a message without an id gets one from its session, speaker, time and text (``mcp-`` and 16 hex
  digits), so the same message remembered twice is kept once, and messages of separate calls never
  take each other's ids (the adapter's ``"<session>:<n>"`` counts the turns of one call only).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from gravity_core.errors import ConfigurationError
from gravity_core.schema import Utterance
from gravity_core.serving.messages import NeutralMessage, normalize_role, utterances_from_neutral_messages

__all__ = ["DEFAULT_REMEMBER_SESSION", "MemoryMessage", "utterances_from_memory_messages"]

DEFAULT_REMEMBER_SESSION = "mcp"
"""The session of remembered messages that name none."""

_METADATA = "message"  # how error messages name a message's fields: message["timestamp"]


class MemoryMessage(BaseModel):
    """One chat message for the ``remember`` tool."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    content: str = Field(description="What was said.")
    role: str | None = Field(
        default=None,
        description='"user" (the default) or "assistant"; system and tool messages are not remembered.',
    )
    speaker: str | None = Field(
        default=None, description='Who said it, e.g. "Maya" (default: "User" or "Assistant" by role).'
    )
    timestamp: str | float | None = Field(
        default=None,
        description="When it was said: ISO 8601 (2024-03-09T18:30:00Z) or a Unix time in seconds; "
        "default: now.",
    )
    session: str | None = Field(
        default=None, description=f'The conversation it belongs to (default: "{DEFAULT_REMEMBER_SESSION}").'
    )
    id: str | None = Field(
        default=None,
        description="A stable id of the message (default: made from its session, speaker, time and text).",
    )


def _message_id(message: MemoryMessage, role: str, said: str | float) -> str:
    """An id that only the same message (session, speaker or role, time, text) gets again."""
    key = json.dumps(
        [message.session or DEFAULT_REMEMBER_SESSION, message.speaker or role, said, message.content],
        ensure_ascii=False,
    )
    return "mcp-" + hashlib.sha256(key.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]


def utterances_from_memory_messages(messages: Sequence[MemoryMessage], *, now: datetime) -> list[Utterance]:
    """The utterances of ``messages``, in order (those without text or of a system or tool role are skipped).

    Args:
        messages: the messages the tool was given.
        now: the time of the messages that carry none (an aware datetime).

    Raises:
        InputDataError: a field cannot be used (an unreadable timestamp, a blank id, ...); the error
            names the message (``messages[i]``) and the field.
        ConfigurationError: ``now`` has no time zone.
    """
    if now.tzinfo is None:
        raise ConfigurationError("now must be an aware datetime (e.g. datetime.now(UTC))")
    stamp = now.astimezone(UTC).isoformat()
    neutral: list[NeutralMessage] = []
    for message in messages:
        role = normalize_role(message.role) if message.role is not None else "user"
        said: str | float = message.timestamp if message.timestamp is not None else stamp
        fields: dict[str, object] = {"timestamp": said}
        if message.speaker is not None:
            fields["speaker"] = message.speaker
        if message.session is not None:
            fields["session"] = message.session
        neutral.append(
            NeutralMessage(
                role=role,
                text=message.content,
                id=message.id if message.id and message.id.strip() else _message_id(message, role, said),
                metadata=((_METADATA, fields),),
            )
        )
    return utterances_from_neutral_messages(neutral, session=DEFAULT_REMEMBER_SESSION, default_time=now)
