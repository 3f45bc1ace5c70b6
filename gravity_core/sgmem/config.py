"""SGMem settings: how the sentence graph is built, and how a question is answered from it.

Build settings (:class:`GraphConfig`) are fixed when the first utterances are added and stored with
the index; retrieval settings (:class:`RetrievalConfig`) can change with every question.

Defaults and why (evidence recall at 1,000 tokens on LoCoMo conv-26, conv-30 and conv-41, 383
questions of categories 1-4, packaged MiniLM; a quick check, not the evaluation harness):

- ``speaker_prefix=True``: questions name people ("What did Caroline ..."), sentences say "I";
  embedding ``"Caroline: I went ..."`` took turn recall from 0.27 to 0.69 on conv-26.
- ``k=5``, ``gamma=0.5``: MiniLM puts paraphrases and sentences about the same event at 0.5 and
  more; five neighbours keep the graph sparse (k=3..8, gamma 0.4..0.6 changed recall by < 0.01).
- ``top_sentences=20`` seeds, ``hops=1``, ``hop_decay=0.8``: one hop adds the sentences that say
  the same thing elsewhere; more hops added nothing.
- ``chunk_weight=0.3``: a chunk's score mixes its best sentence (0.7) with its own vector (0.3);
  rounds went from 0.62 to 0.70, turns from 0.72 to 0.73 (plain turn vectors: 0.64, rounds 0.61).
- ``aggregate="max"``: a chunk is as relevant as its best sentence; ``"sum"`` favours long chunks
  and, with hops, chunks that many weak neighbours point to (recall fell to 0.50-0.67).
- ``fill=True``: after the chunks reached by the seeds and the graph, the others follow by the
  same formula with their best sentence's own cosine, so the budget is always used.
- ``token_budget=1000`` (cl100k tokens of the returned texts): a typical RAG context slot.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ChunkGranularity", "GraphConfig", "RetrievalConfig", "ScoreAggregate"]


class ChunkGranularity(StrEnum):
    """The unit a retrieved sentence is mapped back to."""

    TURN = "turn"
    ROUND = "round"
    SESSION = "session"


class ScoreAggregate(StrEnum):
    """How a chunk's score is made from the scores of its reached sentences."""

    MAX = "max"
    SUM = "sum"


class GraphConfig(BaseModel):
    """How the sentence graph is built (stored with the index; fixed once built).

    Attributes:
        k: each sentence links to at most ``k`` most similar sentences of other turns.
        gamma: an edge needs a cosine similarity of at least ``gamma``.
        speaker_prefix: embed sentences and turns as ``"Speaker: text"``, so a question that names
            a person finds what that person said.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    k: int = Field(default=5, ge=1, le=256)
    gamma: float = Field(default=0.5, ge=-1.0, le=1.0)
    speaker_prefix: bool = True


class RetrievalConfig(BaseModel):
    """Settings of one retrieval (frozen; derive variants with ``model_copy(update=...)``).

    Attributes:
        granularity: the chunks returned: turns, rounds or sessions.
        token_budget: cl100k tokens of all returned texts (memories and chunks); ``None`` for no
            limit (then ``max_chunks`` usually bounds the result).
        max_chunks: at most this many chunks (``None``: as many as the budget allows).
        top_sentences: sentences taken from the vector search as seeds.
        hops: graph hops from the seeds (0: plain vector search over sentences).
        hop_decay: a neighbour reached over an edge of weight ``w`` from a sentence scored ``s``
            scores ``s * w * hop_decay`` (or its own cosine with the question, if higher).
        max_per_hop: at most this many newly reached sentences (the best) are kept per hop.
        aggregate: chunk score from its sentences' scores: their maximum or their sum.
        top_memories: generated memories taken from the vector search.
        memory_min_score: a memory needs at least this cosine with the question.
        memory_share: the memories may use at most this fraction of ``token_budget``.
        min_excerpt_tokens: a chunk that does not fit whole is cut to an excerpt around its best
            turn when at least this many tokens remain; otherwise it is skipped.
        chunk_weight: weight of the chunk's own vector in its score:
            ``(1 - chunk_weight) * aggregate(sentences) + chunk_weight * cos(question, chunk)``.
        fill: after the reached chunks, rank the others too (by their best sentence's cosine).
        max_candidates: chunks ranked per query at most (enough to fill any usual budget).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    granularity: ChunkGranularity = ChunkGranularity.TURN
    token_budget: int | None = Field(default=1000, ge=1)
    max_chunks: int | None = Field(default=None, ge=1)
    top_sentences: int = Field(default=20, ge=1)
    hops: int = Field(default=1, ge=0, le=8)
    hop_decay: float = Field(default=0.8, gt=0.0, le=1.0)
    max_per_hop: int = Field(default=50, ge=1)
    aggregate: ScoreAggregate = ScoreAggregate.MAX
    top_memories: int = Field(default=3, ge=0)
    memory_min_score: float = Field(default=0.3, ge=-1.0, le=1.0)
    memory_share: float = Field(default=0.3, ge=0.0, le=1.0)
    min_excerpt_tokens: int = Field(default=48, ge=1)
    chunk_weight: float = Field(default=0.3, ge=0.0, le=1.0)
    fill: bool = True
    max_candidates: int = Field(default=200, ge=1)
