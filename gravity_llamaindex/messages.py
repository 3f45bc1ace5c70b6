"""LlamaIndex chat messages and nodes to and from GRAVITY utterances.

Messages go through :mod:`gravity_core.serving.messages`: the rules (speaker, session, time, id, errors)
are the same as for LangChain messages.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.schema import TextNode

from gravity_core.errors import ConfigurationError
from gravity_core.schema import Utterance
from gravity_core.serving.messages import (
    DEFAULT_SESSION,
    RENAMED_ARGUMENTS,
    NeutralMessage,
    renamed_arguments,
    utterances_from_neutral_messages,
)
from gravity_core.serving.turn_documents import turn_chunks

__all__ = ["neutral_message", "nodes_from_utterances", "utterances_from_chat_messages"]

logger = logging.getLogger(__name__)


def neutral_message(message: ChatMessage) -> NeutralMessage:
    """A LlamaIndex ``ChatMessage`` as a :class:`~gravity_core.serving.messages.NeutralMessage`.

    ``ChatMessage`` has no name or id field: both come from ``additional_kwargs``.
    """
    return NeutralMessage(
        role=str(message.role.value),
        text=message.content or "",
        metadata=(("additional_kwargs", message.additional_kwargs),),
    )


def _message_list(messages: Iterable[ChatMessage]) -> list[ChatMessage]:
    if isinstance(messages, str | bytes) or not isinstance(messages, Iterable):
        raise ConfigurationError(f"expected LlamaIndex ChatMessages, got {type(messages).__name__}")
    items = list(messages)
    for index, item in enumerate(items):
        if not isinstance(item, ChatMessage):
            raise ConfigurationError(f"item {index} is a {type(item).__name__}, not a LlamaIndex ChatMessage")
    return items


@renamed_arguments(**RENAMED_ARGUMENTS)
def utterances_from_chat_messages(
    messages: Iterable[ChatMessage],
    *,
    session: str = DEFAULT_SESSION,
    default_time: datetime | date | None = None,
    speakers: Mapping[str, str] | None = None,
) -> list[Utterance]:
    """Turn LlamaIndex ``ChatMessage`` objects into GRAVITY utterances, in order.

    The rules are :func:`gravity_core.serving.messages.utterances_from_neutral_messages`'s, with fields read
    from ``additional_kwargs``: the speaker from ``"speaker"``/``"name"``, else ``speakers[role]``
    ("User", "Assistant"; system, tool and function messages are skipped); the session from
    ``"session"``/``"session_id"``, else ``session``; the time from
    ``"timestamp"``/``"time"``/``"created_at"``, else ``default_time``, else an ``InputDataError``;
    ``"attachments"``; the id from ``"id"``, else ``"<session>:<n>"`` (n counts the session's turns).
    Names matter: GRAVITY builds entity profiles from them, so pass real names when you know them.

    Args:
        messages: the chat messages.
        session: the session of messages that name none.
        default_time: the time of messages that carry none (e.g. ``datetime.now(UTC)`` in a live chat).
        speakers: speaker names by role (``"user"``, ``"assistant"``).

    Raises:
        InputDataError: a message has no timestamp and no ``default_time`` is given, or a field is
            unusable (the error names ``messages[i]``, its position in ``messages``, and the field,
            e.g. ``additional_kwargs["timestamp"]``).
        ConfigurationError: an item is not a ``ChatMessage``, an argument is unusable, or an old
            argument name (``timestamp=``) is passed.
    """
    return utterances_from_neutral_messages(
        [neutral_message(m) for m in _message_list(messages)],
        session=session,
        default_time=default_time,
        speakers=speakers,
    )


def nodes_from_utterances(utterances: Sequence[Utterance], *, turns_per_node: int = 1) -> list[TextNode]:
    """The turns as ``TextNode`` objects, for the host's own index of the conversation.

    By default one node per utterance: its id is the utterance id (the ids GRAVITY's anchors cite),
    its text ``"<speaker>: <text>"`` (attachment captions included), and its metadata ``speaker``,
    ``session``, ``id`` and ``date``.

    With ``turns_per_node=n`` above 1, a node holds up to ``n`` consecutive turns of one session,
    one per line, under the id ``"<first utterance id>+<n>"``; its metadata lists the utterance
    ids it holds under ``"gravity_utterance_ids"`` (comma-separated), with ``session``, ``date``
    (the first turn's), ``id`` and ``speakers``
    (:func:`~gravity_core.serving.turn_documents.turn_chunks`). Give
    :meth:`GravityFusionRetriever.from_index <gravity_llamaindex.GravityFusionRetriever.from_index>`
    the same ``turns_per_node``. Pass each session's turns from its first one (e.g. the whole
    history each time): the ids stay the same as a session grows.

    The metadata is kept out of the embedding; the LLM sees ``session``, ``id`` and ``date`` above
    the text.

    Raises:
        ConfigurationError: ``turns_per_node`` is not an integer of at least 1.
        InputDataError: with several turns per node, an utterance id holds a comma.
    """
    return [
        TextNode(
            id_=chunk.id,
            text=chunk.text,
            metadata=dict(chunk.metadata),
            excluded_embed_metadata_keys=list(chunk.metadata),
            excluded_llm_metadata_keys=[key for key in chunk.metadata if key not in _LLM_KEYS],
        )
        for chunk in turn_chunks(utterances, turns_per_node)
    ]


# The metadata the LLM sees above a node's text (the speakers are in the text already).
_LLM_KEYS = ("session", "id", "date")
