"""``python -m benchmarks``: run the benchmarks, write ``benchmarks/results/*.json``, print every ratio.

Usage::

    python -m benchmarks                     # everything (about 20 minutes on two cores)
    python -m benchmarks --only long_build   # build time per utterance at 2k, 8k, 32k (about 4 minutes)
    python -m benchmarks --only long_utterance  # one utterance of 100 KB and of 1 MB (about 3 minutes)
    python -m benchmarks --only fanout build_cost
    python -m benchmarks --locomo PATH --out DIR
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from benchmarks import (
    build_cost,
    build_speed,
    fanout,
    forget_speed,
    long_build,
    long_utterance,
    many_users,
    memory,
    query_overhead,
)
from benchmarks.common import (
    DEFAULT_LOCOMO,
    REPO_ROOT,
    BenchSettings,
    Result,
    format_result,
    verdict,
    write_result,
)
from benchmarks.report import load_results, markdown_table
from benchmarks.workspace import Workspace

__all__ = ["BENCHMARKS", "main", "run_all"]

logger = logging.getLogger("benchmarks")

Benchmark = Callable[[BenchSettings, Workspace], "Result | list[Result]"]

#: Name on the command line -> benchmark, in the issue's order (build_speed gives results 4 and 5).
BENCHMARKS: dict[str, Benchmark] = {
    "query_overhead": query_overhead.run,
    "fanout": fanout.run,
    "build_cost": build_cost.run,
    "build_speed": build_speed.run,
    "memory": memory.run,
    "long_build": long_build.run,
    "forget": forget_speed.run,
    "many_users": many_users.run,
    "long_utterance": long_utterance.run,
}


def run_all(
    settings: BenchSettings, workspace: Workspace, names: list[str], out: Path | None
) -> list[Result]:
    """Run the named benchmarks; write each result to ``out`` (if given) as soon as it is done."""
    results: list[Result] = []
    for name in names:
        logger.info("running %s", name)
        started = time.perf_counter()
        produced = BENCHMARKS[name](settings, workspace)
        elapsed = time.perf_counter() - started
        for result in produced if isinstance(produced, list) else [produced]:
            result.seconds = round(elapsed, 1)
            if out is not None:
                write_result(out, result, settings)
            sys.stdout.write(format_result(result) + "\n\n")
            sys.stdout.flush()
            results.append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns 0 (a missed target is a result, not a failure)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), default=list(BENCHMARKS))
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="LoCoMo file (read in place)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    if not args.locomo.is_file():
        parser.error(f"no LoCoMo file at {args.locomo} (pass --locomo PATH)")
    settings = replace(BenchSettings(), locomo=args.locomo)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gravity-bench-") as scratch:
        results = run_all(settings, Workspace(settings, Path(scratch)), args.only, args.out)
    missed = [
        f"{result.name}: {r['name']} {r['value']:.4g}, {verdict(r, 'missed')}"
        for result in results
        for r in result.missed()
    ]
    sys.stdout.write(f"== all ratios ({time.perf_counter() - started:.0f} s in all)\n")
    sys.stdout.write(markdown_table(load_results(args.out)) + "\n\n")
    sys.stdout.write("targets missed: " + ("; ".join(missed) if missed else "none") + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
