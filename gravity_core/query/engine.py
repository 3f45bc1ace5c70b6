"""GravityEngine: the query phase over one loaded KB. No model call is made at query time."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import date
from functools import cache, partial
from typing import TYPE_CHECKING

import numpy as np

from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError
from gravity_core.query.blocks import RenderedAnchors, format_blocks, format_summaries
from gravity_core.query.config import ContextMode, QueryConfig
from gravity_core.query.expansion import expand
from gravity_core.query.index import AnchorIndex, ChromaAnchorIndex, NumpyAnchorIndex
from gravity_core.query.index.base import NearestSearch
from gravity_core.query.index.numpy_index import DEFAULT_IVF
from gravity_core.query.live import (
    BuilderSource,
    FixedKB,
    KBSource,
    KBView,
    LiveKB,
    StoreSource,
    first_reading,
)
from gravity_core.query.matching import AnchorLexicon, parse_temporal_query, temporal_event_matches
from gravity_core.query.selection import select
from gravity_core.query.state import KBSnapshot
from gravity_core.query.types import AnchorContext, ScoredAnchor
from gravity_core.schema import AnchorKind, KnowledgeBase
from gravity_core.storage.anchor_vectors import EXPANSION_KIND, AnchorVectors, KindVectors
from gravity_core.storage.packed_kb import KBReader
from gravity_core.storage.store import AnchorStore, LoadedKB
from gravity_core.text.tokens import TokenCounter

if TYPE_CHECKING:
    from gravity_core.build.builder import AnchorBuilder

__all__ = ["GravityEngine"]

logger = logging.getLogger(__name__)

#: Order in which the modules' anchors are selected (events use the entities found first).
_ORDER = (AnchorKind.ENTITY, AnchorKind.TOPIC, AnchorKind.EVENT)


class GravityEngine:
    """Answers ``query(question)`` with anchors, expanded queries and prompt blocks.

    Everything that depends only on the KB (lexicon, vectors) is prepared once per KB version
    (a :class:`~gravity_core.query.state.KBSnapshot`); a query embeds the question once (or takes
    the host's embedding) and reuses it for every module.

    An engine made with :meth:`from_dir` or :meth:`from_builder` follows its KB (``follow=True``,
    the default): each query first checks, cheaply, whether the KB changed (one ``stat`` of the
    folder's manifest, or identity checks of the builder's vectors) and if so reads it again and
    swaps in the new version whole. A query uses one version from start to end, so it never sees a
    half-written or half-read KB; if the new version cannot be read yet, the one loaded stays in
    use (see :mod:`gravity_core.query.live`). :attr:`revision` counts the versions served, for
    caches built on the engine. An engine made from a KB object directly is a snapshot.

    Args:
        kb: the knowledge base (a ``KnowledgeBase``, or a packed one, see
            :mod:`~gravity_core.storage.packed_kb`).
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
        kb: KBReader,
        index: AnchorIndex,
        embedder: Embedder,
        *,
        config: QueryConfig | None = None,
        counter: TokenCounter | None = None,
        summary_vectors: KindVectors | None = None,
        expansion_vectors: KindVectors | None = None,
    ) -> None:
        _check_embedder(index.embedder, embedder)
        self.embedder = embedder
        self.config = config or QueryConfig()
        self.counter = counter or TokenCounter()
        first = KBSnapshot.of(
            kb,
            index,
            counter=self.counter,
            expansion_vectors=expansion_vectors,
            summary_vectors=summary_vectors,
        )
        self._view: KBView = FixedKB(first)

    @classmethod
    def from_dir(
        cls,
        kb_dir: str | os.PathLike[str],
        *,
        embedder: Embedder | None = None,
        config: QueryConfig | None = None,
        index: AnchorIndex | None = None,
        follow: bool = True,
        counter: TokenCounter | None = None,
    ) -> GravityEngine:
        """Load a KB folder written by ``gravity build``, and (by default) follow it.

        Args:
            kb_dir: the KB folder.
            embedder: defaults to the one named in the KB (``minilm-...`` or ``hashing-N``).
            config: default query settings.
            index: where the anchor vectors are searched: the in-process numpy index by default,
                or a :class:`~gravity_core.query.index.ChromaAnchorIndex` (embedded or a server,
                so several processes share one copy), which is synced with the KB first (and again
                at each new version the engine follows).
            follow: serve the folder's newest complete generation at every query (a build by
                another process or thread shows up at its next save); ``False`` keeps the
                generation loaded now.
            counter: the token counter (engines of many KBs share one: its encoding is loaded once).

        Raises:
            AnchorStoreError: the folder holds no KB, or it does not load.
            ConfigurationError: ``follow`` with an ``index`` the engine cannot bring up to date
                (anything but a ``ChromaAnchorIndex``), or an ``embedder`` other than the KB's.
        """
        from gravity_core.providers import embedder_from_name

        if follow and index is not None and not isinstance(index, ChromaAnchorIndex):
            raise ConfigurationError(
                f"an engine that follows its KB rebuilds or syncs its index at each new version; "
                f"it cannot do so with a {type(index).__name__}: give a ChromaAnchorIndex, no index "
                "(the numpy one), or follow=False"
            )
        # Chroma gets the vectors in float32 and syncs by digest; the numpy index holds large kinds
        # in float16 and reads no digest.
        numpy_index = index is None
        source = StoreSource(
            AnchorStore(kb_dir),
            half_from=DEFAULT_IVF.min_rows if numpy_index else None,
            digests=not numpy_index,
        )
        loaded, mark = first_reading(source)
        chosen = embedder or embedder_from_name(loaded.vectors.embedder)
        engine = cls(
            loaded.kb,
            _index_for(loaded.vectors, index, chosen),
            chosen,
            config=config,
            counter=counter,
            expansion_vectors=loaded.vectors.get(EXPANSION_KIND),
        )
        engine._view = engine._view_of(source, loaded, mark, index, follow)
        return engine

    @classmethod
    def from_builder(
        cls, builder: AnchorBuilder, *, config: QueryConfig | None = None, follow: bool = True
    ) -> GravityEngine:
        """An engine over what ``builder`` holds (in memory, numpy index), following its ``add``s.

        With ``follow`` (the default) a query after ``builder.add(...)`` sees what it added; with
        ``follow=False`` the engine keeps what the builder held when it was made. Either way the
        engine reads a copy of the builder's KB, so a later ``add`` does not change it under a
        query. A query must not overlap an ``add`` running in another thread (see
        :class:`~gravity_core.query.live.BuilderSource`); across threads or processes, give the
        builder a store and follow the folder with :meth:`from_dir`.

        Example:
            ```python
            engine = GravityEngine.from_builder(builder)
            builder.add(session_utterances)
            engine.query("Where does Maya work now?")   # sees the new session
            ```
        """
        source = BuilderSource(builder)
        loaded, mark = first_reading(source)
        engine = cls(
            loaded.kb,
            NumpyAnchorIndex.from_vectors(loaded.vectors),
            builder.embedder,
            config=config,
            expansion_vectors=loaded.vectors.get(EXPANSION_KIND),
        )
        engine._view = engine._view_of(source, loaded, mark, None, follow)
        return engine

    def _view_of(
        self, source: KBSource, loaded: LoadedKB, mark: object, index: AnchorIndex | None, follow: bool
    ) -> KBView:
        """How this engine (just made over ``loaded``) reads its KB from now on."""
        first = replace(self._view.snapshot, generation=loaded.generation)
        if not follow:
            return FixedKB(first)

        def prepare(fresh: LoadedKB, revision: int) -> KBSnapshot:
            _check_embedder(fresh.vectors.embedder, self.embedder)
            return KBSnapshot.of(
                fresh.kb,
                _index_for(fresh.vectors, index, self.embedder),
                counter=self.counter,
                expansion_vectors=fresh.vectors.get(EXPANSION_KIND),
                generation=fresh.generation,
                revision=revision,
            )

        return LiveKB(source, prepare, first, mark)

    # -- the KB served -------------------------------------------------------------------------

    @property
    def follows(self) -> bool:
        """Whether the engine follows its KB folder or builder (see :meth:`from_dir`)."""
        return self._view.follows

    def refresh(self) -> bool:
        """Check the KB now (a query does this itself); whether a new version is served.

        Also retries at once a new version that could not be read before (a query waits for the
        retry interval). An engine that does not follow returns ``False``.
        """
        return self._view.refresh()

    @property
    def snapshot(self) -> KBSnapshot:
        """The KB version served now, with what was prepared from it (no check is made)."""
        return self._view.snapshot

    def current_snapshot(self) -> KBSnapshot:
        """The KB version a query started now would use: checks for a new one first, as a query does.

        For a cache on the engine: key its answers on the snapshot's ``revision``.
        """
        return self._view.current()

    @property
    def revision(self) -> int:
        """Counts the KB versions this engine has served (0 for the first); a cache keys on it."""
        return self._view.snapshot.revision

    @property
    def generation(self) -> int | None:
        """The store generation served now (``None`` for a KB that did not come from a folder)."""
        return self._view.snapshot.generation

    @property
    def kb(self) -> KnowledgeBase:
        """The knowledge base served now, as a ``KnowledgeBase``.

        An engine over a folder holds its KB packed (pydantic models are made only for the records
        a query reads); the first ``kb`` of each version served makes all of them, which costs
        the memory packing saves. To read a few records, use :attr:`records`.
        """
        return self._view.snapshot.whole_kb()

    @property
    def records(self) -> KBReader:
        """The records of the KB served now, by id, as the queries read them (packed or not)."""
        return self._view.snapshot.kb

    @property
    def index(self) -> AnchorIndex:
        """The anchor index of the KB served now."""
        return self._view.snapshot.index

    @property
    def lexicon(self) -> AnchorLexicon:
        """The native-matching tables of the KB served now, under the default weights.

        A query reweighs them by its ``QueryConfig.weights`` (:meth:`AnchorLexicon.reweighted`).
        """
        return self._view.snapshot.lexicon

    @property
    def rendered(self) -> RenderedAnchors:
        """The rendered anchors of the KB served now."""
        return self._view.snapshot.rendered

    @property
    def reference_date(self) -> date:
        """The date questions are asked by default: the KB's latest day (else today)."""
        return self._view.snapshot.reference_date

    def fit_anchors(self, context: AnchorContext, token_budget: int) -> tuple[str, int]:
        """``context``'s anchors formatted again within ``token_budget`` tokens: ``(text, tokens)``.

        For a caller that shares one total budget between the anchors and the host's memories
        (see :meth:`ContextPolicy.anchor_tokens <gravity_core.context.policy.ContextPolicy.anchor_tokens>`);
        a budget below 1 gives ``("", 0)``.
        """
        if token_budget < 1:
            return "", 0
        served = self._view.snapshot
        _, text, _, tokens = format_blocks(
            served.kb,
            context.anchors,
            counter=self.counter,
            token_budget=token_budget,
            rendered=served.rendered,
            focus=served.lexicon.focus(context.question),
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
        stored = self._view.snapshot.expansions
        return [stored.vector(text) for text in expansions]

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
        served = self._view.current()  # one KB version for the whole query
        cfg = config or self.config
        vector = self._vector(question, query_embedding)
        if cfg.mode is ContextMode.SUMMARIES:
            return self._summaries(served, question, vector, cfg)
        selected = self._select(served, question, vector, cfg, question_date or served.reference_date)
        floor = cfg.relevance_floor if cfg.relevance_floor is not None else self.relevance_floor
        if not _relevant(question, selected, floor, cfg.rerank):
            selected = []
        focus = served.lexicon.focus(question)
        expansions = (
            expand(served.kb, selected, cfg.expansion_budget, question, texts=served.expansion_texts)
            if cfg.expand
            else []
        )
        blocks, text, kept, tokens = format_blocks(
            served.kb,
            selected,
            counter=self.counter,
            token_budget=cfg.token_budget,
            rendered=served.rendered,
            focus=focus,
        )
        sources = served.sources.sources(selected, focus)
        return AnchorContext(question, kept, expansions, blocks, text, tokens, sources)

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

    def _select(
        self, served: KBSnapshot, question: str, vector: np.ndarray, cfg: QueryConfig, today: date
    ) -> list[ScoredAnchor]:
        selected: list[ScoredAnchor] = []
        lexicon, index = served.lexicon.reweighted(cfg.weights), served.index
        named = cache(partial(lexicon.participants, question))
        kinds = [kind for kind in _ORDER if kind in cfg.modules]
        nearest: dict[AnchorKind, list[tuple[str, float]]] = {}
        if cfg.rerank and isinstance(index, NearestSearch):
            # What select asks each kind for (k, reserved slots included, and one to see a tie);
            # from the candidate pool on, select searches the pool itself.
            limits = {kind: cfg.k_for(kind) + 1 for kind in kinds if 0 < cfg.k_for(kind) < cfg.candidate_pool}
            nearest = index.top_each(vector, limits)
        for kind in kinds:
            native: Callable[[], Mapping[str, float]]
            if kind is AnchorKind.ENTITY:
                native = cache(partial(lexicon.entities, question, cfg.candidate_pool))
            elif kind is AnchorKind.TOPIC:
                native = cache(partial(lexicon.topics, question, cfg.candidate_pool))
            else:
                native = cache(lambda: lexicon.events(question, cfg.candidate_pool, named()))
            reserved: list[ScoredAnchor] = []
            if kind is AnchorKind.EVENT and cfg.temporal_slots:
                temporal = parse_temporal_query(question, today)
                matches = (
                    temporal_event_matches(
                        served.kb, temporal, lexicon, native(), min(cfg.temporal_slots, cfg.k_event)
                    )
                    if temporal.is_temporal
                    else []
                )
                if matches:
                    cosines = index.similarities(kind, vector, [i for i, _ in matches])
                    reserved = [ScoredAnchor(kind, i, cosines.get(i, s), "temporal") for i, s in matches]
            chosen = select(
                kind,
                native,
                index,
                vector,
                k=cfg.k_for(kind) - len(reserved),
                sigma=cfg.sigma_for(kind),
                pool=cfg.candidate_pool,
                rerank=cfg.rerank,
                exclude=frozenset(a.id for a in reserved),
                nearest=nearest.get(kind),
            )
            selected.extend(reserved + chosen)
        return selected

    @property
    def summary_vectors(self) -> KindVectors:
        """Vectors of the served KB's batch summaries (embedded once per KB version, at first use)."""
        return self._view.snapshot.summary_vectors(self.embedder)

    def _summaries(
        self, served: KBSnapshot, question: str, vector: np.ndarray, cfg: QueryConfig
    ) -> AnchorContext:
        summaries = served.summary_vectors(self.embedder)
        if not summaries.ids:
            raise ConfigurationError(
                "the '+Sum' baseline needs a KB built with batch summaries; this one has none"
            )
        scores = summaries.matrix @ vector
        best = np.argsort(-scores, kind="stable")[: cfg.k_summary]
        kb = served.kb
        records = [kb.summaries[summaries.ids[i]] for i in best if summaries.ids[i] in kb.summaries]
        blocks, text, tokens = format_summaries(records, counter=self.counter, token_budget=cfg.token_budget)
        return AnchorContext(question, [], [], blocks, text, tokens)


def _check_embedder(made_by: str, embedder: Embedder) -> None:
    if made_by and made_by != embedder.name:
        raise ConfigurationError(
            f"the KB's vectors were made by '{made_by}', but the query embedder is '{embedder.name}'"
        )


def _index_for(vectors: AnchorVectors, given: AnchorIndex | None, embedder: Embedder) -> AnchorIndex:
    """The index to search ``vectors`` with: a new numpy one, or ``given`` (a Chroma index synced first)."""
    if given is None:
        return NumpyAnchorIndex.from_vectors(vectors)
    if isinstance(given, ChromaAnchorIndex):
        _check_embedder(vectors.embedder, embedder)  # before the sync rewrites the collections
        given.sync(vectors)
    return given


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
