"""LangChain messages as GRAVITY utterances, and a KB built (or extended) from them.

A thin layer over :mod:`gravity_core.serving.messages`: the rules (speaker, session, time, id, errors) are
the same as for LlamaIndex chat messages.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any, Protocol

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from gravity_core.build import DEFAULT_BATCH_SIZE, AnchorBuilder
from gravity_core.build.forget import ForgetReport
from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError
from gravity_core.extract.base import Extractor
from gravity_core.schema import Utterance
from gravity_core.serving.messages import (
    DEFAULT_SESSION,
    DEFAULT_SPEAKERS,
    RENAMED_ARGUMENTS,
    NeutralMessage,
    build_kb_from_utterances,
    forget_utterances,
    forgetting_time,
    renamed_arguments,
    utterances_from_neutral_messages,
)
from gravity_core.serving.turn_documents import turn_chunks
from gravity_langchain.models import LangChainChatModel

__all__ = [
    "DEFAULT_ROLES",
    "MessageSource",
    "build_kb_from_messages",
    "documents_from_utterances",
    "forget_messages",
    "neutral_message",
    "utterances_from_messages",
]

logger = logging.getLogger(__name__)

DEFAULT_ROLES: Mapping[str, str] = DEFAULT_SPEAKERS
"""The old name of :data:`gravity_core.serving.messages.DEFAULT_SPEAKERS` (speaker names by role)."""

# Subclasses (AIMessageChunk, HumanMessageChunk, ...) have their own ``type``: read the class.
_ROLES: tuple[tuple[type[BaseMessage], str], ...] = (
    (HumanMessage, "user"),
    (AIMessage, "assistant"),
    (SystemMessage, "system"),
    (ToolMessage, "tool"),
    (FunctionMessage, "function"),
)


class _HasMessages(Protocol):
    @property
    def messages(self) -> Sequence[BaseMessage]: ...


MessageSource = Sequence[BaseMessage] | _HasMessages
"""A list of messages, or a chat history object with a ``messages`` attribute."""


def _role(message: BaseMessage) -> str:
    if isinstance(message, ChatMessage):
        return message.role
    return next((role for kind, role in _ROLES if isinstance(message, kind)), message.type)


def neutral_message(message: BaseMessage) -> NeutralMessage:
    """A LangChain message as a :class:`~gravity_core.serving.messages.NeutralMessage`.

    Fields are read from ``additional_kwargs``, then ``response_metadata``.
    """
    return NeutralMessage(
        role=_role(message),
        text=message.text,
        name=message.name,
        id=message.id,
        metadata=(
            ("additional_kwargs", message.additional_kwargs),
            ("response_metadata", message.response_metadata),
        ),
    )


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


@renamed_arguments(**RENAMED_ARGUMENTS)
def utterances_from_messages(
    messages: MessageSource,
    *,
    session: str = DEFAULT_SESSION,
    default_time: datetime | date | None = None,
    speakers: Mapping[str, str] | None = None,
) -> list[Utterance]:
    """Turn LangChain messages into GRAVITY utterances, in order.

    The rules are :func:`gravity_core.serving.messages.utterances_from_neutral_messages`'s, with fields read
    from ``additional_kwargs`` then ``response_metadata``: the speaker from ``"speaker"``/``"name"``,
    else ``message.name``, else ``speakers[role]`` ("User", "Assistant"; system and tool messages
    are skipped); the session from ``"session"``/``"session_id"``, else ``session``; the time from
    ``"timestamp"``/``"time"``/``"created_at"``, else ``default_time``, else an ``InputDataError``;
    ``"attachments"``; the id from ``message.id``, else ``"id"``, else ``"<session>:<n>"`` (n counts
    the session's turns).

    Args:
        messages: the messages, or a chat history with a ``messages`` attribute.
        session: the session of messages that name none.
        default_time: the time of messages that carry none (e.g. ``datetime.now(UTC)`` in a live chat).
        speakers: speaker names by role (``"user"``, ``"assistant"``; ``"human"``/``"ai"`` work too).

    Raises:
        InputDataError: a message has no timestamp and no ``default_time`` is given, or a field is
            unusable (the error names ``messages[i]`` and the field, e.g.
            ``additional_kwargs["timestamp"]``).
        ConfigurationError: ``messages`` is not a sequence of LangChain messages, an argument is
            unusable, or an old argument name (``roles=``, ``timestamp=``) is passed.
    """
    return utterances_from_neutral_messages(
        [neutral_message(m) for m in _message_list(messages)],
        session=session,
        default_time=default_time,
        speakers=speakers,
    )


def documents_from_utterances(
    utterances: Sequence[Utterance], *, turns_per_document: int = 1
) -> list[Document]:
    """The turns as ``Document`` objects, for the host's own vector store of the conversation.

    By default one document per utterance: its id is the utterance id (the ids GRAVITY's anchors
    cite, so :class:`~gravity_langchain.retriever.GravityRetriever` can fetch a selected anchor's
    source turns by id), its text ``"<speaker>: <text>"`` (attachment captions included), and its
    metadata ``speaker``, ``session``, ``id`` and ``date`` (scalars, which every store keeps;
    langchain-chroma cannot hand back by id a document stored without metadata).

    With ``turns_per_document=n`` above 1, a document holds up to ``n`` consecutive turns of one
    session, one per line, under the id ``"<first utterance id>+<n>"``; its metadata lists the
    utterance ids it holds under ``"gravity_utterance_ids"`` (comma-separated), with ``session``,
    ``date`` (the first turn's), ``id`` and ``speakers``
    (:func:`~gravity_core.serving.turn_documents.turn_chunks`). Give the retriever the same
    ``turns_per_document``. Pass each session's turns from its first one (e.g. the whole history
    each time): the ids stay the same as a session grows, so adding the documents again replaces
    the session's last, shorter one.

    Raises:
        ConfigurationError: ``turns_per_document`` is not an integer of at least 1.
        InputDataError: with several turns per document, an utterance id holds a comma.

    Example:
        ```python
        store.add_documents(documents_from_utterances(load_conversation("chat.jsonl")))

        store.add_documents(documents_from_utterances(turns, turns_per_document=4))
        retriever = GravityRetriever(engine=engine, vector_store=store, turns_per_document=4)
        ```
    """
    return [
        Document(page_content=chunk.text, id=chunk.id, metadata=dict(chunk.metadata))
        for chunk in turn_chunks(utterances, turns_per_document)
    ]


@renamed_arguments(**RENAMED_ARGUMENTS)
def build_kb_from_messages(
    messages: MessageSource,
    kb_dir: str | os.PathLike[str] | None = None,
    *,
    embedder: Embedder | None = None,
    extractor: Extractor | None = None,
    llm: BaseChatModel | None = None,
    session: str = DEFAULT_SESSION,
    default_time: datetime | date | None = None,
    speakers: Mapping[str, str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> AnchorBuilder:
    """Build a KB from LangChain messages, or extend the one in ``kb_dir`` with the new ones.

    Messages already in the KB (same id) are skipped, so calling it again with a grown history
    adds only the new messages. A message that cannot be read fails the call before anything is
    written.

    Args:
        messages: the messages, or a chat history with a ``messages`` attribute.
        kb_dir: where the KB is saved (and read from, if it exists); ``None`` keeps it in memory.
        embedder: the anchor embedder (default: the offline MiniLM); must match an existing KB's.
        extractor: a GRAVITY extractor; default: the offline extractor over ``embedder``.
        llm: extract with this LangChain chat model instead (fused prompt, answers cached under
            ``kb_dir/cache``); not together with ``extractor``.
        session: see :func:`utterances_from_messages`.
        default_time: see :func:`utterances_from_messages`.
        speakers: see :func:`utterances_from_messages`.
        batch_size: utterances per extractor call.

    Returns:
        The builder: ``builder.kb`` is the KB, ``builder.vectors`` its anchor vectors,
        ``builder.last_report`` the turns added and skipped.
    """
    utterances = utterances_from_messages(
        messages, session=session, default_time=default_time, speakers=speakers
    )
    return build_kb_from_utterances(
        utterances, kb_dir, batch_size=batch_size, **_kb_arguments(embedder, extractor, llm)
    )


@renamed_arguments(**RENAMED_ARGUMENTS)
def forget_messages(
    messages: MessageSource,
    kb_dir: str | os.PathLike[str] | None = None,
    *,
    builder: AnchorBuilder | None = None,
    embedder: Embedder | None = None,
    extractor: Extractor | None = None,
    llm: BaseChatModel | None = None,
    session: str = DEFAULT_SESSION,
    default_time: datetime | date | None = None,
    speakers: Mapping[str, str] | None = None,
) -> ForgetReport:
    """Forget LangChain messages built into a KB (a user asks to be forgotten, a chat is deleted).

    Pass the arguments the build got (:func:`build_kb_from_messages`): the messages become the same
    utterance ids (:func:`utterances_from_messages`), and the KB becomes the one a build of the
    remaining turns makes (:func:`gravity_core.serving.messages.forget_utterances`). ``default_time`` is
    not needed: the ids do not depend on the time. A message without an id is known by its session
    and place in it (``"<session>:<n>"``), so pass a session's messages from its first one, not a
    single message cut out of it (that would name another turn); messages with ids can be passed
    alone.

    Args:
        messages: the messages to forget, or a chat history with a ``messages`` attribute.
        kb_dir: the KB folder the messages were built into; not together with ``builder``.
        builder: forget in this builder's KB instead (e.g. the one :func:`build_kb_from_messages`
            returned); it stays usable and ``builder.kb`` is the new KB.
        embedder: with ``kb_dir``: the embedder the KB was built with (default: the offline MiniLM).
        extractor: with ``kb_dir``: the extractor the KB was built with (default: the offline one).
        llm: with ``kb_dir``: the LangChain chat model the KB was built with (its answers cached
            under ``kb_dir/cache`` are replayed); not together with ``extractor``.
        session: see :func:`utterances_from_messages`.
        default_time: see :func:`utterances_from_messages`; not needed to forget.
        speakers: see :func:`utterances_from_messages`.

    Returns:
        What the forget did, as :func:`gravity_core.serving.messages.forget_utterances` reports it.

    Raises:
        ConfigurationError: as :func:`~gravity_core.serving.messages.forget_utterances` (no messages
            to forget: system and tool messages do not count).
        InputDataError: a message field is unusable (as in the build).
    """
    utterances = utterances_from_messages(
        messages, session=session, default_time=forgetting_time(default_time), speakers=speakers
    )
    return forget_utterances(utterances, kb_dir, builder=builder, **_kb_arguments(embedder, extractor, llm))


def _kb_arguments(
    embedder: Embedder | None, extractor: Extractor | None, llm: BaseChatModel | None
) -> dict[str, Any]:
    """What a build or forget of messages hands to gravity_core: the embedder, extractor and model."""
    chat_model = LangChainChatModel(llm) if llm is not None else None
    return {"embedder": embedder, "extractor": extractor, "chat_model": chat_model}
