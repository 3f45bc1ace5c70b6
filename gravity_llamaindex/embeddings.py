"""Embedding adapters both ways: a GRAVITY embedder inside LlamaIndex, a LlamaIndex model inside GRAVITY."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.instrumentation import get_dispatcher

from gravity_core.embeddings.base import Embedder, Matrix
from gravity_core.embeddings.framework import FrameworkEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.llm.faults import provider_faults_as_errors

__all__ = ["GravityEmbedding", "LlamaIndexEmbedder", "aembed_texts", "as_gravity_embedder", "embed_texts"]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


class GravityEmbedding(BaseEmbedding):
    """A GRAVITY :class:`~gravity_core.embeddings.base.Embedder` as a LlamaIndex embedding model.

    With it a ``VectorStoreIndex`` runs on the same offline model as the KB (``MiniLMEmbedder``) or on
    the deterministic ``HashingEmbedder`` in tests, and the fusion retriever can hand the question's
    vector to the engine instead of embedding it twice. Queries and texts are embedded alike, and a
    batch of texts is one ``embed`` call.

    Args:
        embedder: the GRAVITY embedder.
        embed_batch_size: texts per ``embed`` call when LlamaIndex embeds nodes.
        callback_manager: LlamaIndex callback manager (legacy callbacks).

    Example:
        ```python
        from gravity_core.embeddings import MiniLMEmbedder

        index = VectorStoreIndex(nodes, embed_model=GravityEmbedding(MiniLMEmbedder()))
        ```
    """

    _embedder: Embedder = PrivateAttr()

    def __init__(
        self,
        embedder: Embedder,
        *,
        embed_batch_size: int = 64,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(embedder, Embedder):
            raise ConfigurationError(f"expected a GRAVITY Embedder, got {type(embedder).__name__}")
        super().__init__(
            model_name=embedder.name,
            embed_batch_size=embed_batch_size,
            callback_manager=callback_manager or CallbackManager(),
            **kwargs,
        )
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        """Class name (LlamaIndex convention)."""
        return "GravityEmbedding"

    @property
    def embedder(self) -> Embedder:
        """The wrapped GRAVITY embedder."""
        return self._embedder

    def _embed(self, texts: Sequence[str]) -> list[Embedding]:
        matrix = self._embedder.embed(list(texts))
        return [[float(x) for x in row] for row in np.asarray(matrix, dtype=np.float32)]

    def _get_query_embedding(self, query: str) -> Embedding:
        return self._embed([query])[0]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return (await asyncio.to_thread(self._embed, [query]))[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._embed([text])[0]

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await asyncio.to_thread(self._embed, [text]))[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self._embed(texts)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._embed, texts)


class LlamaIndexEmbedder(FrameworkEmbedder):
    """Any LlamaIndex embedding model as a GRAVITY :class:`~gravity_core.embeddings.base.Embedder`.

    Anchors and questions are both embedded as texts (``get_text_embedding_batch``), so similarities
    are symmetric; rows are L2-normalized as GRAVITY expects. The name goes into the KB, so a KB built
    with this embedder is queried only with the same model.

    Args:
        embed_model: the LlamaIndex model (``OpenAIEmbedding``, ``HuggingFaceEmbedding``...).
        name: the identifier recorded in the KB (default ``llamaindex:<class>:<model_name>``).
        dim: the vector dimension, if known; otherwise one probe text is embedded on first use.
    """

    def __init__(
        self, embed_model: BaseEmbedding, *, name: str | None = None, dim: int | None = None
    ) -> None:
        if not isinstance(embed_model, BaseEmbedding):
            raise ConfigurationError(f"expected a LlamaIndex BaseEmbedding, got {type(embed_model).__name__}")
        default = f"llamaindex:{type(embed_model).__name__}:{embed_model.model_name}"
        super().__init__(embed_model, name=name or default, dim=dim)
        self.embed_model = embed_model

    @dispatcher.span
    def embed(self, texts: Sequence[str]) -> Matrix:
        """:meth:`FrameworkEmbedder.embed`, as a span of LlamaIndex's instrumentation."""
        return super().embed(texts)

    def _rows(self, texts: list[str]) -> list[Embedding]:
        with provider_faults_as_errors(self.name):
            return self.embed_model.get_text_embedding_batch(texts)


def as_gravity_embedder(model: Embedder | BaseEmbedding) -> Embedder:
    """A GRAVITY embedder for ``model``.

    A :class:`GravityEmbedding` gives back the embedder it wraps (so the KB records that embedder's
    name, e.g. ``minilm-l6-v2-int8``), another LlamaIndex model is wrapped in
    :class:`LlamaIndexEmbedder`, and a GRAVITY embedder is returned as is.
    """
    if isinstance(model, GravityEmbedding):
        return model.embedder
    if isinstance(model, BaseEmbedding):
        return LlamaIndexEmbedder(model)
    if isinstance(model, Embedder):
        return model
    raise ConfigurationError(
        f"expected a GRAVITY Embedder or a LlamaIndex BaseEmbedding, got {type(model).__name__}"
    )


def embed_texts(model: BaseEmbedding | None, texts: list[str], *, batch: bool) -> list[list[float]]:
    """``texts`` embedded by ``model``: as one text batch, or (``batch`` off) one query embedding each."""
    if model is None:
        raise ConfigurationError("no embedding model to embed the queries with")
    if batch:
        return model.get_text_embedding_batch(texts)
    return [model.get_query_embedding(text) for text in texts]


async def aembed_texts(model: BaseEmbedding | None, texts: list[str], *, batch: bool) -> list[list[float]]:
    """Async :func:`embed_texts` (the query embeddings concurrently)."""
    if model is None:
        raise ConfigurationError("no embedding model to embed the queries with")
    if batch:
        return await model.aget_text_embedding_batch(texts)
    return list(await asyncio.gather(*(model.aget_query_embedding(text) for text in texts)))
