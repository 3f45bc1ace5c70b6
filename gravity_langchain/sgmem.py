"""SGMem as a LangChain retriever, so it can be the host memory that GRAVITY wraps.

``SGMemRetriever(sgmem=memory, k=4)`` returns SGMem's chunks as ``Document`` objects (id = chunk id,
metadata: granularity, score, utterance ids, sentence ids, session, timestamp). Wrap it like any
retriever: ``GravityRetriever(engine=engine, retriever=SGMemRetriever(sgmem=memory))`` searches
it with the question and fetches the selected anchors' source turns through :meth:`SGMemRetriever.fetch_turns`
(the chunks holding them, merged by the context policy; expansions only under a policy that places
them, such as ``EXPANDING_POLICY``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from gravity_core.errors import ConfigurationError
from gravity_core.sgmem import (
    ChunkGranularity,
    MatchedMemory,
    RankedChunk,
    RetrievalConfig,
    SGMem,
    SGMemResult,
)
from gravity_core.sgmem.types import chunk_metadata, memory_metadata
from gravity_langchain.retrieval_call import refuse_unknown_arguments

__all__ = ["SGMemRetriever", "chunk_document", "memory_document"]

_SETTINGS = ("k", "granularity", "token_budget", "hops")
_INSTEAD = {
    "top_k": "use k=",
    "question_date": "SGMem does not resolve dates: give question_date to the GravityRetriever that wraps it",
    "search_type": "SGMem ranks by its own graph search; there is no search_type",
}


def chunk_document(chunk: RankedChunk) -> Document:
    """A retrieved chunk as a LangChain ``Document`` (``id`` = the chunk id)."""
    return Document(
        id=chunk.id,
        page_content=chunk.text,
        metadata=chunk_metadata(chunk),
    )


def memory_document(memory: MatchedMemory) -> Document:
    """A generated memory (summary, fact, insight) as a LangChain ``Document``."""
    return Document(
        id=memory.id,
        page_content=memory.text,
        metadata=memory_metadata(memory),
    )


class SGMemRetriever(BaseRetriever):
    """Retrieves SGMem chunks (turns, rounds or sessions) for a query.

    Attributes:
        sgmem: the SGMem index.
        k: chunks returned at most (``invoke(q, k=2)`` overrides it for one call; so do
            ``granularity``, ``token_budget`` and ``hops``).
        granularity: ``"turn"``, ``"round"`` or ``"session"``.
        token_budget: cl100k tokens of the returned texts; ``None`` (default) for no budget, so
            exactly ``k`` chunks come back when the index has that many.
        hops: graph hops (default: the config's).
        config: SGMem retrieval settings (default: the index's).
        include_memories: also return the matched generated memories, after the chunks (they are
            not counted in ``k``).

    Example:
        ```python
        retriever = SGMemRetriever(sgmem=SGMem.load("sgmem-dir"), k=4, granularity="round")
        docs = retriever.invoke("Where did Maya go hiking?")
        ```
    """

    sgmem: SGMem
    k: int = 4
    granularity: ChunkGranularity = ChunkGranularity.TURN
    token_budget: int | None = None
    hops: int | None = None
    config: RetrievalConfig | None = None
    include_memories: bool = False

    def __init__(self, **data: Any) -> None:
        refuse_unknown_arguments(type(self), data, _INSTEAD)
        super().__init__(**data)
        if self.k < 1:
            raise ConfigurationError(f"k must be at least 1, got {self.k}")

    def _settings(self, overrides: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(overrides) - set(_SETTINGS))
        if unknown:
            hints = "".join(f" ({_INSTEAD[name]})" for name in unknown if name in _INSTEAD)
            raise ConfigurationError(
                f"SGMemRetriever takes {', '.join(_SETTINGS)}; got {', '.join(unknown)}{hints}"
            )
        settings = {name: getattr(self, name) for name in _SETTINGS}
        settings.update({name: value for name, value in overrides.items() if value is not None})
        if settings["k"] < 1:
            raise ConfigurationError(f"k must be at least 1, got {settings['k']}")
        return settings

    def _search(self, query: str, overrides: dict[str, Any]) -> SGMemResult:
        settings = self._settings(overrides)
        config = self.config or self.sgmem.config
        if settings["token_budget"] is None:
            config = config.model_copy(update={"token_budget": None})
        return self.sgmem.retrieve(
            query,
            config=config,
            token_budget=settings["token_budget"],
            granularity=settings["granularity"],
            hops=settings["hops"],
            max_chunks=settings["k"],
        )

    def _documents(self, result: SGMemResult) -> list[Document]:
        documents = [chunk_document(c) for c in result.chunks]
        if self.include_memories:
            documents.extend(memory_document(m) for m in result.memories)
        return documents

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return self._documents(self._search(query, kwargs))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        result = await asyncio.to_thread(self._search, query, kwargs)
        return self._documents(result)

    def fetch_turns(self, utterance_ids: Sequence[str]) -> list[Document]:
        """The chunks (of this retriever's granularity) that hold these turns, whole, each once.

        Retrieval by provenance: a :class:`~gravity_langchain.retriever.GravityRetriever` wrapping
        this retriever fetches the selected anchors' source turns through it.
        """
        chunks = self.sgmem.chunks_holding(utterance_ids, granularity=self.granularity)
        return [chunk_document(chunk) for chunk in chunks]

    async def afetch_turns(self, utterance_ids: Sequence[str]) -> list[Document]:
        """Async :meth:`fetch_turns`."""
        return await asyncio.to_thread(self.fetch_turns, utterance_ids)
