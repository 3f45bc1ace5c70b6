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
