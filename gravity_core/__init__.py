"""GRAVITY core: framework-neutral build and query of entity, event and topic anchors.

The front door: ``from gravity_core import AnchorBuilder, GravityEngine, UserKBs`` and the other
names of ``__all__``. Each is imported from its layer the first time it is asked for, so importing
this package does no work and loads no framework (only the errors are imported at once).

Layers, each importing only from those below it (checked by import-linter, see ``pyproject.toml``):
``cli``; ``eval``; ``serving``, ``sgmem``, ``explorer``; ``query``; ``build``; ``providers``,
``testing``; ``extract``; ``prompts``; ``llm``; ``storage``, ``loaders``; ``anchors``,
``embeddings``, ``temporal``, ``context``, ``text``; ``schema``; ``errors``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gravity_core._version import __version__
from gravity_core.errors import (
    AnchorStoreError,
    ConfigurationError,
    GravityError,
    InputDataError,
    MissingDependencyError,
    ProviderError,
    StorageAccessError,
    UnexpectedModelOutput,
)

if TYPE_CHECKING:
    from gravity_core.build import AnchorBuilder, BuildReport
    from gravity_core.build.forget import ForgetReport, ForgetRequest
    from gravity_core.context.policy import DEFAULT_POLICY, EXPANDING_POLICY, ContextPolicy
    from gravity_core.embeddings import Embedder, HashingEmbedder, MiniLMEmbedder, default_embedder
    from gravity_core.extract.llm import LLMExtractor
    from gravity_core.extract.offline import OfflineExtractor
    from gravity_core.loaders import load_conversation, load_locomo, load_longmemeval, load_utterances
    from gravity_core.providers import load_chat_model, load_embedder
    from gravity_core.query.config import ContextMode, QueryConfig
    from gravity_core.query.engine import GravityEngine
    from gravity_core.query.index import ChromaAnchorIndex, NumpyAnchorIndex
    from gravity_core.schema import AnchorKind, KnowledgeBase, Utterance
    from gravity_core.serving.answer_cache import AnswerCache, UserAnswerCaches
    from gravity_core.serving.many_users import build_users
    from gravity_core.serving.messages import build_kb_from_utterances
    from gravity_core.serving.users import UserKBs
    from gravity_core.storage.store import AnchorStore

#: Where each lazily imported name lives.
_LAZY: dict[str, str] = {
    "AnchorBuilder": "gravity_core.build",
    "BuildReport": "gravity_core.build",
    "ForgetReport": "gravity_core.build.forget",
    "ForgetRequest": "gravity_core.build.forget",
    "DEFAULT_POLICY": "gravity_core.context.policy",
    "EXPANDING_POLICY": "gravity_core.context.policy",
    "ContextPolicy": "gravity_core.context.policy",
    "Embedder": "gravity_core.embeddings",
    "HashingEmbedder": "gravity_core.embeddings",
    "MiniLMEmbedder": "gravity_core.embeddings",
    "default_embedder": "gravity_core.embeddings",
    "LLMExtractor": "gravity_core.extract.llm",
    "OfflineExtractor": "gravity_core.extract.offline",
    "load_conversation": "gravity_core.loaders",
    "load_locomo": "gravity_core.loaders",
    "load_longmemeval": "gravity_core.loaders",
    "load_utterances": "gravity_core.loaders",
    "load_chat_model": "gravity_core.providers",
    "load_embedder": "gravity_core.providers",
    "ContextMode": "gravity_core.query.config",
    "QueryConfig": "gravity_core.query.config",
    "GravityEngine": "gravity_core.query.engine",
    "ChromaAnchorIndex": "gravity_core.query.index",
    "NumpyAnchorIndex": "gravity_core.query.index",
    "AnchorKind": "gravity_core.schema",
    "KnowledgeBase": "gravity_core.schema",
    "Utterance": "gravity_core.schema",
    "AnswerCache": "gravity_core.serving.answer_cache",
    "UserAnswerCaches": "gravity_core.serving.answer_cache",
    "build_users": "gravity_core.serving.many_users",
    "build_kb_from_utterances": "gravity_core.serving.messages",
    "UserKBs": "gravity_core.serving.users",
    "AnchorStore": "gravity_core.storage.store",
}

__all__ = [
    "AnchorBuilder",
    "AnchorKind",
    "AnchorStore",
    "AnchorStoreError",
    "AnswerCache",
    "BuildReport",
    "ChromaAnchorIndex",
    "ConfigurationError",
    "ContextMode",
    "ContextPolicy",
    "DEFAULT_POLICY",
    "EXPANDING_POLICY",
    "Embedder",
    "ForgetReport",
    "ForgetRequest",
    "GravityEngine",
    "GravityError",
    "HashingEmbedder",
    "InputDataError",
    "KnowledgeBase",
    "LLMExtractor",
    "MiniLMEmbedder",
    "MissingDependencyError",
    "NumpyAnchorIndex",
    "OfflineExtractor",
    "ProviderError",
    "QueryConfig",
    "StorageAccessError",
    "UnexpectedModelOutput",
    "UserAnswerCaches",
    "UserKBs",
    "Utterance",
    "build_kb_from_utterances",
    "build_users",
    "default_embedder",
    "load_chat_model",
    "load_conversation",
    "load_embedder",
    "load_locomo",
    "load_longmemeval",
    "load_utterances",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
