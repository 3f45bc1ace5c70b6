"""gravity_core stays framework-neutral and does no heavy work at import time."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import importlib, pkgutil, sys
import gravity_core
for info in pkgutil.walk_packages(gravity_core.__path__, "gravity_core."):
    if not info.name.endswith("__main__"):
        importlib.import_module(info.name)
heavy = {"langchain", "langchain_core", "llama_index", "onnxruntime", "chromadb"}
bad = sorted(m for m in sys.modules if m.split(".")[0] in heavy)
print(",".join(bad))
"""


def test_gravity_core_imports_no_framework_and_no_heavy_runtime() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


#: The front door: what ``from gravity_core import ...`` offers (pinned: a change here is an API change).
FRONT_DOOR = {
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
    "__version__",
    "build_kb_from_utterances",
    "build_users",
    "default_embedder",
    "load_chat_model",
    "load_conversation",
    "load_embedder",
    "load_locomo",
    "load_longmemeval",
    "load_utterances",
}

FRONT_DOOR_SCRIPT = """
import sys
import gravity_core
loaded = sorted(m for m in sys.modules if m.startswith("gravity_core."))
from gravity_core import AnchorBuilder, GravityEngine, UserKBs
from gravity_core.build import AnchorBuilder as deep
print(",".join(loaded))
print(AnchorBuilder is deep, GravityEngine.__module__, UserKBs.__module__)
"""


def test_the_front_door_exports_the_main_classes_lazily() -> None:
    import gravity_core

    assert set(gravity_core.__all__) == FRONT_DOOR
    assert all(getattr(gravity_core, name) is not None for name in FRONT_DOOR)
    out = subprocess.run(
        [sys.executable, "-c", FRONT_DOOR_SCRIPT], capture_output=True, text=True, check=True
    )
    loaded, resolved = out.stdout.strip().splitlines()
    # Importing the package loads only its errors and version; a name loads its layer when asked for.
    assert set(loaded.split(",")) == {"gravity_core._version", "gravity_core.errors"}
    assert resolved == "True gravity_core.query.engine gravity_core.serving.users"


def test_an_unknown_name_is_an_attribute_error() -> None:
    import gravity_core

    try:
        gravity_core.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("gravity_core.NoSuchThing should not exist")


def test_every_layer_declares_all_and_its_names_exist() -> None:
    import importlib
    import pkgutil

    import gravity_core

    for info in pkgutil.iter_modules(gravity_core.__path__, "gravity_core."):
        if info.ispkg:
            package = importlib.import_module(info.name)
            assert isinstance(getattr(package, "__all__", None), list), info.name
            assert all(hasattr(package, name) for name in package.__all__), info.name
