"""SGMem: a sentence-graph memory over conversation utterances (build, update, persist, retrieve)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.embeddings.base import Embedder, Matrix
from gravity_core.errors import ConfigurationError, ProviderError, UnexpectedModelOutput
from gravity_core.llm.base import ChatModel
from gravity_core.llm.cache import ResponseCache
from gravity_core.schema import Utterance
from gravity_core.sgmem.chroma_store import ChromaSGMemStore
from gravity_core.sgmem.config import ChunkGranularity, GraphConfig, RetrievalConfig
from gravity_core.sgmem.memories import Memory, MemoryGenerator, session_digest
from gravity_core.sgmem.persist import load_state, save_state
from gravity_core.sgmem.retrieval import (
    ChunkHit,
    ChunkTexts,
    Ranking,
    fuse,
    pack,
    rank,
    row_dots,
    top_indices,
    whole_chunk,
)
from gravity_core.sgmem.state import SGMemState
from gravity_core.sgmem.types import RankedChunk, SGMemResult
from gravity_core.sgmem.units import DialogueUnits
from gravity_core.text.tokens import TokenCounter

__all__ = ["AddReport", "SGMem"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AddReport:
    """What one :meth:`SGMem.add` did.

    Attributes:
        added: utterances added as new turns.
        skipped: utterances already in the index (by id), ignored.
        sentences: new sentences (graph nodes).
        edges: directed graph edges after the add.
        memories: memories made (for new or extended sessions).
        failed_sessions: sessions whose memories could not be made (kept stale; retried by
            :meth:`SGMem.refresh_memories`).
    """

    added: int = 0
    skipped: int = 0
    sentences: int = 0
    edges: int = 0
    memories: int = 0
    failed_sessions: tuple[str, ...] = ()


class SGMem:
    """Sentence Graph Memory: retrieval from a dialogue by vector search plus sentence-graph expansion.

    The dialogue is split into sessions, rounds, turns and sentences, every unit embedded once and
    sentences linked by a kNN graph; the hits of vector search plus graph expansion are mapped back
    to chunks of the chosen granularity, within a token budget.

    Example:
        ```python
        from gravity_core.embeddings import HashingEmbedder
        from gravity_core.loaders import load_conversation
        from gravity_core.sgmem import SGMem

        memory = SGMem(HashingEmbedder())
        memory.add(load_conversation("examples/sample_conversation.jsonl"))
        result = memory.retrieve("Where did Maya go hiking?", token_budget=400, granularity="round")
        for chunk in result.chunks:
            print(chunk.score, chunk.utterance_ids)
        ```

    Args:
        embedder: embeds every unit and the questions (a loaded index keeps the one it was built with).
        graph: how the sentence graph is built (fixed once sentences exist).
        config: default retrieval settings.
        memory_model: a chat model that writes a summary, facts and insights per session; ``None``
            (default) makes no generated memories.
        memory_cache: response cache of the memory model.
        counter: token counter of the budget (cl100k by default).
        store: a :class:`~gravity_core.sgmem.ChromaSGMemStore` to run the seed search in Chroma
            (synced here when the index has content, and after every change; only changed rows
            are written); ``None`` searches the in-process numpy vectors.
        state: an existing index to continue (as :func:`~gravity_core.sgmem.persist.load_state`
            reads it); ``embedder`` must be the one it was built with.

    Raises:
        ConfigurationError: ``graph`` differs from the existing index's, or ``embedder`` is not
            the one the existing index was built with.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        graph: GraphConfig | None = None,
        config: RetrievalConfig | None = None,
        memory_model: ChatModel | None = None,
        memory_cache: ResponseCache | None = None,
        counter: TokenCounter | None = None,
        store: ChromaSGMemStore | None = None,
        state: SGMemState | None = None,
    ) -> None:
        self.embedder = embedder
        self.config = config or RetrievalConfig()
        self.counter = counter or TokenCounter()
        self.memory_generator = MemoryGenerator(memory_model, cache=memory_cache) if memory_model else None
        self.store = store
        self._lock = threading.RLock()
        # True from the start of a store sync until it completes: a failed sync is redone later.
        self._store_stale = False
        if state is not None and (embedder.name != state.embedder or embedder.dim != state.dim):
            raise ConfigurationError(
                f"the SGMem index was embedded with '{state.embedder}' ({state.dim} dims), "
                f"not '{embedder.name}' ({embedder.dim} dims)"
            )
        self._state = state or SGMemState(
            embedder=embedder.name, dim=embedder.dim, graph_config=graph or GraphConfig()
        )
        if graph is not None and graph != self._state.graph_config:
            raise ConfigurationError(
                f"the index was built with {self._state.graph_config!r}; it cannot change to {graph!r}"
            )
        self._texts = ChunkTexts(self._state, self.counter)
        if store is not None and self._state.units.sentences:
            self._sync_store()

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_utterances(
        cls, utterances: Iterable[Utterance], embedder: Embedder | None = None, **kwargs: Any
    ) -> SGMem:
        """A new index over ``utterances`` (embedder: the offline MiniLM by default).

        ``kwargs`` go to the constructor.
        """
        if embedder is None:
            from gravity_core.embeddings import default_embedder

            embedder = default_embedder()
        memory = cls(embedder, **kwargs)
        memory.add(utterances)
        return memory

    @classmethod
    def load(
        cls,
        directory: str | os.PathLike[str],
        embedder: Embedder | None = None,
        **kwargs: Any,
    ) -> SGMem:
        """Open an index saved with :meth:`save`.

        Args:
            directory: the index folder.
            embedder: defaults to the one named in the index (``minilm-...`` or ``hashing-N``);
                one with another name is refused.
            kwargs: ``config``, ``memory_model``, ``memory_cache``, ``counter``, ``store``.

        Raises:
            AnchorStoreError: no index there, or a damaged one.
            ConfigurationError: ``embedder`` is not the one the index was built with.
        """
        from gravity_core.providers import embedder_from_name

        state = load_state(directory)
        return cls(embedder or embedder_from_name(state.embedder), state=state, **kwargs)

    def save(self, directory: str | os.PathLike[str]) -> int:
        """Write the index to ``directory`` (atomically, as a new generation); returns the generation."""
        with self._lock:
            return save_state(directory, self._state)

    # -- read-only views ----------------------------------------------------------------------

    @property
    def state(self) -> SGMemState:
        """The units, vectors, graph and memories (read them; change them only through this class)."""
        return self._state

    @property
    def units(self) -> DialogueUnits:
        """Sessions, rounds, turns and sentences."""
        return self._state.units

    @property
    def graph_config(self) -> GraphConfig:
        """How the sentence graph is built."""
        return self._state.graph_config

    @property
    def memories(self) -> list[Memory]:
        """The generated memories."""
        return list(self._state.memories)

    def stats(self) -> dict[str, int]:
        """Sizes: sessions, rounds, turns, sentences, edges, memories."""
        return self._state.counts()

    # -- building -----------------------------------------------------------------------------

    def add(self, utterances: Iterable[Utterance]) -> AddReport:
        """Add utterances (in conversation order); ids already in the index are skipped.

        New sessions, and new turns of known sessions, become units; the new sentences join the
        graph by the incremental rule of :mod:`gravity_core.sgmem.graph`, without a rebuild. Only
        new units are embedded, plus the rounds and sessions whose turns changed. With a memory
        model, sessions that gained turns get their memories (re)made.

        Sentences, turns and rounds are embedded (as ``"Speaker: text"`` with ``speaker_prefix``),
        each distinct text once, in one ``embed`` call; a session's vector is the mean of its turns'
        vectors, since a session is far longer than an embedder reads (MiniLM: 256 tokens).

        Raises:
            ProviderError: or whatever else the embedder raises; the index is then left as it was.
        """
        with self._lock:
            self._resync_if_stale()
            state = self._state
            units = state.units
            fresh: list[Utterance] = []
            seen: set[str] = set()
            skipped = 0
            for utterance in utterances:
                if utterance.id in units or utterance.id in seen:
                    skipped += 1
                    continue
                seen.add(utterance.id)
                fresh.append(utterance)
            if not fresh:
                return AddReport(skipped=skipped, edges=state.sentence_graph.edge_count())
            checkpoint = _Checkpoint.take(units)
            try:
                touched_rounds: set[int] = set()
                touched_sessions: set[int] = set()
                for utterance in fresh:
                    _, round_idx, session_idx = units.add_turn(utterance)
                    touched_rounds.add(round_idx)
                    touched_sessions.add(session_idx)
                self._embed_new_units(checkpoint, sorted(touched_rounds), sorted(touched_sessions))
            except BaseException:
                checkpoint.restore(units, state)
                raise
            self._texts.invalidate()
            made, failed = self._make_memories([units.sessions[i].id for i in sorted(touched_sessions)])
            if self.store is not None:
                self._sync_store()
            report = AddReport(
                added=len(fresh),
                skipped=skipped,
                sentences=len(units.sentences) - checkpoint.sentences,
                edges=state.sentence_graph.edge_count(),
                memories=made,
                failed_sessions=tuple(failed),
            )
            logger.info(
                "SGMem: +%d turns, +%d sentences, %d edges", report.added, report.sentences, report.edges
            )
            return report

    def _embed_new_units(self, checkpoint: _Checkpoint, rounds: list[int], sessions: list[int]) -> None:
        state = self._state
        units = state.units
        prefix = state.graph_config.speaker_prefix
        new_sentences = units.sentences[checkpoint.sentences :]
        new_turns = units.turns[checkpoint.turns :]

        def said(speaker: str, text: str) -> str:
            return f"{speaker}: {text}" if prefix else text

        sentence_texts = [said(units.turns[s.turn].speaker, s.text) for s in new_sentences]
        turn_texts = [said(t.speaker, t.text) for t in new_turns]
        round_texts = [
            "\n".join(said(units.turns[t].speaker, units.turns[t].text) for t in units.rounds[r].turns)
            for r in rounds
        ]
        vectors = self._embed([*sentence_texts, *turn_texts, *round_texts])
        a, b = len(sentence_texts), len(sentence_texts) + len(turn_texts)
        sentence_vectors = np.vstack([state.vectors["sentence"], vectors[:a]])
        turn_vectors = np.vstack([state.vectors["turn"], vectors[a:b]])
        round_vectors = _grow(state.vectors["round"], len(units.rounds))
        round_vectors[rounds] = vectors[b:]
        session_vectors = _grow(state.vectors["session"], len(units.sessions))
        for s in sessions:
            # MiniLM reads 256 tokens and a session is thousands: its vector is the mean of its turns'.
            session_vectors[s] = _unit(turn_vectors[units.sessions[s].turns].mean(axis=0))
        groups = np.fromiter((s.turn for s in units.sentences), dtype=np.int64, count=len(units.sentences))
        state.sentence_graph.extend(sentence_vectors, groups)
        state.vectors.update(
            sentence=sentence_vectors, turn=turn_vectors, round=round_vectors, session=session_vectors
        )

    def _embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` in one call, each distinct text once."""
        if not texts:
            return np.zeros((0, self._state.dim), dtype=np.float32)
        distinct = list(dict.fromkeys(texts))
        matrix = np.asarray(self.embedder.embed(distinct), dtype=np.float32)
        position = {text: i for i, text in enumerate(distinct)}
        if matrix.shape != (len(distinct), self._state.dim):
            raise ConfigurationError(
                f"embedder '{self.embedder.name}' returned shape {matrix.shape} for {len(distinct)} texts "
                f"of dimension {self._state.dim}"
            )
        return matrix[[position[t] for t in texts]]

    def refresh_memories(self) -> tuple[int, list[str]]:
        """Make the memories of every session that has none or whose turns changed since.

        Returns:
            ``(memories made, sessions that failed)``.

        Raises:
            ConfigurationError: the index has no memory model.
        """
        if self.memory_generator is None:
            raise ConfigurationError("refresh_memories needs a memory_model")
        with self._lock:
            made, failed = self._make_memories([s.id for s in self._state.units.sessions])
            if self.store is not None:
                self._sync_store()
            return made, failed

    def _make_memories(self, sessions: Sequence[str]) -> tuple[int, list[str]]:
        generator = self.memory_generator
        if generator is None:
            return 0, []
        state = self._state
        units = state.units
        made = 0
        failed: list[str] = []
        for session_id in sessions:
            index = units.session_index(session_id)
            if index is None:
                continue
            session = units.sessions[index]
            turn_ids = [units.turns[t].id for t in session.turns]
            digest = session_digest(turn_ids)
            if state.memory_digests.get(session_id) == digest:
                continue
            utterances = [
                Utterance(id=t.id, speaker=t.speaker, text=t.text, session=session_id, timestamp=t.timestamp)
                for t in (units.turns[i] for i in session.turns)
            ]
            try:
                memories = generator.generate(session_id, utterances)
            except (UnexpectedModelOutput, ProviderError) as exc:
                logger.warning("SGMem: no memories for session %s (kept the old ones): %s", session_id, exc)
                failed.append(session_id)
                continue
            vectors = self._embed([m.text for m in memories])
            keep = [i for i, m in enumerate(state.memories) if m.session != session_id]
            state.memories = [state.memories[i] for i in keep] + memories
            state.vectors["memory"] = np.vstack([state.vectors["memory"][keep], vectors])
            state.memory_digests[session_id] = digest
            made += len(memories)
        return made, failed

    def _resync_if_stale(self) -> None:
        """Finish a store sync that failed earlier (e.g. the Chroma server was down)."""
        if self.store is not None and self._store_stale:
            with self._lock:
                if self._store_stale:
                    logger.info("SGMem: syncing the store again after an earlier failure")
                    self._sync_store()

    def _sync_store(self) -> None:
        assert self.store is not None
        self._store_stale = True
        state = self._state
        self.store.sync(
            "sentence",
            [s.id for s in state.units.sentences],
            state.vectors["sentence"],
            [s.text for s in state.units.sentences],
            state.embedder,
        )
        self.store.sync(
            "memory",
            [m.id for m in state.memories],
            state.vectors["memory"],
            [m.text for m in state.memories],
            state.embedder,
        )
        self._store_stale = False

    # -- retrieval ----------------------------------------------------------------------------

    def resolve_config(
        self,
        config: RetrievalConfig | None = None,
        *,
        token_budget: int | None = None,
        granularity: ChunkGranularity | str | None = None,
        hops: int | None = None,
        max_chunks: int | None = None,
    ) -> RetrievalConfig:
        """``config`` (default: the index's) with the given settings replaced.

        Raises:
            ConfigurationError: an unknown granularity or an invalid value.
        """
        cfg = config or self.config
        update: dict[str, Any] = {}
        if token_budget is not None:
            update["token_budget"] = token_budget
        if granularity is not None:
            try:
                update["granularity"] = ChunkGranularity(granularity)
            except ValueError:
                known = ", ".join(g.value for g in ChunkGranularity)
                raise ConfigurationError(f"unknown granularity {granularity!r} (known: {known})") from None
        if hops is not None:
            update["hops"] = hops
        if max_chunks is not None:
            update["max_chunks"] = max_chunks
        if not update:
            return cfg
        try:
            return RetrievalConfig.model_validate({**cfg.model_dump(), **update})
        except ValueError as exc:
            raise ConfigurationError(f"invalid retrieval settings: {exc}") from exc

    def embed_queries(self, queries: Sequence[str]) -> Matrix:
        """The query vectors, one embed call."""
        if not queries:
            return np.zeros((0, self._state.dim), dtype=np.float32)
        return np.asarray(self.embedder.embed(list(queries)), dtype=np.float32)

    def retrieve(
        self,
        question: str,
        *,
        token_budget: int | None = None,
        granularity: ChunkGranularity | str | None = None,
        hops: int | None = None,
        max_chunks: int | None = None,
        config: RetrievalConfig | None = None,
        query_embedding: Sequence[float] | np.ndarray | None = None,
    ) -> SGMemResult:
        """Ranked chunks and matched memories for ``question`` within a token budget.

        Args:
            question: the question.
            token_budget: cl100k tokens of the returned texts (default: the config's).
            granularity: ``"turn"``, ``"round"`` or ``"session"`` (default: the config's).
            hops: graph hops (0: plain vector search over sentences).
            max_chunks: at most this many chunks.
            config: settings for this call (default: the index's); the keywords above override it.
            query_embedding: the question's vector if already computed with this index's embedder.

        Raises:
            ConfigurationError: invalid settings or a query embedding of the wrong dimension.
        """
        cfg = self.resolve_config(
            config, token_budget=token_budget, granularity=granularity, hops=hops, max_chunks=max_chunks
        )
        if query_embedding is None:
            vector = self.embed_queries([question])[0]
        else:
            vector = self._check_vector(query_embedding)
        with self._lock:
            ranking = self._rank(vector, cfg)
            return pack(question, [question], ranking, cfg, self._state, self._texts)

    async def aretrieve(self, question: str, **kwargs: Any) -> SGMemResult:
        """:meth:`retrieve` in a worker thread."""
        import asyncio

        return await asyncio.to_thread(lambda: self.retrieve(question, **kwargs))

    def retrieve_fused(
        self,
        queries: Sequence[str],
        *,
        question: str | None = None,
        policy: ContextPolicy = DEFAULT_POLICY,
        token_budget: int | None = None,
        granularity: ChunkGranularity | str | None = None,
        hops: int | None = None,
        max_chunks: int | None = None,
        config: RetrievalConfig | None = None,
    ) -> SGMemResult:
        """Search the question and extra queries (e.g. GRAVITY's expansions), merged by the context policy.

        Each query runs the whole retrieval (seeds, expansion, chunk ranking, memories) on its own;
        the question's ranking (``queries[0]``) leads and the best ``policy.depth`` chunks of each
        other query's ranking may take the policy's bounded places (see
        :class:`~gravity_core.context.policy.ContextPolicy`), then the result is cut to the
        budget. Chunk and memory scores of the result are reciprocal-rank scores.

        Args:
            queries: the question first, then the extra queries; embedded in one call.
            question: the question reported in the result (default: ``queries[0]``).
            policy: how the extra queries' chunks join the question's (the shipped default).
            token_budget: cl100k tokens of the returned texts (default: the config's).
            granularity: ``"turn"``, ``"round"`` or ``"session"`` (default: the config's).
            hops: graph hops (0: plain vector search over sentences).
            max_chunks: at most this many chunks.
            config: settings for this call (default: the index's); the keywords above override it.

        Raises:
            ConfigurationError: no query.
        """
        if not queries:
            raise ConfigurationError("retrieve_fused needs at least one query")
        cfg = self.resolve_config(
            config, token_budget=token_budget, granularity=granularity, hops=hops, max_chunks=max_chunks
        )
        vectors = self.embed_queries(queries)
        # Only the top of an extra query's ranking can take part: do not rank deeper than that.
        shallow = cfg.model_copy(update={"max_candidates": policy.depth})
        with self._lock:
            rankings = [self._rank(v, cfg if n == 0 else shallow) for n, v in enumerate(vectors)]
            fused = rankings[0] if len(rankings) == 1 else fuse(rankings, queries, policy)
            return pack(question or queries[0], list(queries), fused, cfg, self._state, self._texts)

    def retrieve_units(
        self,
        question: str,
        *,
        token_budget: int | None = None,
        granularity: ChunkGranularity | str | None = None,
        max_chunks: int | None = None,
        config: RetrievalConfig | None = None,
    ) -> SGMemResult:
        """Plain vector search over the chunks' own vectors (no sentences, no graph, no memories).

        The baseline SGMem is compared with: turns (or rounds, sessions) ranked by the cosine of
        their own vector with the question, cut to the same budget.
        """
        cfg = self.resolve_config(
            config, token_budget=token_budget, granularity=granularity, max_chunks=max_chunks
        )
        vector = self.embed_queries([question])[0]
        with self._lock:
            units = self._state.units
            scores = row_dots(self._state.vectors[cfg.granularity.value], vector)
            turn_scores = row_dots(self._state.vectors["turn"], vector)
            hits = []
            for chunk, score in top_indices(scores, scores.size):
                turns = units.chunk_turns(cfg.granularity, chunk)
                best = max(turns, key=lambda t: (float(turn_scores[t]), -t))
                hits.append(ChunkHit(chunk, score, score, best_turn=best))
            ranking = Ranking(chunks=hits, memories=[])
            no_memories = cfg.model_copy(update={"top_memories": 0})
            return pack(question, [question], ranking, no_memories, self._state, self._texts)

    def chunks_holding(
        self, utterance_ids: Sequence[str], *, granularity: ChunkGranularity | str | None = None
    ) -> list[RankedChunk]:
        """The chunks that hold these turns, whole, in the ids' order, each chunk once.

        Retrieval by provenance: the turns an anchor came from are fetched by id, not searched.
        The chunks have score 0 and no hop; ids the index does not hold are skipped.

        Raises:
            ConfigurationError: an unknown granularity.
        """
        cfg = self.resolve_config(granularity=granularity)
        chunks: list[RankedChunk] = []
        with self._lock:
            units = self._state.units
            seen: set[int] = set()
            for utterance_id in utterance_ids:
                turn = units.turn_index(utterance_id)
                if turn is None:
                    continue
                chunk = units.chunk_of_turn(turn, cfg.granularity)
                if chunk not in seen:
                    seen.add(chunk)
                    chunks.append(whole_chunk(chunk, turn, cfg.granularity, self._state, self._texts))
        return chunks

    def _check_vector(self, given: Sequence[float] | np.ndarray) -> np.ndarray:
        vector = np.asarray(given, dtype=np.float32).reshape(-1)
        if vector.shape[0] != self._state.dim:
            raise ConfigurationError(
                f"query_embedding has {vector.shape[0]} dimensions; "
                f"the index's embedder has {self._state.dim}"
            )
        return _unit(vector)

    def _rank(self, vector: np.ndarray, cfg: RetrievalConfig) -> Ranking:
        state = self._state
        own = row_dots(state.vectors["sentence"], vector)
        memory_limit = cfg.top_memories
        if self.store is None:
            seeds = top_indices(own, cfg.top_sentences)
            memory_scores = row_dots(state.vectors["memory"], vector)
            memory_hits = top_indices(memory_scores, memory_limit)
        else:
            self._resync_if_stale()
            units = state.units
            seeds = []
            # Chroma picks the seeds; their scores are the same in-process cosines as without it.
            for sentence_id, _ in self.store.top("sentence", vector, cfg.top_sentences):
                turn_id, _, n = sentence_id.rpartition("#")
                turn = units.turn_index(turn_id)
                if turn is not None and n.isdigit() and int(n) <= len(units.turns[turn].sentences):
                    index = units.turns[turn].sentences[int(n) - 1]
                    seeds.append((index, float(own[index])))
            position = {m.id: i for i, m in enumerate(state.memories)}
            memory_cos = row_dots(state.vectors["memory"], vector)
            memory_hits = [
                (position[i], float(memory_cos[position[i]]))
                for i, _ in self.store.top("memory", vector, memory_limit)
                if i in position
            ]
            seeds.sort(key=lambda item: (-item[1], item[0]))
            memory_hits.sort(key=lambda item: (-item[1], item[0]))
        chunk_cos = row_dots(state.vectors[cfg.granularity.value], vector)
        return rank(state, own, chunk_cos, seeds, memory_hits, cfg)


@dataclass(frozen=True)
class _Checkpoint:
    """Sizes of the unit tables before an add, to undo it if embedding fails."""

    sessions: int
    rounds: int
    turns: int
    sentences: int
    session_sizes: tuple[tuple[int, int], ...]
    last_rounds: tuple[tuple[int, int, str | None], ...]

    @classmethod
    def take(cls, units: DialogueUnits) -> _Checkpoint:
        last = tuple(
            (s.rounds[-1], len(units.rounds[s.rounds[-1]].turns), units.rounds[s.rounds[-1]].second)
            for s in units.sessions
            if s.rounds
        )
        return cls(
            sessions=len(units.sessions),
            rounds=len(units.rounds),
            turns=len(units.turns),
            sentences=len(units.sentences),
            session_sizes=tuple((len(s.turns), len(s.rounds)) for s in units.sessions),
            last_rounds=last,
        )

    def restore(self, units: DialogueUnits, state: SGMemState) -> None:
        """Put the unit tables back as they were (vectors and graph were not touched yet)."""
        for session in units.sessions[self.sessions :]:
            units._session_index.pop(session.id, None)
        for round_unit in units.rounds[self.rounds :]:
            units._round_index.pop(round_unit.id, None)
        for turn in units.turns[self.turns :]:
            units._turn_index.pop(turn.id, None)
        del units.sessions[self.sessions :]
        del units.rounds[self.rounds :]
        del units.turns[self.turns :]
        del units.sentences[self.sentences :]
        for session, (n_turns, n_rounds) in zip(units.sessions, self.session_sizes, strict=True):
            del session.turns[n_turns:]
            del session.rounds[n_rounds:]
        for index, n_turns, second in self.last_rounds:
            del units.rounds[index].turns[n_turns:]
            units.rounds[index].second = second
        units.invalidate()
        logger.debug(
            "SGMem add rolled back to %d turns (graph has %d nodes)", self.turns, state.sentence_graph.n
        )


def _grow(matrix: Matrix, rows: int) -> Matrix:
    """``matrix`` padded with zero rows to ``rows`` rows (a copy)."""
    out = np.zeros((rows, matrix.shape[1]), dtype=np.float32)
    out[: matrix.shape[0]] = matrix
    return out


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return (vector / norm).astype(np.float32) if norm > 0 else vector.astype(np.float32)
