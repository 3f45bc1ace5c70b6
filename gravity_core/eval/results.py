"""Per-question records of a run, and the figures computed from them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gravity_core.eval.settings import HOST_ALONE

__all__ = [
    "OVERALL",
    "Comparison",
    "EvalResults",
    "GoalCheck",
    "QuestionRecord",
    "check_goal",
    "compare",
    "summarize",
]

OVERALL = "overall"
"""The key of the all-categories figures."""


@dataclass
class QuestionRecord:
    """One question answered under one host, setting and budget.

    Attributes:
        question_id: the question's id.
        sample_id: the sample (conversation) it belongs to.
        category: its category label.
        host: the host's name.
        setting: ``"host"`` for the host alone, else a GRAVITY preset name.
        budget: the total token budget.
        evidence_recall: share of its evidence turns in the context (``None`` without evidence).
        covered: whether the gold answer's content words are in the context text
            (:func:`~gravity_core.eval.metrics.answer_covered`); ``None`` for a rubric answer,
            which coverage cannot grade (left out of the average).
        context_tokens: tokens of the whole context.
        anchor_tokens: tokens of GRAVITY's injection.
        passages: host passages in the context.
        prediction: the chat model's answer, when one ran.
        f1: LoCoMo token F1 of the prediction.
        correct: the judge's verdict.
    """

    question_id: str
    sample_id: str
    category: str
    host: str
    setting: str
    budget: int
    evidence_recall: float | None
    covered: bool | None
    context_tokens: int
    anchor_tokens: int
    passages: int
    prediction: str | None = None
    f1: float | None = None
    correct: bool | None = None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _figures(records: Sequence[QuestionRecord]) -> dict[str, Any]:
    recalls = [r.evidence_recall for r in records if r.evidence_recall is not None]
    judged = [r.correct for r in records if r.correct is not None]
    scored = [r.f1 for r in records if r.f1 is not None]
    return {
        "questions": len(records),
        "evidence_recall": _mean(recalls),
        "answer_coverage": _mean([1.0 if r.covered else 0.0 for r in records if r.covered is not None]),
        "context_tokens": _mean([float(r.context_tokens) for r in records]),
        "anchor_tokens": _mean([float(r.anchor_tokens) for r in records]),
        "accuracy": _mean([1.0 if c else 0.0 for c in judged]),
        "f1": _mean(scored),
        "judged": len(judged),
    }


def summarize(records: Iterable[QuestionRecord], categories: Sequence[str]) -> dict[str, Any]:
    """Figures per host, setting, budget and category (plus ``"overall"``).

    Returns:
        ``{host: {setting: {str(budget): {category: figures}}}}`` where figures hold the number of
        questions, mean evidence recall (over questions with evidence), answer coverage, mean context
        and anchor tokens, and, where a chat model ran, judge accuracy and token F1 (else ``None``).
        Categories come in the given order, then any others seen, then ``"overall"``.
    """
    groups: dict[tuple[str, str, int], list[QuestionRecord]] = defaultdict(list)
    for record in records:
        groups[(record.host, record.setting, record.budget)].append(record)
    summary: dict[str, Any] = {}
    for (host, setting, budget), group in groups.items():
        by_category: dict[str, list[QuestionRecord]] = defaultdict(list)
        for record in group:
            by_category[record.category].append(record)
        order = [c for c in categories if c in by_category] + sorted(set(by_category) - set(categories))
        cell = {category: _figures(by_category[category]) for category in order}
        cell[OVERALL] = _figures(group)
        summary.setdefault(host, {}).setdefault(setting, {})[str(budget)] = cell
    return summary


@dataclass
class Comparison:
    """A setting's judged answers against the host alone's, question by question.

    Attributes:
        host: the host.
        setting: the GRAVITY setting.
        budget: the budget.
        gains: questions the host alone got wrong and this setting right.
        losses: questions the host alone got right and this setting wrong.
        both_correct: questions both got right.
        both_wrong: questions both got wrong.
    """

    host: str
    setting: str
    budget: int
    gains: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)
    both_correct: int = 0
    both_wrong: int = 0


def compare(records: Iterable[QuestionRecord]) -> list[Comparison]:
    """Gains (wrong -> right) and losses (right -> wrong) of every judged setting against the host alone."""
    verdicts: dict[tuple[str, str, int], dict[str, bool]] = defaultdict(dict)
    for record in records:
        if record.correct is not None:
            verdicts[(record.host, record.setting, record.budget)][record.question_id] = record.correct
    comparisons: list[Comparison] = []
    for (host, setting, budget), judged in verdicts.items():
        baseline = verdicts.get((host, HOST_ALONE, budget))
        if setting == HOST_ALONE or baseline is None:
            continue
        comparison = Comparison(host, setting, budget)
        for question_id, correct in judged.items():
            before = baseline.get(question_id)
            if before is None:
                continue
            if correct and not before:
                comparison.gains.append(question_id)
            elif before and not correct:
                comparison.losses.append(question_id)
            elif correct:
                comparison.both_correct += 1
            else:
                comparison.both_wrong += 1
        comparisons.append(comparison)
    return comparisons


@dataclass
class GoalCheck:
    """The issue's target for host + GRAVITY, checked on answer coverage.

    Attributes:
        host: the host.
        setting: the GRAVITY setting checked (``"full"``).
        budget: the budget GRAVITY runs at (1,500).
        reference_budget: the budget of the host alone it must match (3,000).
        coverage: host + GRAVITY's answer coverage at ``budget``.
        reference_coverage: the host alone's at ``reference_budget``.
        temporal_gain: host + GRAVITY's temporal coverage minus the host alone's, both at ``budget``.
        required_temporal_gain: the gain asked for (0.20).
        met: whether both parts hold.
    """

    host: str
    setting: str
    budget: int
    reference_budget: int
    coverage: float
    reference_coverage: float
    temporal_gain: float | None
    required_temporal_gain: float
    met: bool


@dataclass
class EvalResults:
    """Everything a run produced.

    Attributes:
        benchmark: ``"locomo"`` or ``"longmemeval"``.
        config: the run's settings (JSON-ready).
        categories: the category labels in report order.
        records: every per-question record.
        summary: :func:`summarize` of the records.
        comparisons: :func:`compare` of the records.
        goals: the goal checks that the run's budgets allow.
        info: counts and timings (questions, samples, model calls, seconds).
    """

    benchmark: str
    config: dict[str, Any]
    categories: list[str]
    records: list[QuestionRecord]
    summary: dict[str, Any]
    comparisons: list[Comparison]
    goals: list[GoalCheck]
    info: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the figures first, then the records."""
        return {
            "benchmark": self.benchmark,
            "config": self.config,
            "categories": self.categories,
            "info": self.info,
            "goals": [asdict(goal) for goal in self.goals],
            "summary": self.summary,
            "comparisons": [asdict(c) for c in self.comparisons],
            "records": [asdict(r) for r in self.records],
        }


def check_goal(
    summary: dict[str, Any],
    host: str,
    *,
    setting: str = "full",
    budget: int = 1500,
    reference_budget: int = 3000,
    temporal: str = "temporal",
    required_temporal_gain: float = 0.20,
) -> GoalCheck | None:
    """The check of the issue's goal for host + GRAVITY at ``budget``.

    The goal: host + GRAVITY at ``budget`` covers as many answers as the host alone at
    ``reference_budget``, and temporal ones ``required_temporal_gain`` better than the host alone at
    ``budget``.

    Returns:
        The check, or ``None`` when the run lacks one of the figures it needs.
    """
    try:
        ours = summary[host][setting][str(budget)]
        alone = summary[host][HOST_ALONE][str(budget)]
        reference = summary[host][HOST_ALONE][str(reference_budget)]
    except KeyError:
        return None
    coverage, reference_coverage = ours[OVERALL]["answer_coverage"], reference[OVERALL]["answer_coverage"]
    if coverage is None or reference_coverage is None:
        return None
    gain = None
    if temporal in ours and temporal in alone:
        gain = ours[temporal]["answer_coverage"] - alone[temporal]["answer_coverage"]
    met = coverage >= reference_coverage and gain is not None and gain >= required_temporal_gain
    return GoalCheck(
        host,
        setting,
        budget,
        reference_budget,
        coverage,
        reference_coverage,
        gain,
        required_temporal_gain,
        met,
    )
