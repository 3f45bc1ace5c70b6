"""PNG plots of a run: per-category bars and metrics against the budget (matplotlib, the ``eval`` extra).

Figures are drawn with matplotlib's object API (:class:`matplotlib.figure.Figure`), never pyplot,
so no global figure state or interactive backend is touched.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gravity_core.errors import MissingDependencyError
from gravity_core.eval.results import OVERALL, EvalResults
from gravity_core.eval.settings import HOST_ALONE

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["write_plots"]

logger = logging.getLogger(__name__)

_METRICS = {
    "answer_coverage": "answer coverage",
    "evidence_recall": "evidence recall",
    "accuracy": "LLM-judge accuracy",
}


def _figure(width: float, height: float) -> Figure:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingDependencyError("matplotlib", "eval", "Plotting evaluation results") from exc
    return Figure(figsize=(width, height), dpi=110, layout="constrained")


def _value(
    results: EvalResults, host: str, setting: str, budget: int, category: str, metric: str
) -> float | None:
    cell: dict[str, Any] = results.summary.get(host, {}).get(setting, {}).get(str(budget), {})
    value = cell.get(category, {}).get(metric)
    return float(value) if value is not None else None


def _category_bars(results: EvalResults, host: str, metric: str, path: Path) -> Path | None:
    budgets = [
        b for b in results.config["budgets"] if _value(results, host, "full", b, OVERALL, metric) is not None
    ]
    if not budgets:
        return None
    categories = [*results.categories, OVERALL]
    figure = _figure(4.2 * len(budgets), 3.6)
    axes = figure.subplots(1, len(budgets), sharey=True, squeeze=False)[0]
    width = 0.38
    for ax, budget in zip(axes, budgets, strict=True):
        for offset, (setting, label) in enumerate(
            ((HOST_ALONE, f"{host} alone"), ("full", f"{host} + GRAVITY"))
        ):
            values = [_value(results, host, setting, budget, c, metric) or 0.0 for c in categories]
            ax.bar([i + (offset - 0.5) * width for i in range(len(categories))], values, width, label=label)
        ax.set_title(f"{budget} tokens")
        ax.set_xticks(range(len(categories)), categories, rotation=30, ha="right")
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel(_METRICS[metric])
    axes[0].legend(loc="upper left", fontsize="small")
    figure.suptitle(f"{results.benchmark}: {_METRICS[metric]} by category")
    figure.savefig(path)
    return path


def _budget_lines(results: EvalResults, host: str, path: Path) -> Path:
    budgets = list(results.config["budgets"])
    settings = [HOST_ALONE, *dict.fromkeys(results.config["settings"])]
    metrics = ["answer_coverage", "evidence_recall"]
    figure = _figure(10, 4)
    axes = figure.subplots(1, len(metrics), squeeze=False)[0]
    for ax, metric in zip(axes, metrics, strict=True):
        for setting in settings:
            points = [(b, _value(results, host, setting, b, OVERALL, metric)) for b in budgets]
            shown = [(b, v) for b, v in points if v is not None]
            if not shown:
                continue
            emphasis = setting in (HOST_ALONE, "full")
            ax.plot(
                [b for b, _ in shown],
                [v for _, v in shown],
                marker="o",
                linewidth=2.2 if emphasis else 0.9,
                alpha=1.0 if emphasis else 0.55,
                label=f"{host} alone" if setting == HOST_ALONE else setting,
            )
        ax.set_xlabel("token budget (cl100k)")
        ax.set_ylabel(_METRICS[metric])
        ax.set_xticks(budgets)
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize="x-small", ncol=2)
    figure.suptitle(f"{results.benchmark}: {host}, metric against budget (all categories)")
    figure.savefig(path)
    return path


def write_plots(results: EvalResults, directory: Path) -> list[Path]:
    """Draw the run's plots into ``directory``; returns the files written.

    Per host: ``<host>_coverage_by_category.png`` and ``<host>_recall_by_category.png`` (host alone vs
    host + GRAVITY at each budget), ``<host>_accuracy_by_category.png`` when a chat model judged, and
    ``<host>_vs_budget.png`` (coverage and evidence recall against the budget for every setting).

    Raises:
        MissingDependencyError: matplotlib is not installed (``pip install 'gravity-memory[eval]'``).
    """
    _figure(1, 1)  # fail before creating the folder if matplotlib is missing
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for host in results.info["hosts"]:
        for metric, stem in (
            ("answer_coverage", "coverage"),
            ("evidence_recall", "recall"),
            ("accuracy", "accuracy"),
        ):
            drawn = _category_bars(results, host, metric, directory / f"{host}_{stem}_by_category.png")
            if drawn is not None:
                written.append(drawn)
        written.append(_budget_lines(results, host, directory / f"{host}_vs_budget.png"))
    return written
