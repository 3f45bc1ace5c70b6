"""SGMem: a sentence-graph memory host, framework-neutral.

After "SGMem: Sentence Graph Memory for Long-Term Conversational Agents", Wu et al., 2025.

Dialogue is split into sessions, rounds (speaker-change pairs), turns (utterances) and sentences
(:mod:`~gravity_core.sgmem.units`); every unit is embedded once (a session as the mean of its
turns, being longer than an embedder reads); sentences are linked by a
k-nearest-neighbour graph on cosine (``k``, ``gamma``) across turns, rounds and sessions
(:mod:`~gravity_core.sgmem.graph`), each sentence keeping its parent turn, round and session.
Optionally a chat model writes a summary, facts and insights per session
(:mod:`~gravity_core.sgmem.memories`), indexed beside the sentences. Retrieval
(:mod:`~gravity_core.sgmem.retrieval`) searches sentences and memories, expands along the graph,
maps reached sentences to turn, round or session chunks, ranks them and keeps what fits a token
budget. :class:`SGMemWithGravity` puts GRAVITY on top, unchanged: its expanded queries go to
SGMem's search and its anchor blocks are added to the context.

Scale: the graph is built exactly and kept as ``(n, k)`` numpy arrays, which suits up to a few
hundred thousand sentences; :mod:`~gravity_core.sgmem.graph` says what to move to beyond that.

Importing this package loads no model and imports neither chromadb nor a framework.
"""

from gravity_core.sgmem.chroma_store import ChromaSGMemStore
from gravity_core.sgmem.config import ChunkGranularity, GraphConfig, RetrievalConfig, ScoreAggregate
from gravity_core.sgmem.graph import SentenceGraph
from gravity_core.sgmem.gravity import GravitySGMemResult, SGMemWithGravity
from gravity_core.sgmem.index import AddReport, SGMem
from gravity_core.sgmem.memories import Memory, MemoryGenerator, MemoryKind
from gravity_core.sgmem.persist import is_sgmem_dir, load_state, save_state
from gravity_core.sgmem.state import SGMemState
from gravity_core.sgmem.types import MatchedMemory, RankedChunk, SGMemResult
from gravity_core.sgmem.units import DialogueUnits

__all__ = [
    "AddReport",
    "ChromaSGMemStore",
    "ChunkGranularity",
    "DialogueUnits",
    "GraphConfig",
    "GravitySGMemResult",
    "MatchedMemory",
    "Memory",
    "MemoryGenerator",
    "MemoryKind",
    "RankedChunk",
    "RetrievalConfig",
    "SGMem",
    "SGMemResult",
    "SGMemState",
    "SGMemWithGravity",
    "ScoreAggregate",
    "SentenceGraph",
    "is_sgmem_dir",
    "load_state",
    "save_state",
]
