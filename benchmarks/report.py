"""The table of docs/benchmarks.md: a line per ratio of each result in ``results/``, target and verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.common import verdict

__all__ = ["LABELS", "ORDER", "load_results", "markdown_table"]

#: Result files in the order of the issue's list, with the label of their rows.
LABELS = {
    "query_overhead": "1. Query overhead",
    "fanout": "2. Expansion fan-out",
    "build_cost": "3. Build cost",
    "offline_build": "4. Offline build speed",
    "incremental_add": "5. Incremental add",
    "memory": "6. Memory",
    "long_build": "7. Long build",
    "forget": "8. Forget",
    "many_users": "9. Many users",
    "long_utterance": "10. Long utterance",
}
ORDER = tuple(LABELS)


def load_results(directory: Path) -> list[dict[str, Any]]:
    """The result JSON files of ``directory`` that exist, in :data:`ORDER`."""
    found = []
    for name in ORDER:
        path = directory / f"{name}.json"
        if path.is_file():
            found.append(json.loads(path.read_text(encoding="utf-8")))
    return found


def markdown_table(results: list[dict[str, Any]]) -> str:
    """A markdown table of every ratio: benchmark, measure, value, target, verdict."""
    lines = ["| Benchmark | Measure | Value | Target | |", "|---|---|---:|---:|---|"]
    for result in results:
        title = LABELS.get(result["name"], result["name"])
        for r in result["ratios"]:
            target = "" if r["target"] is None else f"≤ {r['target']:g}"
            note = f" ({r['note']})" if r.get("note") else ""
            shown = verdict(r, "**missed**")
            lines.append(f"| {title} | {r['name']}{note} | {r['value']:.4g} | {target} | {shown} |")
    return "\n".join(lines)
