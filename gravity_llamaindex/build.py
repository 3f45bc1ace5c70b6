"""Build or extend a GRAVITY KB from LlamaIndex chat messages, and forget them again."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import LLM

from gravity_core.build import DEFAULT_BATCH_SIZE, AnchorBuilder
from gravity_core.build.forget import ForgetReport
from gravity_core.embeddings.base import Embedder
from gravity_core.extract.base import Extractor
from gravity_core.serving.messages import (
    DEFAULT_SESSION,
    RENAMED_ARGUMENTS,
    build_kb_from_utterances,
    forget_utterances,
    forgetting_time,
    renamed_arguments,
)
from gravity_llamaindex.embeddings import as_gravity_embedder
from gravity_llamaindex.messages import utterances_from_chat_messages
from gravity_llamaindex.models import LlamaIndexChatModel

__all__ = ["build_kb_from_chat_messages", "forget_chat_messages"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


@renamed_arguments(**RENAMED_ARGUMENTS)  # outside the span, which binds the signature first
@dispatcher.span
def build_kb_from_chat_messages(
    messages: Iterable[ChatMessage],
    kb_dir: str | os.PathLike[str] | None = None,
    *,
    embedder: Embedder | BaseEmbedding | None = None,
    extractor: Extractor | None = None,
    llm: LLM | None = None,
    session: str = DEFAULT_SESSION,
    default_time: datetime | date | None = None,
    speakers: Mapping[str, str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> AnchorBuilder:
    """Build a KB from chat messages, or add the new ones to the KB already in ``kb_dir``.

    Messages become utterances with :func:`~gravity_llamaindex.utterances_from_chat_messages`
    (``session``, ``default_time`` and ``speakers`` are passed on); a message that cannot be read
    fails the call before anything is written. Utterances already in the KB are skipped, so calling
    it again with the grown history adds only the new turns. An engine from
    ``GravityEngine.from_dir(kb_dir, embedder=...)`` or ``GravityEngine.from_builder(builder)``
    follows the KB, so it queries the new anchors without a reload.

    Args:
        messages: the chat history.
        kb_dir: the KB folder (created if missing); ``None`` keeps the KB in memory.
        embedder: embeds the anchors: a GRAVITY embedder, a ``GravityEmbedding`` (its embedder is
            used, so the KB records e.g. ``minilm-l6-v2-int8``) or any LlamaIndex embedding model;
            default: the offline MiniLM. Must match an existing KB's.
        extractor: a GRAVITY extractor; default: the offline extractor over ``embedder``.
        llm: extract with this LlamaIndex LLM instead (fused prompt, answers cached under
            ``kb_dir/cache``); not together with ``extractor``.
        session: see :func:`~gravity_llamaindex.utterances_from_chat_messages`.
        default_time: see :func:`~gravity_llamaindex.utterances_from_chat_messages`.
        speakers: see :func:`~gravity_llamaindex.utterances_from_chat_messages`.
        batch_size: utterances per extractor call.

    Returns:
        The builder: ``builder.kb`` is the KB, ``builder.last_report`` what the build did (turns
        added and skipped, batches, failures).
    """
    utterances = utterances_from_chat_messages(
        messages, session=session, default_time=default_time, speakers=speakers
    )
    options = _kb_options(embedder, extractor, llm)
    return build_kb_from_utterances(utterances, kb_dir, batch_size=batch_size, **options)


@renamed_arguments(**RENAMED_ARGUMENTS)  # outside the span, which binds the signature first
@dispatcher.span
def forget_chat_messages(
    messages: Iterable[ChatMessage],
    kb_dir: str | os.PathLike[str] | None = None,
    *,
    builder: AnchorBuilder | None = None,
    embedder: Embedder | BaseEmbedding | None = None,
    extractor: Extractor | None = None,
    llm: LLM | None = None,
    session: str = DEFAULT_SESSION,
    default_time: datetime | date | None = None,
    speakers: Mapping[str, str] | None = None,
) -> ForgetReport:
    """Forget chat messages built into a KB (a user asks to be forgotten, a chat is deleted).

    Pass the arguments the build got (:func:`build_kb_from_chat_messages`): the messages become the
    same utterance ids (:func:`~gravity_llamaindex.utterances_from_chat_messages`), and the KB
    becomes the one a build of the remaining turns makes
    (:func:`gravity_core.serving.messages.forget_utterances`). ``default_time`` is not needed: the ids do
    not depend on the time. A message without an ``"id"`` is known by its session and place in it
    (``"<session>:<n>"``), so pass a session's messages from its first one, not a single message
    cut out of it (that would name another turn); messages with ids can be passed alone.

    Args:
        messages: the chat messages to forget.
        kb_dir: the KB folder they were built into; not together with ``builder``.
        builder: forget in this builder's KB instead (e.g. the one
            :func:`build_kb_from_chat_messages` returned); it stays usable and ``builder.kb`` is
            the new KB.
        embedder: with ``kb_dir``: the embedder the KB was built with, as the build takes it
            (default: the offline MiniLM).
        extractor: with ``kb_dir``: the extractor the KB was built with (default: the offline one).
        llm: with ``kb_dir``: the LlamaIndex LLM the KB was built with (its answers cached under
            ``kb_dir/cache`` are replayed); not together with ``extractor``.
        session: see :func:`~gravity_llamaindex.utterances_from_chat_messages`.
        default_time: see :func:`~gravity_llamaindex.utterances_from_chat_messages`; not needed
            to forget.
        speakers: see :func:`~gravity_llamaindex.utterances_from_chat_messages`.

    Returns:
        What the forget did, as :func:`gravity_core.serving.messages.forget_utterances` reports it.

    Raises:
        ConfigurationError: as :func:`~gravity_core.serving.messages.forget_utterances` (no messages
            to forget: system and tool messages do not count).
        InputDataError: a message field is unusable (as in the build).
    """
    when = forgetting_time(default_time)
    utterances = utterances_from_chat_messages(
        messages, session=session, default_time=when, speakers=speakers
    )
    return forget_utterances(utterances, kb_dir, builder=builder, **_kb_options(embedder, extractor, llm))


def _kb_options(
    embedder: Embedder | BaseEmbedding | None, extractor: Extractor | None, llm: LLM | None
) -> dict[str, Any]:
    """The embedder, extractor and chat model of a build or forget, as gravity_core takes them."""
    return {
        "embedder": as_gravity_embedder(embedder) if embedder is not None else None,
        "extractor": extractor,
        "chat_model": LlamaIndexChatModel(llm) if llm is not None else None,
    }
