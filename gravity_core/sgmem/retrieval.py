"""SGMem retrieval: seed sentences, graph expansion, chunk ranking, fusion and the token budget.

1. **Seeds**: the ``top_sentences`` sentences nearest to the question (cosine), in process or
   in Chroma.
2. **Expansion**: ``hops`` steps along the sentence graph (:meth:`SentenceGraph.expand`): a
   sentence reached over an edge of weight ``w`` from one scored ``s`` scores ``s * w * hop_decay``,
   or its own cosine if higher.
3. **Chunks**: every reached sentence votes for its parent chunk at the chosen granularity. A chunk
   scores ``(1 - chunk_weight) * max (or sum) of its sentences' scores + chunk_weight * cosine of
   its own vector``; ties are broken by the other aggregate, then by position. With ``fill``, the
   chunks not reached follow, scored the same way from their best sentence's own cosine, so the
   budget is used as plain retrieval would use it (``RankedChunk.hop`` is ``None`` for them).
4. **Memories**: the ``top_memories`` generated memories with cosine >= ``memory_min_score``.
5. **Fusion** (the question plus GRAVITY's expansions): the context policy
   (:class:`~gravity_core.context.policy.ContextPolicy`), as every integration and the evaluation
   use it: the question's ranking leads and each expansion's best chunks may only take bounded
   places after it, for chunks the question has not placed. A chunk's score is its reciprocal-rank
   score over the queries that found it (fusing whole rankings with equal weights halved evidence
   recall on LoCoMo: consensus chunks that are mediocre for every query win).
6. **Budget**: memories first (at most ``memory_share`` of the budget), then chunks in rank order;
   a chunk that does not fit whole is cut to the window of its turns around its best turn that
   fits (a single turn is cut at a token boundary) if at least ``min_excerpt_tokens`` remain,
   and skipped otherwise.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gravity_core.context.policy import ContextPolicy
from gravity_core.prompts.sgmem import render_memory_line, render_turn_line
from gravity_core.sgmem.config import ChunkGranularity, RetrievalConfig, ScoreAggregate
from gravity_core.sgmem.state import SGMemState
from gravity_core.sgmem.types import MatchedMemory, RankedChunk, SGMemResult
from gravity_core.text.tokens import TokenCounter

__all__ = [
    "ChunkHit",
    "ChunkTexts",
    "Ranking",
    "fuse",
    "pack",
    "rank",
    "row_dots",
    "top_indices",
    "whole_chunk",
]


@dataclass
class ChunkHit:
    """A ranked chunk before the budget: its index, score and the sentences that reached it."""

    chunk: int
    score: float
    tiebreak: float
    sentences: dict[int, float] = field(default_factory=dict)
    best_turn: int | None = None
    hop: int | None = None

    def top_turn(self, state: SGMemState) -> int:
        """The turn an excerpt of the chunk is centred on: that of its best sentence."""
        if self.best_turn is not None:
            return self.best_turn
        if self.sentences:
            return state.units.sentences[next(iter(self.sentences))].turn
        return self.chunk


@dataclass
class Ranking:
    """Chunks and memories ranked for one query (or fused over several), best first."""

    chunks: list[ChunkHit]
    memories: list[tuple[int, float]]


def row_dots(matrix: npt.NDArray[np.float32], vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """``matrix @ vector`` (cosines, rows and vector being unit-length), without BLAS.

    A query is scored right after the embedder ran. With onnxruntime's worker threads still
    spinning, OpenBLAS's threaded matrix-vector product took about 10 ms on two cores where
    numpy's own loop (einsum) takes 0.1 ms.
    """
    return np.einsum("ij,j->i", matrix, vector.astype(np.float32, copy=False)).astype(np.float32, copy=False)


def top_indices(scores: npt.NDArray[np.float32], limit: int) -> list[tuple[int, float]]:
    """The ``limit`` best rows of ``scores``, by (score desc, index asc)."""
    if limit <= 0 or scores.size == 0:
        return []
    if scores.size > limit:
        kth = np.partition(scores, scores.size - limit)[scores.size - limit]
        cand = np.flatnonzero(scores >= kth)
    else:
        cand = np.arange(scores.size)
    order = np.lexsort((cand, -scores[cand]))[:limit]
    return [(int(cand[i]), float(scores[cand[i]])) for i in order]


def rank(
    state: SGMemState,
    own: npt.NDArray[np.float32],
    chunk_cos: npt.NDArray[np.float32],
    seeds: Sequence[tuple[int, float]],
    memory_hits: Sequence[tuple[int, float]],
    cfg: RetrievalConfig,
) -> Ranking:
    """Rank chunks from seed sentences (see the module's steps 2-4).

    Args:
        state: the index.
        own: cosine of every sentence with the query.
        chunk_cos: cosine of every chunk (of ``cfg.granularity``) with the query.
        seeds: the seed sentences with their scores, best first.
        memory_hits: memories with their cosines, best first.
        cfg: the retrieval settings.
    """
    reached = state.sentence_graph.expand(
        dict(seeds), hops=cfg.hops, decay=cfg.hop_decay, max_per_hop=cfg.max_per_hop, own_scores=own
    )
    units = state.units
    weight = cfg.chunk_weight
    by_chunk: dict[int, dict[int, float]] = {}
    first_hop: dict[int, int] = {}
    for sentence, (score, hop) in reached.items():
        chunk = units.chunk_of_turn(units.sentences[sentence].turn, cfg.granularity)
        by_chunk.setdefault(chunk, {})[sentence] = score
        first_hop[chunk] = min(hop, first_hop.get(chunk, hop))
    hits: list[ChunkHit] = []
    for chunk, sentences in by_chunk.items():
        best, total = max(sentences.values()), sum(sentences.values())
        primary, second = (best, total) if cfg.aggregate is ScoreAggregate.MAX else (total, best)
        score = (1.0 - weight) * primary + weight * float(chunk_cos[chunk])
        ordered = dict(sorted(sentences.items(), key=lambda item: (-item[1], item[0])))
        hits.append(ChunkHit(chunk, score, second, ordered, hop=first_hop[chunk]))
    hits.sort(key=lambda h: (-h.score, -h.tiebreak, h.chunk))
    depth = max(cfg.max_candidates, cfg.max_chunks or 0)
    del hits[depth:]
    if cfg.fill and len(hits) < depth:
        hits.extend(_fill(state, own, chunk_cos, {h.chunk for h in hits}, cfg, depth - len(hits)))
    memories = [(i, s) for i, s in memory_hits if s >= cfg.memory_min_score][: cfg.top_memories]
    return Ranking(chunks=hits, memories=memories)


def _fill(
    state: SGMemState,
    own: npt.NDArray[np.float32],
    chunk_cos: npt.NDArray[np.float32],
    taken: set[int],
    cfg: RetrievalConfig,
    limit: int,
) -> list[ChunkHit]:
    """The best chunks not reached, by the same formula with their best sentence's own cosine."""
    units = state.units
    n_chunks = chunk_cos.shape[0]
    chunk_of = units.sentence_chunks(cfg.granularity)
    best = np.full(n_chunks, -np.inf, dtype=np.float64)
    best_sentence = np.full(n_chunks, -1, dtype=np.int64)
    if own.size:
        # Sentences grouped by chunk, best first (ties: lower index): the first of each group wins.
        order = np.lexsort((np.arange(own.size), -own, chunk_of))
        chunks, first = np.unique(chunk_of[order], return_index=True)
        best_sentence[chunks] = order[first]
        best[chunks] = own[order[first]]
    # A chunk without sentences (empty turns) ranks by its own vector alone.
    empty = best_sentence < 0
    best[empty] = chunk_cos[empty]
    weight = cfg.chunk_weight
    scores = ((1.0 - weight) * best + weight * chunk_cos.astype(np.float64)).astype(np.float32)
    if taken:
        scores[list(taken)] = -np.inf
    hits: list[ChunkHit] = []
    for chunk, score in top_indices(scores, limit):
        if not np.isfinite(score):
            break
        top = int(best_sentence[chunk])
        hits.append(
            ChunkHit(
                chunk,
                score,
                float(best[chunk]),
                {} if top < 0 else {top: float(own[top])},
                best_turn=units.chunk_turns(cfg.granularity, chunk)[0] if top < 0 else None,
            )
        )
    return hits


def fuse(rankings: Sequence[Ranking], queries: Sequence[str], policy: ContextPolicy) -> Ranking:
    """The question's ranking (``rankings[0]``) merged with the expansions' by ``policy`` (module step 5).

    Chunks and memories are merged alike; a chunk's sentences are merged over the rankings, and
    its score is the policy's reciprocal-rank score.
    """
    question, expansions = queries[0], list(queries[1:])
    chunks = policy.merge(
        question, rankings[0].chunks, expansions, [r.chunks for r in rankings[1:]], lambda h: h.chunk
    )
    sentences: dict[int, dict[int, float]] = {}
    hops: dict[int, int] = {}
    for ranking in rankings:
        for hit in ranking.chunks:
            if hit.hop is not None:
                hops[hit.chunk] = min(hit.hop, hops.get(hit.chunk, hit.hop))
            merged = sentences.setdefault(hit.chunk, {})
            for sentence, score in hit.sentences.items():
                merged[sentence] = max(merged.get(sentence, -np.inf), score)
    fused = [
        ChunkHit(
            m.item.chunk,
            m.score,
            m.item.score,
            dict(sorted(sentences[m.item.chunk].items(), key=lambda i: (-i[1], i[0]))),
            best_turn=m.item.best_turn,
            hop=hops.get(m.item.chunk),
        )
        for m in chunks
    ]
    memories = policy.merge(
        question, rankings[0].memories, expansions, [r.memories for r in rankings[1:]], lambda m: m[0]
    )
    return Ranking(chunks=fused, memories=[(m.item[0], m.score) for m in memories])


class ChunkTexts:
    """Rendered chunk texts and their token counts, cached until the units change.

    Args:
        state: the index.
        counter: the token counter.
    """

    def __init__(self, state: SGMemState, counter: TokenCounter) -> None:
        self.state = state
        self.counter = counter
        self._lock = threading.Lock()
        self._lines: dict[int, tuple[str, int]] = {}
        self._chunks: dict[tuple[ChunkGranularity, int], tuple[str, int]] = {}

    def invalidate(self) -> None:
        """Forget the rendered rounds and sessions (their turns changed); turn lines stay valid."""
        with self._lock:
            self._chunks = {k: v for k, v in self._chunks.items() if k[0] is ChunkGranularity.TURN}

    def line(self, turn: int) -> tuple[str, int]:
        """The rendered line of a turn and its tokens."""
        cached = self._lines.get(turn)
        if cached is None:
            t = self.state.units.turns[turn]
            text = render_turn_line(t.id, t.day, t.speaker, t.text)
            cached = (text, self.counter.count(text))
            with self._lock:
                self._lines[turn] = cached
        return cached

    def chunk(self, granularity: ChunkGranularity, chunk: int) -> tuple[str, int]:
        """The rendered text of a chunk (one line per turn) and its tokens."""
        key = (granularity, chunk)
        cached = self._chunks.get(key)
        if cached is None:
            turns = self.state.units.chunk_turns(granularity, chunk)
            text = "\n".join(self.line(t)[0] for t in turns)
            cached = (text, self.counter.count(text))
            with self._lock:
                self._chunks[key] = cached
        return cached


def pack(
    question: str,
    queries: list[str],
    ranking: Ranking,
    cfg: RetrievalConfig,
    state: SGMemState,
    texts: ChunkTexts,
) -> SGMemResult:
    """Keep memories and chunks within the budget (module step 6) and build the result."""
    budget = cfg.token_budget
    used = 0
    memories: list[MatchedMemory] = []
    memory_cap = None if budget is None else int(budget * cfg.memory_share)
    for index, score in ranking.memories:
        memory = state.memories[index]
        tokens = texts.counter.count(render_memory_line(memory.kind.value, memory.session, memory.text))
        if memory_cap is not None and used + tokens > memory_cap:
            continue
        memories.append(
            MatchedMemory(
                memory.id, memory.kind, memory.text, score, memory.session, memory.utterance_ids, tokens
            )
        )
        used += tokens
    chunks: list[RankedChunk] = []
    for hit in ranking.chunks:
        if cfg.max_chunks is not None and len(chunks) >= cfg.max_chunks:
            break
        remaining = None if budget is None else budget - used
        chunk = _chunk(hit, cfg.granularity, state, texts, remaining, cfg.min_excerpt_tokens)
        if chunk is None:
            continue
        chunks.append(chunk)
        used += chunk.tokens
    return SGMemResult(
        question=question,
        granularity=cfg.granularity,
        chunks=chunks,
        memories=memories,
        tokens=used,
        token_budget=budget,
        queries=queries,
    )


def whole_chunk(
    chunk: int, turn: int, granularity: ChunkGranularity, state: SGMemState, texts: ChunkTexts
) -> RankedChunk:
    """A chunk whole, found through one of its turns rather than ranked (score 0, no hop)."""
    found = _chunk(ChunkHit(chunk, 0.0, 0.0, best_turn=turn), granularity, state, texts, None, 0)
    assert found is not None  # without a budget a chunk is always kept
    return found


def _chunk(
    hit: ChunkHit,
    granularity: ChunkGranularity,
    state: SGMemState,
    texts: ChunkTexts,
    remaining: int | None,
    min_excerpt: int,
) -> RankedChunk | None:
    units = state.units
    turns = units.chunk_turns(granularity, hit.chunk)
    text, tokens = texts.chunk(granularity, hit.chunk)
    truncated = False
    if remaining is not None and tokens > remaining:
        if remaining < min_excerpt:
            return None
        best_turn = hit.top_turn(state)
        if best_turn not in turns:
            best_turn = turns[0]
        turns, text, tokens = _excerpt(turns, best_turn, remaining, texts)
        truncated = True
    kept_turns = set(turns)
    first = units.turns[turns[0]]
    return RankedChunk(
        id=units.chunk_id(granularity, hit.chunk),
        granularity=granularity,
        text=text,
        score=hit.score,
        utterance_ids=tuple(units.turns[t].id for t in turns),
        sentence_ids=tuple(
            units.sentences[s].id for s in hit.sentences if units.sentences[s].turn in kept_turns
        ),
        session=units.sessions[first.session].id,
        timestamp=first.timestamp,
        tokens=tokens,
        truncated=truncated,
        hop=hit.hop,
    )


def _excerpt(turns: list[int], best: int, budget: int, texts: ChunkTexts) -> tuple[list[int], str, int]:
    """The longest window of ``turns`` around ``best`` whose text fits ``budget`` tokens."""
    line, line_tokens = texts.line(best)
    if line_tokens > budget:
        cut = texts.counter.truncate(line, budget)
        return [best], cut, texts.counter.count(cut)
    pos = turns.index(best)
    lo, hi = pos, pos + 1
    total = line_tokens
    grew = True
    while grew:
        grew = False
        for candidate in (hi, lo - 1):
            if not 0 <= candidate < len(turns) or lo <= candidate < hi:
                continue
            extra = texts.line(turns[candidate])[1] + 1  # +1: the newline joining the lines
            if total + extra > budget:
                continue
            total += extra
            lo, hi = min(lo, candidate), max(hi, candidate + 1)
            grew = True
    window = turns[lo:hi]
    while True:
        text = "\n".join(texts.line(t)[0] for t in window)
        tokens = texts.counter.count(text)
        if tokens <= budget or len(window) == 1:
            return window, text, tokens
        # The per-line estimate was off by a merge at a line break: drop the turn farthest from best.
        at = window.index(best)
        window = window[1:] if at > len(window) - 1 - at else window[:-1]
