"""GravityEngine: the query phase over one loaded KB. No model call is made at query time."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Sequence
from datetime import date
from typing import TYPE_CHECKING

import numpy as np

from gravity_core.anchor_vectors import (
    ANCHOR_KINDS,
    EXPANSION_KIND,
    KindVectors,
    expansion_key,
    summary_vectors,
)
from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError
from gravity_core.query.blocks import RenderedAnchors, format_blocks, format_summaries
from gravity_core.query.config import ContextMode, QueryConfig
from gravity_core.query.expansion import expand
from gravity_core.query.index import AnchorIndex, ChromaAnchorIndex, NumpyAnchorIndex
from gravity_core.query.lexicon import AnchorLexicon
from gravity_core.query.selection import select
from gravity_core.query.temporal_match import parse_temporal_query, temporal_event_matches
from gravity_core.query.types import AnchorContext, ScoredAnchor
from gravity_core.schema import AnchorKind, KnowledgeBase
from gravity_core.store import AnchorStore
from gravity_core.tokens import TokenCounter

if TYPE_CHECKING:
    from gravity_core.build.builder import AnchorBuilder

__all__ = ["GravityEngine"]

logger = logging.getLogger(__name__)

#: Order in which the modules' anchors are selected (events use the entities found first).
_ORDER = (AnchorKind.ENTITY, AnchorKind.TOPIC, AnchorKind.EVENT)


class GravityEngine:
    """Answers ``query(question)`` with anchors, expanded queries and prompt blocks.

    Everything that depends only on the KB (lexicon, vectors) is prepared once here; a query
    embeds the question once (or takes the host's embedding) and reuses it for every module.

    Args:
        kb: the knowledge base.
        index: the anchor vectors (in-process numpy, or a Chroma collection).
        embedder: must be the embedder the KB's vectors were made with.
        config: default settings of each query (a query may pass its own).
        counter: token counter for the budget (cl100k, offline).
        summary_vectors: vectors of the KB's batch summaries, needed only by the '+Sum' baseline
            (embedded at its first query when not given).
        expansion_vectors: the vectors of expanded queries stored by the build; a query returns
            them with its expansions so the host search need not embed those again.
    """

    def __init__(
        self,
        kb: KnowledgeBase,
        index: AnchorIndex,
        embedder: Embedder,
        *,
        config: QueryConfig | None = None,
        counter: TokenCounter | None = None,
        summary_vectors: KindVectors | None = None,
        expansion_vectors: KindVectors | None = None,
    ) -> None:
        if index.embedder and index.embedder != embedder.name:
            raise ConfigurationError(
                f"the KB's vectors were made by '{index.embedder}', "
                f"but the query embedder is '{embedder.name}'"
            )
        self.kb = kb
        self.index = index
        self.embedder = embedder
        self.config = config or QueryConfig()
        self.counter = counter or TokenCounter()
        self.lexicon = AnchorLexicon.from_kb(kb)
        self.rendered = RenderedAnchors(kb, counter=self.counter)
        self._summary_vectors = summary_vectors
        self._expansions = expansion_vectors or KindVectors()
        self._expansion_rows = self._expansions.row_of()
        self._summary_lock = threading.Lock()
        self.reference_date = self.lexicon.latest_day or date.today()

    @classmethod
    def from_dir(
        cls,
        kb_dir: str | os.PathLike[str],
        *,
        embedder: Embedder | None = None,
        config: QueryConfig | None = None,
        index: AnchorIndex | None = None,
    ) -> GravityEngine:
        """Load a KB folder written by ``gravity build``.

        Args:
            kb_dir: the KB folder.
            embedder: defaults to the one named in the KB (``minilm-...`` or ``hashing-N``).
            config: default query settings.
            index: where the anchor vectors are searched: the in-process numpy index by default,
                or a :class:`~gravity_core.query.index.ChromaAnchorIndex` (embedded or a server,
                so several processes share one copy), which is synced with the KB first.
        """
        from gravity_core.providers import embedder_from_name

        loaded = AnchorStore(kb_dir).load(vector_kinds=ANCHOR_KINDS)  # the turn vectors are the builder's
        chosen = embedder or embedder_from_name(loaded.vectors.embedder)
        if index is None:
            index = NumpyAnchorIndex.from_vectors(loaded.vectors)
        elif isinstance(index, ChromaAnchorIndex):
            index.sync(loaded.vectors)
        return cls(
            loaded.kb,
            index,
            chosen,
            config=config,
            expansion_vectors=loaded.vectors.get(EXPANSION_KIND),
        )

    @classmethod
    def from_builder(cls, builder: AnchorBuilder, *, config: QueryConfig | None = None) -> GravityEngine:
        """An engine over what ``builder`` holds now (in memory, numpy index); make a new one after ``add``.

        Example:
            ```python
            builder.add(session_utterances)
            engine = GravityEngine.from_builder(builder)
            ```
        """
        vectors = builder.vectors  # brought up to date by every add
        return cls(
            builder.kb,
            NumpyAnchorIndex.from_vectors(vectors),
            builder.embedder,
            config=config,
            expansion_vectors=vectors.get(EXPANSION_KIND),
        )

    def fit_anchors(self, context: AnchorContext, token_budget: int) -> tuple[str, int]:
        """``context``'s anchors formatted again within ``token_budget`` tokens: ``(text, tokens)``.

        For a caller that shares one total budget between the anchors and the host's memories
        (see :meth:`ContextPolicy.anchor_tokens <gravity_core.context_policy.ContextPolicy.anchor_tokens>`);
        a budget below 1 gives ``("", 0)``.
        """
        if token_budget < 1:
            return "", 0
        _, text, _, tokens = format_blocks(
            self.kb, context.anchors, counter=self.counter, token_budget=token_budget, rendered=self.rendered
        )
        return text, tokens

    @property
    def relevance_floor(self) -> float | None:
        """The embedder's calibrated off-topic floor (``QueryConfig.relevance_floor`` overrides it)."""
        floor = getattr(self.embedder, "relevance_floor", None)
        return float(floor) if isinstance(floor, int | float) else None

    def embed_query(self, question: str) -> np.ndarray:
        """The question's embedding, as the engine computes it."""
        return np.asarray(self.embedder.embed([question])[0], dtype=np.float32)

    def known_expansion_vectors(self, expansions: Sequence[str]) -> list[np.ndarray | None]:
        """The stored vector of each expanded query (``None`` for one the build did not embed)."""
        rows = [self._expansion_rows.get(expansion_key(text)) for text in expansions]
        return [None if row is None else self._expansions.matrix[row] for row in rows]

    def query(
        self,
        question: str,
        *,
        config: QueryConfig | None = None,
        query_embedding: Sequence[float] | np.ndarray | None = None,
        question_date: date | None = None,
    ) -> AnchorContext:
        """Select anchors for ``question`` and format what to inject.

        Args:
            question: the user's question.
            config: settings for this query (default: the engine's).
            query_embedding: the question's embedding if the host already computed it with the
                same embedder; it is then not computed again.
            question_date: the date the question is asked, for phrases such as "last month"
                (default: the date of the KB's latest utterance).
        """
        cfg = config or self.config
        vector = self._vector(question, query_embedding)
        if cfg.mode is ContextMode.SUMMARIES:
            return self._summaries(question, vector, cfg)
        selected = self._select(question, vector, cfg, question_date or self.reference_date)
        floor = cfg.relevance_floor if cfg.relevance_floor is not None else self.relevance_floor
        if not _relevant(question, selected, floor, cfg.rerank):
            selected = []
        expansions = expand(self.kb, selected, cfg.expansion_budget, question) if cfg.expand else []
        blocks, text, kept, tokens = format_blocks(
            self.kb, selected, counter=self.counter, token_budget=cfg.token_budget, rendered=self.rendered
        )
        return AnchorContext(question, kept, expansions, blocks, text, tokens)

    async def aquery(
        self,
        question: str,
        *,
        config: QueryConfig | None = None,
        query_embedding: Sequence[float] | np.ndarray | None = None,
        question_date: date | None = None,
    ) -> AnchorContext:
        """:meth:`query` in a worker thread, so the event loop is not blocked by the scoring."""
        return await asyncio.to_thread(
            self.query, question, config=config, query_embedding=query_embedding, question_date=question_date
        )

    def _vector(self, question: str, given: Sequence[float] | np.ndarray | None) -> np.ndarray:
        if given is None:
            return self.embed_query(question)
        vector = np.asarray(given, dtype=np.float32).reshape(-1)
        if vector.shape[0] != self.embedder.dim:
            raise ConfigurationError(
                f"query_embedding has {vector.shape[0]} dimensions; the KB's embedder has {self.embedder.dim}"
            )
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm > 0 else vector

    def _select(self, question: str, vector: np.ndarray, cfg: QueryConfig, today: date) -> list[ScoredAnchor]:
        selected: list[ScoredAnchor] = []
        named = list(self.lexicon.participants(question))
        for kind in _ORDER:
            if kind not in cfg.modules:
                continue
            if kind is AnchorKind.ENTITY:
                native = self.lexicon.entities(question, cfg.candidate_pool)
            elif kind is AnchorKind.TOPIC:
                native = self.lexicon.topics(question, cfg.candidate_pool)
            else:
                native = self.lexicon.events(question, cfg.candidate_pool, named)
            reserved: list[ScoredAnchor] = []
            if kind is AnchorKind.EVENT and cfg.temporal_slots:
                temporal = parse_temporal_query(question, today)
                matches = temporal_event_matches(
                    self.kb, temporal, self.lexicon, native, min(cfg.temporal_slots, cfg.k_event)
                )
                if matches:
                    cosines = self.index.similarities(kind, vector, [i for i, _ in matches])
                    reserved = [ScoredAnchor(kind, i, cosines.get(i, s), "temporal") for i, s in matches]
            chosen = select(
                kind,
                native,
                self.index,
                vector,
                k=cfg.k_for(kind) - len(reserved),
                sigma=cfg.sigma_for(kind),
                pool=cfg.candidate_pool,
                rerank=cfg.rerank,
                exclude=frozenset(a.id for a in reserved),
            )
            selected.extend(reserved + chosen)
        return selected

    @property
    def summary_vectors(self) -> KindVectors:
        """Vectors of the KB's batch summaries (embedded once, at first use)."""
        with self._summary_lock:
            if self._summary_vectors is None:
                self._summary_vectors = summary_vectors(self.kb, self.embedder)
            return self._summary_vectors

    def _summaries(self, question: str, vector: np.ndarray, cfg: QueryConfig) -> AnchorContext:
        summaries = self.summary_vectors
        if not summaries.ids:
            raise ConfigurationError(
                "the '+Sum' baseline needs a KB built with batch summaries; this one has none"
            )
        scores = summaries.matrix @ vector
        best = np.argsort(-scores, kind="stable")[: cfg.k_summary]
        records = [self.kb.summaries[summaries.ids[i]] for i in best if summaries.ids[i] in self.kb.summaries]
        blocks, text, tokens = format_summaries(records, counter=self.counter, token_budget=cfg.token_budget)
        return AnchorContext(question, [], [], blocks, text, tokens)


def _relevant(question: str, selected: Sequence[ScoredAnchor], floor: float | None, reranked: bool) -> bool:
    """Whether the question is about the KB at all: an anchor close enough, or a dated event match.

    Without reranking (the '-rerank' ablation) scores are native matching scores, not cosines, so
    the floor does not apply.
    """
    if not question.strip():
        return False
    if floor is None or not reranked:
        return True
    return any(a.reason == "temporal" or a.score >= floor for a in selected)
