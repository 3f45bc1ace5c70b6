"""GRAVITY for LlamaIndex: anchors beside any index, query engine, chat engine or agent.

- :class:`GravityFusionRetriever`: the question's search on the host's retriever, with the selected
  anchors' source turns fetched by id; each expanded query as a separate search too under a policy
  that places them (``EXPANDING_POLICY``).
- :class:`GravityQueryTransform`: attaches the expansions to the query bundle (``TransformQueryEngine``).
- :class:`GravityQueryBundle`: a query bundle with the date the question is asked ("last month").
- :class:`GravityNodePostprocessor`: the anchor blocks as the first node of the synthesizer's context;
  :data:`GRAVITY_QA_TEMPLATE` / :func:`install_gravity_qa_template` for the template route.
- :class:`GravityMemoryBlock`: the anchors in LlamaIndex ``Memory`` (chat engines, agents).
- :func:`gravity_tools`: GRAVITY's memory as agent tools (search_memory, entity_profile, timeline, topic_arc).
- Adapters: :class:`LlamaIndexChatModel`, :class:`LlamaIndexEmbedder`, :class:`GravityEmbedding`,
  :func:`utterances_from_chat_messages`, :func:`nodes_from_utterances`, :func:`build_kb_from_chat_messages`,
  :func:`forget_chat_messages`.
- Instrumentation: spans on the public methods and :class:`GravityAnchorsEvent`.
"""

from gravity_core.errors import MissingDependencyError

try:
    import llama_index.core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise MissingDependencyError(
        "llama-index-core", "llamaindex", "GRAVITY's LlamaIndex integration"
    ) from exc

# The instrumentation module first: it creates the parent of every GRAVITY dispatcher.
from gravity_llamaindex.instrumentation import GravityAnchorsEvent, SelectedAnchor  # noqa: I001
from gravity_llamaindex.build import build_kb_from_chat_messages, forget_chat_messages
from gravity_llamaindex.embeddings import GravityEmbedding, LlamaIndexEmbedder, as_gravity_embedder
from gravity_llamaindex.memory import GravityMemoryBlock
from gravity_llamaindex.messages import nodes_from_utterances, utterances_from_chat_messages
from gravity_llamaindex.models import LlamaIndexChatModel
from gravity_llamaindex.postprocessor import (
    GRAVITY_METADATA_KEY,
    GravityNodePostprocessor,
    KeepGravityFirst,
    is_gravity_node,
)
from gravity_llamaindex.prompts import GRAVITY_QA_TEMPLATE, gravity_qa_template, install_gravity_qa_template
from gravity_llamaindex.provider import AnchorProvider
from gravity_llamaindex.fusion import reciprocal_rank_fusion
from gravity_llamaindex.retriever import GravityFusionRetriever
from gravity_llamaindex.sgmem import SGMemRetriever, chunk_node, memory_node
from gravity_llamaindex.tools import gravity_tools
from gravity_llamaindex.transform import GravityQueryBundle, GravityQueryTransform

__all__ = [
    "GRAVITY_METADATA_KEY",
    "GRAVITY_QA_TEMPLATE",
    "AnchorProvider",
    "GravityAnchorsEvent",
    "GravityEmbedding",
    "GravityFusionRetriever",
    "GravityMemoryBlock",
    "GravityNodePostprocessor",
    "GravityQueryBundle",
    "GravityQueryTransform",
    "KeepGravityFirst",
    "LlamaIndexChatModel",
    "LlamaIndexEmbedder",
    "SGMemRetriever",
    "SelectedAnchor",
    "as_gravity_embedder",
    "build_kb_from_chat_messages",
    "chunk_node",
    "forget_chat_messages",
    "gravity_qa_template",
    "gravity_tools",
    "install_gravity_qa_template",
    "is_gravity_node",
    "memory_node",
    "nodes_from_utterances",
    "reciprocal_rank_fusion",
    "utterances_from_chat_messages",
]
