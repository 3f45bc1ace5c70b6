"""Everything an SGMem index holds, as one plain value that is saved, loaded and updated."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gravity_core.embeddings.base import Matrix
from gravity_core.sgmem.config import GraphConfig
from gravity_core.sgmem.graph import SentenceGraph
from gravity_core.sgmem.memories import Memory
from gravity_core.sgmem.units import DialogueUnits

__all__ = ["VECTOR_KINDS", "SGMemState"]

#: The unit kinds that have one vector each, in file order.
VECTOR_KINDS = ("sentence", "turn", "round", "session", "memory")


@dataclass
class SGMemState:
    """Units, their vectors, the sentence graph and the generated memories.

    Attributes:
        embedder: name of the embedder every vector was made with.
        dim: vector dimension.
        graph_config: how the graph was built.
        units: sessions, rounds, turns and sentences.
        vectors: one L2-normalized float32 matrix per kind of :data:`VECTOR_KINDS`, rows in unit
            index order (memories in the order of ``memories``).
        graph: the sentence graph.
        memories: generated memories.
        memory_digests: session id -> digest of the turn ids its memories were made from.
    """

    embedder: str
    dim: int
    graph_config: GraphConfig
    units: DialogueUnits = field(default_factory=DialogueUnits)
    vectors: dict[str, Matrix] = field(default_factory=dict)
    graph: SentenceGraph | None = None
    memories: list[Memory] = field(default_factory=list)
    memory_digests: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for kind in VECTOR_KINDS:
            self.vectors.setdefault(kind, np.zeros((0, self.dim), dtype=np.float32))
        if self.graph is None:
            self.graph = SentenceGraph(self.graph_config.k, self.graph_config.gamma)

    @property
    def sentence_graph(self) -> SentenceGraph:
        """The graph (always set after construction)."""
        assert self.graph is not None
        return self.graph

    def counts(self) -> dict[str, int]:
        """Sizes: sessions, rounds, turns, sentences, edges, memories."""
        return {
            "sessions": len(self.units.sessions),
            "rounds": len(self.units.rounds),
            "turns": len(self.units.turns),
            "sentences": len(self.units.sentences),
            "edges": self.sentence_graph.edge_count(),
            "memories": len(self.memories),
        }
