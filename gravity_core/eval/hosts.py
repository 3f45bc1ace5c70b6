"""Host memories the harness evaluates GRAVITY beside: the protocol and plain vector retrieval of turns.

A host ranks passages for a query; the harness does the rest (fusing expanded searches, filling the
token budget, scoring). So a host is only a ranking function, and another memory system plugs in
as a second host by meeting :class:`Host`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

import numpy as np

from gravity_core.embeddings.base import Embedder, Matrix
from gravity_core.eval.embedding_cache import EmbeddingCache
from gravity_core.schema import Utterance
from gravity_core.text.tokens import TokenCounter

__all__ = [
    "FetchingHost",
    "Host",
    "Passage",
    "VectorHost",
    "passages_by_turn",
    "render_turn",
    "session_label",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Passage:
    """One unit a host retrieves: a turn, or a larger piece that contains turns.

    Attributes:
        id: unique within the host.
        text: the text as it goes into the context (one or more lines).
        tokens: cl100k tokens of ``text`` plus its closing line break.
        turn_ids: utterance ids of the raw turns the passage shows in full (for evidence recall).
        position: place in the conversation, so a context can be shown in time order.
    """

    id: str
    text: str
    tokens: int
    turn_ids: tuple[str, ...]
    position: int


@runtime_checkable
class Host(Protocol):
    """A host memory over one conversation: ranks its passages for queries."""

    @property
    def name(self) -> str:
        """Short name used in reports, e.g. ``"vector"``."""
        ...

    def search(
        self, queries: Sequence[str], *, vectors: Matrix | None = None, limit: int = 200
    ) -> list[list[Passage]]:
        """Rank passages for each query, best first.

        Args:
            queries: the queries (a question and its expansions are searched in one call).
            vectors: the queries' embeddings by the harness's embedder, row per query, for hosts
                that embed with the same model; a host with its own embedder ignores them.
            limit: passages per query at most.

        Returns:
            One ranking per query.
        """
        ...


@runtime_checkable
class FetchingHost(Host, Protocol):
    """A host that can also hand back the passages holding given turns: provenance retrieval's host."""

    def fetch(self, turn_ids: Sequence[str]) -> list[Passage]:
        """The passages that hold these utterance ids, in the order of the ids, each passage once.

        Ids the host does not hold are skipped.
        """
        ...


def passages_by_turn(passages: Sequence[Passage], turn_ids: Sequence[str]) -> list[Passage]:
    """The passages holding ``turn_ids``, in the ids' order, each once (a fetch over a passage list)."""
    holder = {turn: passage for passage in reversed(passages) for turn in passage.turn_ids}
    found: dict[str, Passage] = {}
    for turn in turn_ids:
        passage = holder.get(turn)
        if passage is not None:
            found.setdefault(passage.id, passage)
    return list(found.values())


def session_label(timestamp: datetime) -> str:
    """The date the way LoCoMo writes session dates: ``"1:56 pm on 8 May, 2023"``."""
    hour = timestamp.hour % 12 or 12
    half = "am" if timestamp.hour < 12 else "pm"
    return f"{hour}:{timestamp.minute:02d} {half} on {timestamp.day} {timestamp:%B}, {timestamp.year}"


def render_turn(utterance: Utterance) -> str:
    """A turn as a retrieved memory: ``"[<session date>] Speaker: text"``, attachments included.

    Example:
        ``"[1:56 pm on 8 May, 2023] Caroline: I went to a support group. [shared: photo: a poster]"``
    """
    return f"[{session_label(utterance.timestamp)}] {utterance.speaker}: {utterance.full_text()}"


class VectorHost:
    """Plain vector retrieval of turns: each turn embedded as :func:`render_turn` text, ranked by cosine.

    Args:
        utterances: the conversation.
        embedder: the embedder of the turns (and of the queries, when no vectors are passed).
        counter: token counter for the passages' costs.
        cache: keeps the turn embeddings on disk between runs (optional).
    """

    def __init__(
        self,
        utterances: Sequence[Utterance],
        embedder: Embedder,
        *,
        counter: TokenCounter,
        cache: EmbeddingCache | None = None,
    ) -> None:
        self.embedder = embedder
        texts = [render_turn(u) for u in utterances]
        self.passages = [
            Passage(u.id, text, counter.count(text + "\n"), (u.id,), i)
            for i, (u, text) in enumerate(zip(utterances, texts, strict=True))
        ]
        self.matrix = cache.embed(texts) if cache is not None else embedder.embed(texts)

    @property
    def name(self) -> str:
        """``"vector"``."""
        return "vector"

    def search(
        self, queries: Sequence[str], *, vectors: Matrix | None = None, limit: int = 200
    ) -> list[list[Passage]]:
        """Rank every turn by cosine to each query (embedding the queries unless ``vectors`` are given)."""
        if not self.passages:
            return [[] for _ in queries]
        if not queries:
            return []
        query_matrix = self.embedder.embed(list(queries)) if vectors is None else vectors
        scores = query_matrix @ self.matrix.T
        depth = min(limit, len(self.passages))
        rankings: list[list[Passage]] = []
        for row in scores:
            top = np.argpartition(-row, depth - 1)[:depth] if depth < len(row) else np.arange(len(row))
            ordered = top[np.lexsort((top, -row[top]))]
            rankings.append([self.passages[i] for i in ordered])
        return rankings

    def fetch(self, turn_ids: Sequence[str]) -> list[Passage]:
        """The turns with these ids, in the ids' order, each once."""
        return passages_by_turn(self.passages, turn_ids)
