"""GRAVITY for LangChain: a drop-in retriever, an anchors runnable and prompt, adapters, and agents.

Importing this package needs ``langchain-core``: ``pip install 'gravity-memory[langchain]'``. The agent
pieces (:class:`GravityMiddleware` for ``create_agent``, :class:`GravityStore` around a LangGraph store,
:func:`gravity_tools`) also need ``langchain`` and ``langgraph`` (the same extra) and are imported on
first use, so importing the package does not load them.
"""

import importlib
from typing import Any

from gravity_core.errors import MissingDependencyError

try:
    import langchain_core  # noqa: F401
except ImportError as _exc:
    raise MissingDependencyError("langchain-core", "langchain", "GRAVITY's LangChain integration") from _exc

from gravity_core.query.question_date import QUESTION_DATE_KEY, as_question_date
from gravity_core.serving.answer_cache import AnswerCache, UserAnswerCaches
from gravity_langchain.batched_search import BatchedSearch, ChromaBatchedSearch
from gravity_langchain.chain import (
    GRAVITY_PROMPT,
    RETRIEVED_MEMORIES,
    build_gravity_chain,
    format_documents,
    gravity_anchors_runnable,
    gravity_prompt,
)
from gravity_langchain.embeddings import GravityEmbeddings, LangChainEmbedder, shares_embedder
from gravity_langchain.fusion import document_key, reciprocal_rank_fusion
from gravity_langchain.messages import (
    DEFAULT_ROLES,
    build_kb_from_messages,
    forget_messages,
    utterances_from_messages,
)
from gravity_langchain.models import LangChainChatModel, openai_chat_model
from gravity_langchain.per_user import USER_ID_KEY, UserFilter
from gravity_langchain.retrieval_call import ANCHORS_EVENT, anchors_event_data
from gravity_langchain.retriever import GravityRetriever
from gravity_langchain.sgmem import SGMemRetriever, chunk_document, memory_document

_AGENT_PIECES = {
    "GravityMiddleware": "gravity_langchain.middleware",
    "GravitySearchItem": "gravity_langchain.store_items",
    "GravityStore": "gravity_langchain.store",
    "gravity_tools": "gravity_langchain.tools",
}


def __getattr__(name: str) -> Any:
    """The agent pieces, imported when first asked for (they load ``langchain`` and ``langgraph``)."""
    module = _AGENT_PIECES.get(name)
    if module is None:
        raise AttributeError(f"module 'gravity_langchain' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "ANCHORS_EVENT",
    "DEFAULT_ROLES",
    "GRAVITY_PROMPT",
    "QUESTION_DATE_KEY",
    "RETRIEVED_MEMORIES",
    "USER_ID_KEY",
    "BatchedSearch",
    "ChromaBatchedSearch",
    "GravityEmbeddings",
    "GravityMiddleware",
    "GravitySearchItem",
    "GravityStore",
    "AnswerCache",
    "GravityRetriever",
    "LangChainChatModel",
    "LangChainEmbedder",
    "SGMemRetriever",
    "UserFilter",
    "UserAnswerCaches",
    "anchors_event_data",
    "as_question_date",
    "build_gravity_chain",
    "build_kb_from_messages",
    "chunk_document",
    "document_key",
    "forget_messages",
    "format_documents",
    "gravity_anchors_runnable",
    "gravity_prompt",
    "gravity_tools",
    "memory_document",
    "openai_chat_model",
    "reciprocal_rank_fusion",
    "shares_embedder",
    "utterances_from_messages",
]
