"""What an SGMem retrieval returns: ranked chunks and matched memories within a token budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gravity_core.context.provenance import UTTERANCE_IDS_KEY
from gravity_core.prompts.sgmem import EXCERPTS_HEADER, MEMORIES_HEADER, render_memory_line
from gravity_core.sgmem.config import ChunkGranularity
from gravity_core.sgmem.memories import MemoryKind

__all__ = [
    "MatchedMemory",
    "RankedChunk",
    "SGMemResult",
    "chunk_metadata",
    "memory_metadata",
    "render_context",
]


@dataclass(frozen=True)
class RankedChunk:
    """One retrieved chunk of dialogue.

    Attributes:
        id: the turn id (utterance id), round id (``"<session>/r<n>"``) or session id.
        granularity: turn, round or session.
        text: one line per turn, ``[utterance id] (day) speaker: text``.
        score: the chunk's score (aggregated sentence scores; a fused rank score after
            multi-query fusion). Higher is better.
        utterance_ids: ids of the turns in ``text``, in order.
        sentence_ids: the sentences that brought the chunk in, best first.
        session: the session id.
        timestamp: time of the chunk's first turn.
        tokens: cl100k tokens of ``text``.
        truncated: ``text`` is an excerpt of the chunk (it did not fit the budget whole).
        hop: how the chunk was found: 0 by a seed sentence of the vector search, ``n`` by a sentence
            ``n`` graph hops from a seed, ``None`` by the fill (ranked after every reached chunk,
            so scores decrease within the reached chunks and within the filled ones).
    """

    id: str
    granularity: ChunkGranularity
    text: str
    score: float
    utterance_ids: tuple[str, ...]
    sentence_ids: tuple[str, ...]
    session: str
    timestamp: datetime
    tokens: int
    truncated: bool = False
    hop: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.id,
            "granularity": self.granularity.value,
            "text": self.text,
            "score": round(self.score, 6),
            "utterance_ids": list(self.utterance_ids),
            "sentence_ids": list(self.sentence_ids),
            "session": self.session,
            "timestamp": self.timestamp.isoformat(),
            "tokens": self.tokens,
            "truncated": self.truncated,
            "hop": self.hop,
        }


def chunk_metadata(chunk: RankedChunk) -> dict[str, Any]:
    """The metadata a framework document or node of ``chunk`` carries."""
    return {
        "source": "sgmem",
        "kind": "chunk",
        "granularity": chunk.granularity.value,
        "score": chunk.score,
        "utterance_ids": list(chunk.utterance_ids),
        UTTERANCE_IDS_KEY: list(chunk.utterance_ids),
        "sentence_ids": list(chunk.sentence_ids),
        "session": chunk.session,
        "timestamp": chunk.timestamp.isoformat(),
        "truncated": chunk.truncated,
    }


def memory_metadata(memory: MatchedMemory) -> dict[str, Any]:
    """The metadata a framework document or node of a generated memory carries."""
    return {
        "source": "sgmem",
        "kind": memory.kind.value,
        "score": memory.score,
        "utterance_ids": list(memory.utterance_ids),
        "session": memory.session,
    }


@dataclass(frozen=True)
class MatchedMemory:
    """A generated memory that matched the question.

    Attributes:
        id: the memory id.
        kind: summary, fact or insight.
        text: the memory.
        score: cosine with the question (a fused rank score after multi-query fusion).
        session: the session it was made from.
        utterance_ids: the utterances it rests on.
        tokens: cl100k tokens of its rendered line.
    """

    id: str
    kind: MemoryKind
    text: str
    score: float
    session: str
    utterance_ids: tuple[str, ...]
    tokens: int

    @property
    def line(self) -> str:
        """The memory as rendered in a context."""
        return render_memory_line(self.kind.value, self.session, self.text)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.id,
            "kind": self.kind.value,
            "text": self.text,
            "score": round(self.score, 6),
            "session": self.session,
            "utterance_ids": list(self.utterance_ids),
            "tokens": self.tokens,
        }


def render_context(memories: list[MatchedMemory], chunks: list[RankedChunk]) -> str:
    """The context text: memories, then chunks separated by blank lines.

    Each section is under its header of :mod:`gravity_core.prompts.sgmem`; empty sections are left
    out.
    """
    parts: list[str] = []
    if memories:
        parts.append("\n".join([MEMORIES_HEADER, *(m.line for m in memories)]))
    if chunks:
        parts.append(EXCERPTS_HEADER + "\n" + "\n\n".join(c.text for c in chunks))
    return "\n\n".join(parts)


@dataclass(frozen=True)
class SGMemResult:
    """The answer to one retrieval.

    Attributes:
        question: the question as asked.
        granularity: the granularity of the chunks.
        chunks: the chunks kept within the budget, best first.
        memories: the generated memories kept, best first.
        tokens: cl100k tokens of the kept texts (chunk texts plus memory lines); the headers and
            separators of :attr:`text` add a few more.
        token_budget: the budget applied (``None``: none).
        queries: the queries fused (the question alone unless several were given).
    """

    question: str
    granularity: ChunkGranularity
    chunks: list[RankedChunk] = field(default_factory=list)
    memories: list[MatchedMemory] = field(default_factory=list)
    tokens: int = 0
    token_budget: int | None = None
    queries: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The context to put in a prompt: memories, then the chunks in rank order."""
        return render_context(self.memories, self.chunks)

    @property
    def utterance_ids(self) -> list[str]:
        """Ids of all utterances in the chunks, in rank order, without repeats."""
        return list(dict.fromkeys(u for c in self.chunks for u in c.utterance_ids))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as printed by ``gravity sgmem query --json``."""
        return {
            "question": self.question,
            "granularity": self.granularity.value,
            "results": [c.to_dict() for c in self.chunks],
            "memories": [m.to_dict() for m in self.memories],
            "tokens": self.tokens,
            "token_budget": self.token_budget,
            "queries": list(self.queries),
        }
