"""Embedding adapters in both directions: LangChain ``Embeddings`` <-> GRAVITY ``Embedder``.

- :class:`LangChainEmbedder` lets any LangChain embedding model (``OpenAIEmbeddings``, a
  HuggingFace model, ...) build and query a GRAVITY KB; the engine also reranks with it.
- :class:`GravityEmbeddings` lets a GRAVITY embedder (the offline MiniLM, or the hashing embedder
  of tests) back a LangChain vector store.

:func:`shares_embedder` tells whether a store's embeddings and the engine's embedder are the same
model, in which case the retriever embeds the question once for both.
"""

from __future__ import annotations

import logging

from langchain_core.embeddings import Embeddings

from gravity_core.embeddings.base import Embedder
from gravity_core.embeddings.framework import FrameworkEmbedder, shares_vectors
from gravity_core.errors import ConfigurationError
from gravity_core.llm.faults import provider_faults_as_errors

__all__ = ["GravityEmbeddings", "LangChainEmbedder", "shares_embedder"]

logger = logging.getLogger(__name__)


def _default_name(embeddings: Embeddings) -> str:
    model = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
    kind = type(embeddings).__name__
    return f"langchain:{kind}:{model}" if isinstance(model, str) and model else f"langchain:{kind}"


class LangChainEmbedder(FrameworkEmbedder):
    """A LangChain ``Embeddings`` as GRAVITY's embedder (anchor vectors, query reranking).

    Texts go through ``embed_documents`` in one call per :meth:`embed`; rows are L2-normalized as
    the :class:`~gravity_core.embeddings.base.Embedder` protocol requires.

    Args:
        embeddings: any LangChain embedding model.
        name: identifies the model in the KB, so a KB is never queried with another model.
            Defaults to ``langchain:<class>:<model>``, e.g.
            ``langchain:OpenAIEmbeddings:text-embedding-3-small``; pass your own when the class
            and model name do not pin the vectors down.
        dim: the vector dimension; when omitted it is read from the first embedding (one probe
            call if :attr:`dim` is asked for before anything was embedded).

    Example:
        ```python
        from langchain_openai import OpenAIEmbeddings
        embedder = LangChainEmbedder(OpenAIEmbeddings(model="text-embedding-3-small"))
        ```
    """

    def __init__(self, embeddings: Embeddings, *, name: str | None = None, dim: int | None = None) -> None:
        if not isinstance(embeddings, Embeddings):
            raise ConfigurationError(
                f"LangChainEmbedder needs a langchain_core Embeddings, got {type(embeddings).__name__}"
            )
        super().__init__(embeddings, name=name or _default_name(embeddings), dim=dim)
        self.embeddings = embeddings

    def _rows(self, texts: list[str]) -> list[list[float]]:
        with provider_faults_as_errors(self.name):
            return self.embeddings.embed_documents(texts)


class GravityEmbeddings(Embeddings):
    """A GRAVITY embedder as LangChain ``Embeddings``, to back any LangChain vector store.

    This is how the offline MiniLM gets into LangChain, and how a store can share the KB's
    embedder with the engine (the retriever then embeds the question once for both).

    Args:
        embedder: any GRAVITY embedder, e.g. ``MiniLMEmbedder()`` or ``engine.embedder``.
    """

    def __init__(self, embedder: Embedder) -> None:
        if not isinstance(embedder, Embedder):
            raise ConfigurationError(
                f"GravityEmbeddings needs a GRAVITY Embedder, got {type(embedder).__name__}"
            )
        self.embedder = embedder

    def __repr__(self) -> str:
        return f"GravityEmbeddings({self.embedder!r})"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed texts in one batch; rows are L2-normalized."""
        if not texts:
            return []
        return [[float(x) for x in row] for row in self.embedder.embed(texts)]

    def embed_query(self, text: str) -> list[float]:
        """Embed one query (GRAVITY embedders treat queries and documents alike)."""
        return [float(x) for x in self.embedder.embed([text])[0]]


def shares_embedder(embeddings: Embeddings | None, embedder: Embedder) -> bool:
    """Whether ``embeddings`` (a store's) and ``embedder`` (the engine's) are the same model.

    They are (:func:`~gravity_core.embeddings.framework.shares_vectors`) for a
    :class:`GravityEmbeddings` over an embedder of the same name, or a :class:`LangChainEmbedder`
    over this very ``embeddings``.
    """
    wrapped = embeddings.embedder if isinstance(embeddings, GravityEmbeddings) else None
    return shares_vectors(embedder, wrapped=wrapped, model=embeddings)
