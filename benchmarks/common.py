"""What every benchmark shares: settings, interleaved timing, statistics, ratios, counting, results.

Absolute times on a shared two-core machine are noise; each benchmark therefore times GRAVITY and
its comparison in the same process, interleaved item by item (or alternated run by run), after a
warm-up, and reports their ratio next to the target.
"""

from __future__ import annotations

import cProfile
import json
import logging
import os
import platform
import pstats
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import numpy as np

from gravity_core.embeddings.base import Embedder, Matrix

__all__ = [
    "DEFAULT_LOCOMO",
    "REPO_ROOT",
    "BenchSettings",
    "CountingEmbedder",
    "ModelCallCounter",
    "Result",
    "count_model_calls",
    "format_result",
    "latency",
    "load_questions",
    "make_embedder",
    "profile_top",
    "ratio",
    "time_interleaved",
    "timed",
    "verdict",
    "write_result",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The LoCoMo dev file, read in place (it must never be copied into the repository).
DEFAULT_LOCOMO = REPO_ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"

#: Modules whose functions are model calls: a call into one of them during a query is counted.
MODEL_MODULES = ("gravity_core.llm", "langchain_core.language_models", "gravity_langchain.models")


@dataclass(frozen=True)
class BenchSettings:
    """Sizes and repetitions of one benchmark run (:meth:`tiny` for the smoke test).

    Attributes:
        locomo: the LoCoMo file.
        sample: the conversation the query benchmarks grow their KBs from.
        embedder: ``"minilm"`` (the real offline encoder) or ``"hashing"`` (tests only).
        kb_sizes: anchors of the grown KBs of the query-overhead benchmark.
        scale_sizes: anchors of its KBs too large to hold as models: saved part by part and loaded
            from their folder (the memory benchmark reuses them when it measures the same sizes).
        query_repeats: passes over the questions per side (after one warm-up pass).
        max_questions: cap on the questions used (None: all of categories 1-4).
        fanout_repeats: passes over the questions in the fan-out benchmark.
        batch_sizes: utterances per model call in the build-cost benchmark.
        build_samples: samples of the build benchmarks (None: every sample of the file).
        build_repeats: alternated repetitions of the offline build and the encoder.
        incremental_repeats: alternated repetitions of add-one-session and rebuild.
        delta_save_anchors: anchors of the KB an add is saved into as a delta or a full generation.
        memory_sizes: sizes (anchors) of the KBs whose peak memory is measured.
        memory_queries: queries run in the memory benchmark's query-path measurement.
        long_build_sizes: utterances of the synthetic conversations of the long-build benchmark.
        noise: std of the perturbation added to replicated vectors (per unit vector).
        seed: seed of the synthetic growth.
        forget_every: the forget benchmark forgets every ``forget_every``-th session (and the first,
            middle and last ones).
        forget_repeats: alternated repetitions of forget and rebuild per session.
        many_users: synthetic users of the many-users benchmark.
        many_user_turns: utterances of each of those users' conversations.
        many_workers: worker processes of its process-pool sides (the first is the baseline).
        profile: profile a side that misses its target.
    """

    locomo: Path = DEFAULT_LOCOMO
    sample: str = "conv-26"
    embedder: str = "minilm"
    kb_sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    scale_sizes: tuple[int, ...] = (1_000_000,)
    query_repeats: int = 3
    max_questions: int | None = None
    fanout_repeats: int = 2
    batch_sizes: tuple[int, ...] = (20, 40, 80)
    build_samples: tuple[str, ...] | None = None
    build_repeats: int = 1
    incremental_repeats: int = 3
    delta_save_anchors: int = 100_000
    memory_sizes: tuple[int, ...] = (100_000, 1_000_000)
    memory_queries: int = 100
    long_build_sizes: tuple[int, ...] = (2_000, 8_000, 32_000)
    noise: float = 0.3
    seed: int = 0
    forget_every: int = 6
    forget_repeats: int = 1
    many_users: int = 16
    many_user_turns: int = 60
    many_workers: tuple[int, ...] = (1, 2, 4)
    profile: bool = True

    @classmethod
    def tiny(cls, locomo: Path, sample: str) -> BenchSettings:
        """Settings that run every benchmark in seconds (hashing embedder, small KBs, one repeat)."""
        return cls(
            locomo=locomo,
            sample=sample,
            embedder="hashing",
            kb_sizes=(50, 200),
            scale_sizes=(400,),
            query_repeats=1,
            max_questions=3,
            fanout_repeats=1,
            batch_sizes=(2, 4),
            build_repeats=1,
            incremental_repeats=1,
            delta_save_anchors=400,
            memory_sizes=(200, 400),
            memory_queries=3,
            long_build_sizes=(60, 240),
            forget_every=100,
            many_users=4,
            many_user_turns=12,
            many_workers=(1, 2),
        )


def make_embedder(kind: str) -> Embedder:
    """The benchmark's encoder: the offline MiniLM, or the hashing embedder for the smoke test."""
    if kind == "minilm":
        from gravity_core.embeddings.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if kind == "hashing":
        from gravity_core.embeddings.hashing import HashingEmbedder

        return HashingEmbedder()
    raise ValueError(f"unknown embedder {kind!r} (minilm or hashing)")


def load_questions(locomo: Path, sample: str, limit: int | None = None) -> list[str]:
    """Questions of categories 1-4 of one LoCoMo sample (category 5 is adversarial and usually skipped)."""
    with open(locomo, encoding="utf-8") as handle:
        data = json.load(handle)
    found = next((s for s in data if s.get("sample_id") == sample), None)
    if found is None:
        raise ValueError(f"no sample {sample!r} in {locomo}")
    questions = [str(q["question"]) for q in found.get("qa", []) if q.get("category") != 5]
    if not questions:
        raise ValueError(f"sample {sample!r} of {locomo} has no question of categories 1-4")
    return questions[:limit] if limit is not None else questions


class CountingEmbedder:
    """An embedder that counts its calls and texts, and otherwise is the embedder it wraps (same name)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.calls = 0
        self.texts = 0
        self.chars = 0

    @property
    def name(self) -> str:
        """The wrapped embedder's name (so a KB made by it is queried with this one)."""
        return self.inner.name

    @property
    def dim(self) -> int:
        """The wrapped embedder's dimension."""
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Count, then embed with the wrapped embedder."""
        self.calls += 1
        self.texts += len(texts)
        self.chars += sum(len(t) for t in texts)
        return self.inner.embed(texts)

    def reset(self) -> None:
        """Zero the counters."""
        self.calls = self.texts = self.chars = 0


# -- timing -------------------------------------------------------------------------------------


def time_interleaved(
    sides: Mapping[str, Callable[[T], object]],
    items: Sequence[T],
    *,
    repeats: int,
    warmup: int | None = None,
) -> dict[str, list[float]]:
    """Seconds per call of each side, the sides run back to back on each item.

    Which side goes first alternates from item to item, so load that drifts during the run falls on
    both alike. ``warmup`` items (default: all) run once on every side before timing.

    Returns:
        Side name -> one duration per (repeat, item).
    """
    names = list(sides)
    for item in items if warmup is None else items[:warmup]:
        for name in names:
            sides[name](item)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        for number, item in enumerate(items):
            for name in names if (number + repeat) % 2 == 0 else names[::-1]:
                started = time.perf_counter()
                sides[name](item)
                samples[name].append(time.perf_counter() - started)
    return samples


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()`` and the seconds it took."""
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def latency(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p95 and mean in milliseconds, and the sample count."""
    values = np.asarray(seconds, dtype=np.float64) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(values, 50)), 3),
        "p95_ms": round(float(np.percentile(values, 95)), 3),
        "mean_ms": round(float(values.mean()), 3),
        "n": len(values),
    }


# -- results ------------------------------------------------------------------------------------


def ratio(name: str, value: float, target: float | None, *, note: str = "") -> dict[str, Any]:
    """A ratio (or per-unit figure) with its target: ``met`` when ``value <= target``."""
    return {
        "name": name,
        "value": round(float(value), 4),
        "target": target,
        "met": None if target is None else bool(value <= target),
        "note": note,
    }


@dataclass
class Result:
    """What one benchmark reports (written as JSON).

    Attributes:
        name: file stem of the result, e.g. ``"query_overhead"``.
        title: one line saying what is compared with what.
        sides: what each side's timing includes.
        ratios: the ratios with their targets (see :func:`ratio`).
        figures: everything else measured (latencies, counts, sizes).
        profiles: for each missed target, the functions that dominate the slow side.
        seconds: wall time of the benchmark itself.
    """

    name: str
    title: str
    sides: dict[str, str]
    ratios: list[dict[str, Any]] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    profiles: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seconds: float = 0.0

    def missed(self) -> list[dict[str, Any]]:
        """The ratios that miss their target."""
        return [r for r in self.ratios if r["met"] is False]


def environment() -> dict[str, Any]:
    """Machine, interpreter and code version of a run."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "commit": commit,
    }


def write_result(directory: Path, result: Result, settings: BenchSettings) -> Path:
    """Write ``<directory>/<result.name>.json`` with the run's environment and settings."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{result.name}.json"
    payload = {
        **asdict(result),
        "environment": environment(),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(settings).items()},
    }
    path.write_text(json.dumps(payload, indent=1, default=str) + "\n", encoding="utf-8")
    return path


def verdict(r: dict[str, Any], missed: str = "MISSED") -> str:
    """``met``, ``<missed> by 0.2 (1.8x the target)``, or nothing for a ratio without a target."""
    if r["met"] is None:
        return ""
    if r["met"]:
        return "met"
    value, target = r["value"], r["target"]
    times = f", {value / target:.2f}x the target" if target > 0 else ""
    return f"{missed} by {value - target:.3g}{times}"


def format_result(result: Result) -> str:
    """The ratios of a result, one line each with its target, then the sides' definitions."""
    lines = [f"== {result.title} ({result.seconds:.0f} s)"]
    for side, what in result.sides.items():
        lines.append(f"   {side}: {what}")
    for r in result.ratios:
        target = "" if r["target"] is None else f"target <= {r['target']:g}"
        note = f"  ({r['note']})" if r["note"] else ""
        lines.append(f"   {r['name']:<58} {r['value']:>9.4g}   {target:<16} {verdict(r)}{note}")
    for label, rows in result.profiles.items():
        lines.append(f"   profile of {label} (share of the total):")
        lines.extend(f"      {row['share']:>6.1%}  {row['function']}" for row in rows[:8])
    return "\n".join(lines)


# -- profiling and call counting ----------------------------------------------------------------


def profile_top(fn: Callable[[T], object], items: Iterable[T], *, top: int = 12) -> list[dict[str, Any]]:
    """The functions with the largest cumulative time while ``fn`` runs over ``items`` (cProfile).

    Returns:
        ``{"function", "share", "cumulative_ms", "calls"}`` rows, largest first, the profiled
        wrapper itself excluded; ``share`` is of the total profiled time.
    """
    profiler = cProfile.Profile()
    profiler.enable()
    for item in items:
        fn(item)
    profiler.disable()
    stats = pstats.Stats(profiler)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = max(float(stats.total_tt), 1e-12)  # type: ignore[attr-defined]
    rows = []
    for (filename, line, name), (_, calls, _, cumulative, _) in raw.items():
        where = _short_path(filename)
        rows.append(
            {
                "function": f"{where}:{line}({name})",
                "share": round(cumulative / total, 4),
                "cumulative_ms": round(cumulative * 1000.0, 2),
                "calls": calls,
            }
        )
    # The wrapper and the loop's own frames hold ~100% and say nothing.
    rows = [r for r in rows if r["share"] < 0.995]
    rows.sort(key=lambda r: -r["cumulative_ms"])
    return rows[:top]


def _short_path(filename: str) -> str:
    for marker in ("site-packages/", str(REPO_ROOT) + "/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


class ModelCallCounter:
    """Counts calls into model code (:data:`MODEL_MODULES`) and to any ``complete`` method.

    It works through ``sys.setprofile``, so it slows every call: use it outside timed runs.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.where: set[str] = set()

    def _hook(self, frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        module = str(frame.f_globals.get("__name__", ""))
        if module.startswith(MODEL_MODULES) or frame.f_code.co_name in ("complete", "complete_structured"):
            self.calls += 1
            self.where.add(f"{module}.{frame.f_code.co_name}")

    def __enter__(self) -> ModelCallCounter:
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)


def count_model_calls(fn: Callable[[T], object], items: Iterable[T]) -> int:
    """How many model calls ``fn`` makes over ``items`` (untimed: the profile hook slows every call)."""
    with ModelCallCounter() as counter:
        for item in items:
            fn(item)
    if counter.calls:
        logger.warning("model calls found: %s", sorted(counter.where))
    return counter.calls
