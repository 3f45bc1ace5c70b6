"""Which extractor a build uses and where its cache lives: decided here, for every entry point.

``gravity build``, ``gravity eval``, :func:`~gravity_core.serving.messages.build_kb_from_utterances`,
:class:`~gravity_core.serving.users.UserKBs` and the eval runner all make their extractor with
:func:`make_extractor`: the offline extractor by default, an :class:`LLMExtractor` when a chat model
is given, and either one keeping what it can replay (spaCy parses and answers, or the model's
responses) in ``cache_dir``, usually the KB's own cache folder (``AnchorStore.cache_dir``), so a
rebuild replays it and a forget prunes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gravity_core.embeddings.base import Embedder
from gravity_core.extract.base import Extractor
from gravity_core.llm.base import ChatModel

__all__ = ["make_extractor"]


def make_extractor(
    embedder: Embedder,
    *,
    chat_model: ChatModel | None = None,
    cache_dir: str | Path | None = None,
    fused: bool = True,
    max_concurrency: int = 1,
    pipeline: str | Any | None = None,
) -> Extractor:
    """The extractor of a build.

    Args:
        embedder: the KB's embedder (the offline extractor scores with it).
        chat_model: extract with this model (an :class:`~gravity_core.extract.llm.LLMExtractor`);
            ``None``: the offline extractor.
        cache_dir: where the extractor keeps what it can replay (``None``: nothing is kept).
        fused: with a model, one prompt for all three anchor kinds.
        max_concurrency: with a model, its requests in flight.
        pipeline: the offline extractor's spaCy pipeline (a name, or a loaded one to share).
    """
    if chat_model is not None:
        from gravity_core.extract.llm import LLMExtractor
        from gravity_core.llm.cache import ResponseCache

        cache = ResponseCache(cache_dir) if cache_dir is not None else None
        return LLMExtractor(chat_model, fused=fused, cache=cache, max_concurrency=max_concurrency)
    from gravity_core.extract.offline import OfflineExtractor

    if cache_dir is None:
        return OfflineExtractor(embedder, pipeline=pipeline)
    return OfflineExtractor.kept_in(cache_dir, embedder, pipeline=pipeline)
