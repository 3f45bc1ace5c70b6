"""Benchmark 6: peak memory of loaded KBs of 100k and 1M anchors and of their query path.

Each grown KB (made-up names, see :mod:`benchmarks.synthetic`) is saved with ``AnchorStore`` part
by part (``Workspace.saved``, which benchmark 1's query at scale shares; ``StreamedKB``: never held
as models, which at 1M would take about 22 GB; without the turn vectors, which no query reads);
each measurement then runs in a fresh subprocess (``python -m benchmarks.memory MODE ...``), so
every peak is clean:

- ``baseline``: the interpreter and libraries: GRAVITY's query modules imported, the token counter's
  encoding loaded (about 38 MB, once per process whatever the KBs) and faiss imported; no KB;
- ``load``: the same, then ``GravityEngine.from_dir(kb)`` (sharing that counter): the KB packed
  (:mod:`gravity_core.storage.packed_kb`), its vectors and the engine's structures;
- ``query``: the same, then queries with precomputed question vectors (the encoder is never
  loaded), timed (p50), then run again under ``tracemalloc``, which records the peak of Python
  allocations during the queries alone.

Peak RSS is the subprocess's ``VmHWM`` (``ru_maxrss`` where /proc is missing).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import REPO_ROOT, BenchSettings, Result, ratio
from benchmarks.workspace import Workspace

__all__ = ["main", "measure", "run"]

logger = logging.getLogger(__name__)

_MODES = ("baseline", "load", "query")
#: Targets: peak RSS per anchor of a loaded KB (KB), and what queries add, as a share of it.
PER_ANCHOR_KB = 3.0
QUERY_SHARE = 0.1
_MB = 1024 * 1024


def run(settings: BenchSettings, workspace: Workspace) -> Result:
    """Save each grown KB, then measure each mode in its own subprocess (the baseline once)."""
    sizes = ", ".join(f"{n:,}" for n in settings.memory_sizes)
    result = Result(
        name="memory",
        title=f"6. Memory: peak RSS of loaded KBs ({sizes} anchors) and their query path",
        sides={
            "baseline": "python + GRAVITY's query modules, token encoding and faiss loaded, no KB",
            "load": "GravityEngine.from_dir(kb): packed KB, vectors, lexicon, index",
            "query": f"load, then {settings.memory_queries} queries with precomputed question vectors",
        },
    )
    questions, vectors = workspace.questions
    inputs = workspace.root / "memory-questions"
    inputs.mkdir(parents=True, exist_ok=True)
    (inputs / "questions.json").write_text(json.dumps(questions), encoding="utf-8")
    np.save(inputs / "vectors.npy", vectors)
    baseline = measure("baseline", workspace.root, inputs, settings.memory_queries)
    base = baseline["maxrss_mb"]
    result.figures = {"baseline": baseline, "sizes": {}}
    for nominal in settings.memory_sizes:
        saved = workspace.saved(nominal)
        folder, anchors = saved.folder, saved.anchors
        measured = {m: measure(m, folder, inputs, settings.memory_queries) for m in ("load", "query")}
        load, query = measured["load"]["maxrss_mb"], measured["query"]["maxrss_mb"]
        result.figures["sizes"][str(nominal)] = {
            "anchors": anchors,
            "kb_disk_mb": round(sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / _MB, 1),
            "save_s": round(saved.save_seconds, 2),
            **measured,
            "kb_rss_mb": round(load - base, 1),
            "query_rss_increase_mb": round(query - load, 1),
        }
        workspace.forget_saved(nominal)
        label = f"at {anchors:,} anchors"
        result.ratios += [
            ratio(f"peak RSS of the loaded KB above baseline (MB) {label}", load - base, None),
            ratio(f"KB RSS per anchor (KB) {label}", (load - base) * 1024 / anchors, PER_ANCHOR_KB),
            ratio(f"peak RSS added by the queries (MB) {label}", query - load, None),
            ratio(
                f"peak RSS added by the queries / loaded KB {label}",
                (query - load) / max(load - base, 1e-9),
                QUERY_SHARE,
            ),
            ratio(
                f"peak Python allocations during the queries (MB) {label}",
                measured["query"]["query_peak_mb"],
                None,
            ),
        ]
        logger.info("memory %s done", label)
    return result


def measure(mode: str, kb: Path, inputs: Path, queries: int) -> dict[str, Any]:
    """Run one measurement in a fresh subprocess and return what it printed."""
    command = [sys.executable, "-m", "benchmarks.memory", mode, str(kb), str(inputs), str(queries)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"memory measurement {mode!r} failed:\n{done.stderr[-2000:]}")
    measured: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def _worker(mode: str, kb: Path, inputs: Path, queries: int) -> dict[str, Any]:
    from gravity_core.query.engine import GravityEngine
    from gravity_core.text.tokens import TokenCounter

    counter = TokenCounter()
    counter.count("load the encoding")
    with contextlib.suppress(ImportError):
        import faiss  # noqa: F401  (a library the index loads: part of the baseline)
    out: dict[str, Any] = {}
    if mode != "baseline":
        started = time.perf_counter()
        engine = GravityEngine.from_dir(kb, counter=counter)
        out["load_s"] = round(time.perf_counter() - started, 2)
        if mode == "query":
            questions = json.loads((inputs / "questions.json").read_text(encoding="utf-8"))
            vectors = np.load(inputs / "vectors.npy")
            seconds = []
            for number in range(queries):  # timed apart: tracemalloc slows every allocation
                i = number % len(questions)
                started = time.perf_counter()
                engine.query(questions[i], query_embedding=vectors[i])
                seconds.append(time.perf_counter() - started)
            out["query_p50_ms"] = round(1000 * float(np.median(seconds)), 3)
            tracemalloc.start()
            for number in range(queries):
                i = number % len(questions)
                engine.query(questions[i], query_embedding=vectors[i])
            out["query_peak_mb"] = round(tracemalloc.get_traced_memory()[1] / _MB, 2)
            tracemalloc.stop()
    out["maxrss_mb"] = round(_peak_rss_kb() / 1024, 1)
    return out


def _peak_rss_kb() -> int:
    """Peak resident set of this process in KB.

    ``VmHWM`` belongs to the process's own address space, which ``exec`` replaces; ``ru_maxrss``
    would also count the pages of the parent this process was forked from.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KB on Linux


def main(argv: list[str] | None = None) -> None:
    """Subprocess entry point: ``python -m benchmarks.memory MODE KB_DIR INPUTS_DIR QUERIES``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=_MODES)
    parser.add_argument("kb", type=Path)
    parser.add_argument("inputs", type=Path)
    parser.add_argument("queries", type=int)
    args = parser.parse_args(argv)
    sys.stdout.write(json.dumps(_worker(args.mode, args.kb, args.inputs, args.queries)) + "\n")


if __name__ == "__main__":
    main()
