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

from gravity_core.build import DEFAULT_BATCH_SIZE, AnchorBuilder, BuildReport
from gravity_core.embeddings.base import Embedder
from gravity_core.extract.base import Extractor
from gravity_core.store import AnchorStore
from gravity_llamaindex.embeddings import as_gravity_embedder
from gravity_llamaindex.messages import utterances_from_chat_messages
from gravity_llamaindex.models import LlamaIndexChatModel

__all__ = ["build_kb_from_chat_messages"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


@dispatcher.span
def build_kb_from_chat_messages(
    messages: Iterable[ChatMessage],
    kb_dir: str | os.PathLike[str],
    *,
    embedder: Embedder | BaseEmbedding,
    llm: LLM | None = None,
    session: str = "chat",
    timestamp: datetime | date | None = None,
    speakers: Mapping[str, str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> BuildReport:
    """Build the KB in ``kb_dir`` from chat messages, or add the new ones to the KB already there.

    Messages become utterances with :func:`~gravity_llamaindex.utterances_from_chat_messages`
    (``session``, ``timestamp`` and ``speakers`` are passed on). Utterances already in the KB are
    skipped, so calling it again with the grown history adds only the new turns. Reload the engine
    afterwards (``GravityEngine.from_dir(kb_dir, embedder=...)``) to query the new anchors.

    Args:
        messages: the chat history.
        kb_dir: the KB folder (created if missing).
        embedder: embeds the anchors: a GRAVITY embedder, a ``GravityEmbedding`` (its embedder is
            used, so the KB records e.g. ``minilm-l6-v2-int8``) or any LlamaIndex embedding model.
        llm: extract with this LLM (fused prompt, answers cached under ``kb_dir/cache``); by default
            the offline extractor runs, with no model.
        session: see :func:`~gravity_llamaindex.utterances_from_chat_messages`.
        timestamp: see :func:`~gravity_llamaindex.utterances_from_chat_messages`.
        speakers: see :func:`~gravity_llamaindex.utterances_from_chat_messages`.
        batch_size: utterances per extractor call.

    Returns:
        What the build did (turns added and skipped, batches, failures).
    """
    anchors_embedder = as_gravity_embedder(embedder)
    store = AnchorStore(kb_dir)
    extractor: Extractor
    if llm is None:
        from gravity_core.extract.offline import OfflineExtractor

        extractor = OfflineExtractor(anchors_embedder)
    else:
        from gravity_core.extract.llm import LLMExtractor
        from gravity_core.llm.cache import ResponseCache

        extractor = LLMExtractor(LlamaIndexChatModel(llm), fused=True, cache=ResponseCache(store.cache_dir))
    utterances = utterances_from_chat_messages(
        messages, session=session, timestamp=timestamp, speakers=speakers
    )
    builder = AnchorBuilder(extractor, anchors_embedder, batch_size=batch_size, store=store)
    report = builder.add(utterances)
    logger.info("KB %s: %d turns added, %d already there", kb_dir, report.added, report.skipped)
    return report
