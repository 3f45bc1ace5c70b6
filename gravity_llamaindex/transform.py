"""A query transform that attaches GRAVITY's expanded queries to the query bundle."""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.indices.query.query_transform.base import BaseQueryTransform
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.schema import QueryBundle

from gravity_llamaindex.provider import AnchorProvider, EngineLike, as_provider

__all__ = ["GravityQueryTransform", "merge_queries"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


def merge_queries(*groups: list[str]) -> list[str]:
    """The strings of ``groups`` in order, without blanks and case-insensitive repeats."""
    seen: set[str] = set()
    merged: list[str] = []
    for group in groups:
        for text in group:
            key = " ".join(text.split()).casefold()
            if key and key not in seen:
                seen.add(key)
                merged.append(text)
    return merged


class GravityQueryTransform(BaseQueryTransform):
    """Adds GRAVITY's expanded queries to ``QueryBundle.custom_embedding_strs``.

    The returned bundle keeps ``query_str`` (and any precomputed ``embedding``) unchanged and sets
    ``custom_embedding_strs = [*query_bundle.embedding_strs, *expansions]``: the original question
    first, then up to nine queries built from the selected anchors (repeats removed).

    Warning:
        A plain ``VectorIndexRetriever`` **averages** ``custom_embedding_strs`` into one vector
        (``get_agg_embedding_from_queries``, mean pooling) and runs one search with that centroid,
        so with it the expansions blur the question instead of reaching new memories. Put a
        :class:`~gravity_llamaindex.GravityFusionRetriever` behind the transform: it runs each
        string as its own search and fuses the results by rank.

    Use it with ``TransformQueryEngine``, which applies it before retrieval::

        inner = RetrieverQueryEngine.from_args(fusion_retriever, llm=llm)
        query_engine = TransformQueryEngine(inner, GravityQueryTransform(provider))

    Args:
        engine: a GRAVITY engine, or an :class:`AnchorProvider` shared with the other components
            (so the engine runs once per question).
    """

    def __init__(self, engine: EngineLike) -> None:
        self._provider = as_provider(engine)

    @property
    def provider(self) -> AnchorProvider:
        """Where the anchors come from."""
        return self._provider

    @dispatcher.span
    def _run(self, query_bundle: QueryBundle, metadata: dict[str, Any]) -> QueryBundle:
        context = self._provider.get(query_bundle.query_str)
        strs = merge_queries(list(query_bundle.embedding_strs), context.expansions)
        logger.debug("query %r expanded to %d embedding strings", query_bundle.query_str, len(strs))
        return QueryBundle(
            query_str=query_bundle.query_str,
            image_path=query_bundle.image_path,
            custom_embedding_strs=strs,
            embedding=query_bundle.embedding,
        )

    def _get_prompts(self) -> PromptDictType:
        return {}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        """GRAVITY's query phase uses no prompt."""
