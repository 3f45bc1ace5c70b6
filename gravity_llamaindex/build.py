"""Build or extend a GRAVITY KB from LlamaIndex chat messages."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from datetime import date, datetime

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import LLM

from gravity_core.build import DEFAULT_BATCH_SIZE, AnchorBuilder
from gravity_core.embeddings.base import Embedder
from gravity_core.extract.base import Extractor
from gravity_core.messages import (
    DEFAULT_SESSION,
    RENAMED_ARGUMENTS,
    build_kb_from_utterances,
    renamed_arguments,
)
from gravity_llamaindex.embeddings import as_gravity_embedder
from gravity_llamaindex.messages import utterances_from_chat_messages
from gravity_llamaindex.models import LlamaIndexChatModel

__all__ = ["build_kb_from_chat_messages"]

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
    return build_kb_from_utterances(
        utterances,
        kb_dir,
        embedder=as_gravity_embedder(embedder) if embedder is not None else None,
        extractor=extractor,
        chat_model=LlamaIndexChatModel(llm) if llm is not None else None,
        batch_size=batch_size,
    )
