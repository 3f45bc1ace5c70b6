"""SGMem (sentence-graph memory) as a second host of the harness.

SGMem ranks chunks itself (seed sentences, graph hops, chunk scores); the harness asks it for a deep
ranking without a budget and fills the budget the same way as for every host, so the comparison
with plain vector retrieval is like for like.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gravity_core.embeddings.base import Embedder, Matrix
from gravity_core.errors import ConfigurationError
from gravity_core.eval.hosts import Passage
from gravity_core.schema import Utterance
from gravity_core.text.tokens import TokenCounter

if TYPE_CHECKING:
    from gravity_core.sgmem import RankedChunk, SGMem

__all__ = ["SGMemHost", "sgmem_available"]

logger = logging.getLogger(__name__)


def sgmem_available() -> bool:
    """Whether this installation has the SGMem host (``gravity_core.sgmem``)."""
    return importlib.util.find_spec("gravity_core.sgmem") is not None


class SGMemHost:
    """SGMem over one conversation, as a :class:`~gravity_core.eval.hosts.Host`.

    Args:
        utterances: the conversation.
        embedder: SGMem's embedder (the queries' vectors are reused when it is the harness's).
        counter: token counter.
        directory: where the index is saved, so a rerun loads it instead of embedding again.
        granularity: the chunks SGMem returns: ``"turn"``, ``"round"`` or ``"session"``.

    Raises:
        ConfigurationError: SGMem is not part of this installation, or the granularity is unknown.
    """

    def __init__(
        self,
        utterances: Sequence[Utterance],
        embedder: Embedder,
        *,
        counter: TokenCounter,
        directory: str | os.PathLike[str] | None = None,
        granularity: str = "turn",
    ) -> None:
        if not sgmem_available():
            raise ConfigurationError("the SGMem host needs gravity_core.sgmem, which this installation lacks")
        from gravity_core.sgmem import SGMem, is_sgmem_dir

        self.counter = counter
        self.embedder = embedder
        self.granularity = granularity
        folder = Path(directory) if directory is not None else None
        if folder is not None and is_sgmem_dir(folder):
            self.memory: SGMem = SGMem.load(folder, embedder, counter=counter)
        else:
            self.memory = SGMem(embedder, counter=counter)
        self._config = self.memory.resolve_config(granularity=granularity)
        if self.memory.add(utterances).added and folder is not None:
            self.memory.save(folder)
        self._position = {u.id: i for i, u in enumerate(utterances)}
        self._passages: dict[str, Passage] = {}

    @property
    def name(self) -> str:
        """``"sgmem"``."""
        return "sgmem"

    def _passage(self, chunk: RankedChunk) -> Passage:
        passage = self._passages.get(chunk.id)
        if passage is None:
            position = min(
                (self._position.get(u, len(self._position)) for u in chunk.utterance_ids), default=0
            )
            passage = Passage(
                chunk.id, chunk.text, self.counter.count(chunk.text + "\n"), chunk.utterance_ids, position
            )
            self._passages[chunk.id] = passage
        return passage

    def search(
        self, queries: Sequence[str], *, vectors: Matrix | None = None, limit: int = 200
    ) -> list[list[Passage]]:
        """SGMem's chunk ranking for each query, without a budget, cut to ``limit`` chunks."""
        same_model = vectors is not None and self.memory.embedder.name == self.embedder.name
        # As many seed sentences as chunks wanted, so the ranking reaches deep enough for any budget.
        deep = self._config.model_copy(
            update={
                "token_budget": None,
                "max_chunks": limit,
                "top_sentences": max(limit, self._config.top_sentences),
            }
        )
        rankings: list[list[Passage]] = []
        for index, query in enumerate(queries):
            result = self.memory.retrieve(
                query,
                config=deep,
                query_embedding=vectors[index] if same_model and vectors is not None else None,
            )
            rankings.append([self._passage(chunk) for chunk in result.chunks])
        return rankings

    def fetch(self, turn_ids: Sequence[str]) -> list[Passage]:
        """The chunks (of the host's granularity) holding these turns, in the ids' order, each once."""
        return [
            self._passage(chunk)
            for chunk in self.memory.chunks_holding(turn_ids, granularity=self._config.granularity)
        ]
