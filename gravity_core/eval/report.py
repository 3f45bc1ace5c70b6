"""Writing a run's outputs: the JSON of every figure and record, and the Markdown report."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gravity_core.eval.results import OVERALL, EvalResults
from gravity_core.eval.settings import HOST_ALONE
from gravity_core.storage.files import write_json_atomic

__all__ = ["RESULTS_FILE", "REPORT_FILE", "markdown_report", "write_outputs"]

logger = logging.getLogger(__name__)

RESULTS_FILE = "results.json"
REPORT_FILE = "report.md"

_Metric = tuple[str, str]
_COVERAGE: _Metric = ("answer_coverage", "Answer coverage")
_RECALL: _Metric = ("evidence_recall", "Evidence recall")
_ACCURACY: _Metric = ("accuracy", "LLM-judge accuracy")
_F1: _Metric = ("f1", "Token F1")


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _categories(results: EvalResults) -> list[str]:
    return [*results.categories, OVERALL]


def _cell(results: EvalResults, host: str, setting: str, budget: int) -> dict[str, Any] | None:
    cell: dict[str, Any] | None = results.summary.get(host, {}).get(setting, {}).get(str(budget))
    return cell


def _comparison_table(results: EvalResults, host: str, metric: _Metric, budgets: Sequence[int]) -> list[str]:
    key, _ = metric
    header = ["category", "n"]
    for budget in budgets:
        header += [f"host @{budget}", f"+GRAVITY @{budget}", "Δ"]
    rows: list[list[str]] = []
    for category in _categories(results):
        row: list[str] = [category]
        count = ""
        for budget in budgets:
            alone, ours = _cell(results, host, HOST_ALONE, budget), _cell(results, host, "full", budget)
            a = alone.get(category, {}).get(key) if alone else None
            g = ours.get(category, {}).get(key) if ours else None
            count = count or (str(alone[category]["questions"]) if alone and category in alone else "")
            delta = f"{g - a:+.3f}" if a is not None and g is not None else "–"
            row += [_number(a), _number(g), delta]
        rows.append([row[0], count, *row[1:]])
    return _table(header, rows)


def _ablation_table(results: EvalResults, host: str, budget: int, judged: bool) -> list[str]:
    categories = results.categories
    header = [
        "setting",
        *(f"coverage {c}" for c in categories),
        "coverage overall",
        "evidence recall",
        "anchor tokens",
    ]
    if judged:
        header += ["accuracy", "F1"]
    rows: list[list[str]] = []
    for setting in dict.fromkeys([HOST_ALONE, *results.config["settings"]]):
        cell = _cell(results, host, setting, budget)
        if cell is None:
            continue
        overall = cell[OVERALL]
        row = [setting, *(_number(cell.get(c, {}).get("answer_coverage")) for c in categories)]
        row += [_number(overall["answer_coverage"]), _number(overall["evidence_recall"])]
        row.append(f"{overall['anchor_tokens']:.0f}" if overall["anchor_tokens"] is not None else "–")
        if judged:
            row += [_number(overall["accuracy"]), _number(overall["f1"])]
        rows.append(row)
    return _table(header, rows)


def _sources_phrase(policy: dict[str, Any]) -> str:
    """How the run placed the source turns fetched by provenance, in words."""
    kinds = policy.get("source_kinds") or ()
    per_anchor, every = policy.get("sources_per_anchor", 0), policy.get("source_every", 0)
    if not kinds or not per_anchor or not every:
        return "no source turn fetched by provenance"
    names = "/".join(str(kind) for kind in kinds)
    placed = (
        f"up to {per_anchor} source turns of each selected {names} anchor fetched by id, at every "
        f"{every}th place after the question's first {policy.get('source_lead', 0)}"
    )
    one, together = policy.get("max_source_turn_share"), policy.get("max_sources_share")
    if one is None or together is None:  # a run from before the bounds
        return placed
    return f"{placed}, each within {one:.0%} and all within {together:.0%} of the memories' tokens"


def _cap_phrase(policy: dict[str, Any]) -> str:
    """How the injection's part of a budget is capped."""
    most = policy.get("max_anchor_tokens")
    return f"at most {most} tokens and the preset's budget" if most else "capped by the preset"


def _expansions_phrase(policy: dict[str, Any]) -> str:
    """How the run placed the expanded queries' hits, in words."""
    every = policy.get("every", 0)
    if not every:
        return "no expanded query's hit placed"
    return f"expansions add a hit at every {every}th place after the question's first {policy.get('lead', 0)}"


def _judged(results: EvalResults) -> bool:
    return any(r.correct is not None for r in results.records)


def _goal_lines(results: EvalResults) -> list[str]:
    lines: list[str] = []
    for goal in results.goals:
        verdict = "met" if goal.met else "not met"
        gain = "–" if goal.temporal_gain is None else f"{goal.temporal_gain:+.3f}"
        lines += [
            f"- **{goal.host}**: {verdict}. Host + GRAVITY ({goal.setting}) at {goal.budget} tokens covers "
            f"{goal.coverage:.3f} of answers, against {goal.reference_coverage:.3f} for the host alone at "
            f"{goal.reference_budget} tokens; on temporal questions it is {gain} against the host alone at "
            f"{goal.budget} tokens (asked: {goal.required_temporal_gain:+.2f}).",
        ]
    return lines or ["- not checked: the run lacks the 1500 and 3000 budgets or the full setting."]


def _gains_lines(results: EvalResults) -> list[str]:
    if not results.comparisons:
        return []
    rows = [
        [
            c.host,
            c.setting,
            str(c.budget),
            str(len(c.gains)),
            str(len(c.losses)),
            str(c.both_correct),
            str(c.both_wrong),
        ]
        for c in results.comparisons
    ]
    header = [
        "host",
        "setting",
        "budget",
        "gains (wrong→right)",
        "losses (right→wrong)",
        "both right",
        "both wrong",
    ]
    return ["", "## Gains and losses against the host alone (LLM judge)", "", *_table(header, rows)]


def markdown_report(results: EvalResults) -> str:
    """The run as Markdown: goal check, host vs host + GRAVITY per category and budget, ablations."""
    config, info = results.config, results.info
    budgets = list(config["budgets"])
    ablation_budget = 1500 if 1500 in budgets else budgets[len(budgets) // 2]
    judged = _judged(results)
    lines = [
        f"# GRAVITY evaluation: {results.benchmark}",
        "",
        f"{info['questions']} questions in {info['samples']} samples; extractor `{info['extractor']}`, "
        f"embedder `{info['embedder']}`; budgets {', '.join(map(str, budgets))} cl100k tokens, everything "
        f"in the context counted (GRAVITY's injection takes {config['policy']['anchor_share']:.0%} of what "
        f"a budget has beyond {config['policy']['host_reserve']} tokens, {_cap_phrase(config['policy'])}; "
        f"{_sources_phrase(config['policy'])}; {_expansions_phrase(config['policy'])}). "
        f"Offline part: {info['offline_seconds']} s.",
        "",
        "Evidence recall: share of a question's gold evidence turns present in the context as raw turns. "
        "Answer coverage: share of questions whose gold answer's content words (lower-cased, stop words "
        "removed, words of the question aside) all appear in the context text (anchors included); "
        "questions whose gold answer is a rubric for a judge are left out of it.",
        "",
        "## Goal",
        "",
        *_goal_lines(results),
    ]
    metrics = [_COVERAGE, _RECALL] + ([_ACCURACY, _F1] if judged else [])
    for host in info["hosts"]:
        for metric in metrics:
            key, title = metric
            shown = [b for b in budgets if key not in ("accuracy", "f1") or b in config["llm_budgets"]]
            lines += ["", f"## {title}: {host} alone vs {host} + GRAVITY (full)", ""]
            lines += _comparison_table(results, host, metric, shown)
        lines += ["", f"## Ablations: {host}, {ablation_budget} tokens", ""]
        lines += _ablation_table(
            results, host, ablation_budget, judged and ablation_budget in config["llm_budgets"]
        )
    lines += _gains_lines(results)
    if judged:
        lines += ["", f"Model calls this run: {info['model_calls']} (cache hits: {info['cache_hits']})."]
    return "\n".join(lines) + "\n"


def write_outputs(
    results: EvalResults,
    directory: str | os.PathLike[str],
    *,
    plots: bool = True,
    plotter: Callable[[EvalResults, Path], list[Path]] | None = None,
) -> dict[str, Path]:
    """Write ``results.json``, ``report.md`` and (with ``plots``) the PNG plots into ``directory``.

    Args:
        results: the run.
        directory: the output folder.
        plots: whether to draw the plots (needs matplotlib, the ``eval`` extra).
        plotter: draws the plots (default: :func:`gravity_core.eval.plots.write_plots`).

    Returns:
        ``{"json": ..., "report": ..., "plot:<name>": ...}`` paths.

    Raises:
        MissingDependencyError: plots asked for and matplotlib is not installed.
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    json_path = folder / RESULTS_FILE
    write_json_atomic(json_path, results.to_dict())
    written["json"] = json_path
    report_path = folder / REPORT_FILE
    report_path.write_text(markdown_report(results), encoding="utf-8")
    written["report"] = report_path
    if plots:
        if plotter is None:
            from gravity_core.eval.plots import write_plots

            plotter = write_plots
        for path in plotter(results, folder / "plots"):
            written[f"plot:{path.stem}"] = path
    logger.info("wrote %s", ", ".join(str(p) for p in written.values()))
    return written
