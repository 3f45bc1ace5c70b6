"""The package's exports, and the error when LlamaIndex is not installed."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import gravity_llamaindex

EXPECTED_ALL = {
    "forget_chat_messages",
    "GRAVITY_METADATA_KEY",
    "GRAVITY_QA_TEMPLATE",
    "AnchorProvider",
    "SGMemRetriever",
    "chunk_node",
    "memory_node",
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
    "SelectedAnchor",
    "as_gravity_embedder",
    "build_kb_from_chat_messages",
    "gravity_qa_template",
    "gravity_tools",
    "install_gravity_qa_template",
    "is_gravity_node",
    "nodes_from_utterances",
    "reciprocal_rank_fusion",
    "utterances_from_chat_messages",
}


def test_all_exports() -> None:
    assert set(gravity_llamaindex.__all__) == EXPECTED_ALL
    assert all(hasattr(gravity_llamaindex, name) for name in EXPECTED_ALL)


def test_every_module_declares_all_and_its_names_exist() -> None:
    for info in pkgutil.iter_modules(gravity_llamaindex.__path__, "gravity_llamaindex."):
        module = importlib.import_module(info.name)
        assert isinstance(module.__all__, list), info.name
        assert all(hasattr(module, name) for name in module.__all__), info.name


def test_without_llama_index_the_import_names_the_extra() -> None:
    code = (
        "import sys\n"
        "for name in ('llama_index', 'llama_index.core'):\n"
        "    sys.modules[name] = None\n"
        "from gravity_core.errors import MissingDependencyError\n"
        "try:\n"
        "    import gravity_llamaindex\n"
        "except MissingDependencyError as exc:\n"
        "    print('MISSING', exc.package, exc.extra, exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "MISSING llama-index-core llamaindex" in result.stdout
    assert "pip install 'gravity-memory[llamaindex]'" in result.stdout
