"""SGMem as a LlamaIndex retriever, so it can be the host memory that GRAVITY wraps.

``SGMemRetriever(memory, similarity_top_k=4)`` returns SGMem's chunks as ``NodeWithScore`` objects
(``TextNode`` with ``id_`` = chunk id; metadata: granularity, score, utterance ids, sentence ids,
session, timestamp). Wrap it like any retriever: ``GravityFusionRetriever(SGMemRetriever(memory),
engine)`` searches it with the question (and GRAVITY's expansions, under a policy that places them,
such as ``EXPANDING_POLICY``) and merges the results by the context policy. The
retriever exposes SGMem's embedder as its embedding model, so the fusion retriever embeds the
queries with the same model and this retriever reuses the vectors it is handed.
"""

from __future__ import annotations

import asyncio

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from gravity_core.context.provenance import UTTERANCE_IDS_KEY
from gravity_core.errors import ConfigurationError
from gravity_core.sgmem.config import ChunkGranularity, RetrievalConfig
from gravity_core.sgmem.index import SGMem
from gravity_core.sgmem.types import MatchedMemory, RankedChunk, SGMemResult, chunk_metadata, memory_metadata
from gravity_llamaindex.embeddings import GravityEmbedding

__all__ = ["SGMemRetriever", "chunk_node", "memory_node"]

# The text already shows ids and dates: keep the metadata out of prompts and embeddings.
_HIDDEN = [
    "source",
    "kind",
    "granularity",
    "score",
    "utterance_ids",
    UTTERANCE_IDS_KEY,
    "sentence_ids",
    "session",
    "timestamp",
    "truncated",
]


def chunk_node(chunk: RankedChunk) -> NodeWithScore:
    """A retrieved chunk as a LlamaIndex ``NodeWithScore`` (node id = the chunk id)."""
    node = TextNode(
        id_=chunk.id,
        text=chunk.text,
        metadata=chunk_metadata(chunk),
        excluded_llm_metadata_keys=list(_HIDDEN),
        excluded_embed_metadata_keys=list(_HIDDEN),
    )
    return NodeWithScore(node=node, score=chunk.score)


def memory_node(memory: MatchedMemory) -> NodeWithScore:
    """A generated memory (summary, fact, insight) as a LlamaIndex ``NodeWithScore``."""
    node = TextNode(
        id_=memory.id,
        text=memory.text,
        metadata=memory_metadata(memory),
        excluded_llm_metadata_keys=list(_HIDDEN),
        excluded_embed_metadata_keys=list(_HIDDEN),
    )
    return NodeWithScore(node=node, score=memory.score)


class SGMemRetriever(BaseRetriever):
    """Retrieves SGMem chunks (turns, rounds or sessions) for a query bundle.

    Args:
        sgmem: the SGMem index.
        similarity_top_k: chunks returned at most.
        granularity: ``"turn"``, ``"round"`` or ``"session"``.
        token_budget: cl100k tokens of the returned texts; ``None`` (default) for no budget.
        hops: graph hops (default: the config's).
        config: SGMem retrieval settings (default: the index's).
        include_memories: also return the matched generated memories, after the chunks (not
            counted in ``similarity_top_k``).
        use_bundle_embedding: search with ``query_bundle.embedding`` when one is given with the
            index's dimension (LlamaIndex's convention); it must come from SGMem's embedder, which
            :attr:`embed_model` exposes.
        callback_manager: LlamaIndex callback manager (legacy callbacks).

    Raises:
        ConfigurationError: ``similarity_top_k`` below 1 or an unknown granularity.

    Example:
        ```python
        retriever = SGMemRetriever(SGMem.load("sgmem-dir"), similarity_top_k=4, granularity="round")
        nodes = retriever.retrieve("Where did Maya go hiking?")
        ```
    """

    def __init__(
        self,
        sgmem: SGMem,
        *,
        similarity_top_k: int = 4,
        granularity: ChunkGranularity | str = ChunkGranularity.TURN,
        token_budget: int | None = None,
        hops: int | None = None,
        config: RetrievalConfig | None = None,
        include_memories: bool = False,
        use_bundle_embedding: bool = True,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if similarity_top_k < 1:
            raise ConfigurationError(f"similarity_top_k must be >= 1, got {similarity_top_k}")
        super().__init__(callback_manager=callback_manager)
        self._sgmem = sgmem
        base = config or sgmem.config
        if token_budget is None:
            base = base.model_copy(update={"token_budget": None})
        self._config = sgmem.resolve_config(
            base, token_budget=token_budget, granularity=granularity, hops=hops, max_chunks=similarity_top_k
        )
        self._include_memories = include_memories
        self._use_bundle_embedding = use_bundle_embedding
        # GravityFusionRetriever embeds the queries with a wrapped retriever's public ``embed_model``.
        self._embed_model = GravityEmbedding(sgmem.embedder)

    @property
    def sgmem(self) -> SGMem:
        """The SGMem index."""
        return self._sgmem

    @property
    def embed_model(self) -> GravityEmbedding:
        """SGMem's embedder as a LlamaIndex embedding model."""
        return self._embed_model

    @property
    def config(self) -> RetrievalConfig:
        """The retrieval settings of every search."""
        return self._config

    def _search(self, query_bundle: QueryBundle) -> SGMemResult:
        embedding = query_bundle.embedding
        usable = (
            self._use_bundle_embedding
            and embedding is not None
            and len(embedding) == self._sgmem.embedder.dim
        )
        return self._sgmem.retrieve(
            query_bundle.query_str, config=self._config, query_embedding=embedding if usable else None
        )

    def _nodes(self, result: SGMemResult) -> list[NodeWithScore]:
        nodes = [chunk_node(c) for c in result.chunks]
        if self._include_memories:
            nodes.extend(memory_node(m) for m in result.memories)
        return nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(self._search(query_bundle))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(await asyncio.to_thread(self._search, query_bundle))
