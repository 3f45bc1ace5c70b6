"""``gravity eval`` on tiny fixtures: JSON, Markdown report and plots, for LoCoMo and LongMemEval."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gravity_core.cli.eval_cmd import make_eval_app
from gravity_core.context.policy import DEFAULT_POLICY
from gravity_core.errors import MissingDependencyError
from gravity_core.eval.plots import write_plots
from gravity_core.eval.report import markdown_report
from gravity_core.eval.results import EvalResults
from gravity_core.eval.settings import HOST_ALONE

FAST = ["--embedder", "hashing", "--budgets", "400,800", "--anchor-share", "0.6", "--quiet"]


def invoke(args: list[str]) -> str:
    result = CliRunner().invoke(make_eval_app(), args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_locomo_command_writes_json_report_and_plots(locomo_tiny: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "run"
    printed = invoke(["locomo", str(locomo_tiny), "-o", str(out), "--settings", "full,-expansion", *FAST])
    data = json.loads((out / "results.json").read_text())
    assert data["benchmark"] == "locomo" and data["info"]["questions"] == 6
    assert {r["setting"] for r in data["records"]} == {HOST_ALONE, "full", "-expansion"}
    assert set(data["summary"]["vector"][HOST_ALONE]) == {"400", "800"}
    report = (out / "report.md").read_text()
    assert "## Answer coverage: vector alone vs vector + GRAVITY (full)" in report
    assert "## Ablations: vector, 800 tokens" in report and "| -expansion |" in report
    plots = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert plots == [
        "vector_coverage_by_category.png",
        "vector_recall_by_category.png",
        "vector_vs_budget.png",
    ]
    assert all((out / "plots" / name).stat().st_size > 1000 for name in plots)
    assert "coverage" in printed and str(out / "report.md") in printed


def test_locomo_command_with_a_recorded_model(locomo_tiny: Path, tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(
        json.dumps(
            [
                {"match": ["AnswerResponse"], "answer": '{"answer": "red"}'},
                {"match": ["JudgeVerdict"], "answer": '{"reasoning": "r", "label": "CORRECT"}'},
            ]
        )
    )
    out = tmp_path / "run"
    args = ["locomo", str(locomo_tiny), "-o", str(out), "--settings", "full", "--limit", "2", "--no-plots"]
    invoke([*args, *FAST, "--model", f"recorded:{answers}", "--llm-budgets", "400"])
    data = json.loads((out / "results.json").read_text())
    judged = [r for r in data["records"] if r["correct"] is not None]
    assert len(judged) == 2 * 3 and all(r["correct"] for r in judged)  # 3 questions: 2 in t-1, 1 in t-2
    assert "LLM-judge accuracy" in (out / "report.md").read_text()
    assert data["info"]["model_calls"] > 0
    invoke([*args, *FAST, "--model", f"recorded:{answers}", "--llm-budgets", "400"])
    assert json.loads((out / "results.json").read_text())["info"]["model_calls"] == 0


def test_longmemeval_command(longmemeval_fixture: Path, tmp_path: Path) -> None:
    out = tmp_path / "lme"
    invoke(
        ["longmemeval", str(longmemeval_fixture), "-o", str(out), "--settings", "full", "--no-plots", *FAST]
    )
    data = json.loads((out / "results.json").read_text())
    assert data["categories"] == ["single-session-user", "temporal-reasoning", "knowledge-update"]
    cell = data["summary"]["vector"][HOST_ALONE]["800"]
    assert cell["overall"]["questions"] == 3 and cell["overall"]["evidence_recall"] == 1.0


def test_a_rubric_answer_is_left_out_of_answer_coverage(longmemeval_fixture: Path, tmp_path: Path) -> None:
    data = json.loads(longmemeval_fixture.read_text(encoding="utf-8"))
    data[0]["question_type"] = "single-session-preference"
    changed = tmp_path / "lme.json"
    changed.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "lme"
    invoke(["longmemeval", str(changed), "-o", str(out), "--settings", "full", "--no-plots", *FAST])
    results = json.loads((out / "results.json").read_text())
    rubric = [r for r in results["records"] if r["category"] == "single-session-preference"]
    assert rubric and all(r["covered"] is None for r in rubric)
    assert all(r["covered"] is not None for r in results["records"] if r not in rubric)
    cell = results["summary"]["vector"][HOST_ALONE]["800"]
    assert cell["single-session-preference"]["answer_coverage"] is None
    assert cell["single-session-preference"]["evidence_recall"] is not None
    others = [r for r in results["records"] if r["setting"] == HOST_ALONE and r["budget"] == 800]
    graded = [r["covered"] for r in others if r["covered"] is not None]
    assert cell["overall"]["answer_coverage"] == sum(graded) / len(graded)


def test_bad_options_fail_with_a_configuration_error(locomo_tiny: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(make_eval_app(), ["locomo", str(locomo_tiny), "--budgets", "800,x", "-q"])
    assert result.exit_code != 0 and "token counts" in str(result.exception)


def test_missing_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    results = EvalResults("locomo", {"budgets": [800], "settings": []}, [], [], {}, [], [], {"hosts": []})
    assert "# GRAVITY evaluation: locomo" in markdown_report(
        EvalResults(
            "locomo",
            {
                "budgets": [800],
                "settings": [],
                "llm_budgets": [],
                "policy": dataclasses.asdict(DEFAULT_POLICY),
            },
            [],
            [],
            {},
            [],
            [],
            {
                "hosts": [],
                "questions": 0,
                "samples": 0,
                "extractor": "x",
                "embedder": "y",
                "offline_seconds": 0,
            },
        )
    )
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(MissingDependencyError, match=r"gravity-memory\[eval\]"):
        write_plots(results, tmp_path / "plots")
    assert not (tmp_path / "plots").exists()


def test_provenance_options_reach_the_policy_and_the_report(locomo_tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["locomo", str(locomo_tiny), "-o", str(out), "--settings", "sources", "--no-plots", *FAST]
    bounds = ["--source-turn-share", "0.3", "--sources-share", "0.75"]
    invoke(
        [*args, "--source-kinds", "event,topic", "--sources-per-anchor", "1", "--source-lead", "0", *bounds]
    )
    data = json.loads((out / "results.json").read_text())
    policy = data["config"]["policy"]
    assert (policy["source_kinds"], policy["sources_per_anchor"], policy["source_lead"]) == (
        ["event", "topic"],
        1,
        0,
    )
    assert (policy["max_source_turn_share"], policy["max_sources_share"]) == (0.3, 0.75)
    report = (out / "report.md").read_text()
    assert "up to 1 source turns of each selected event/topic anchor" in report
    assert "each within 30% and all within 75% of the memories' tokens" in report
    bad = CliRunner().invoke(make_eval_app(), [*args, "--source-kinds", "events"])
    assert bad.exit_code != 0 and "--source-kinds takes entity, event, topic" in str(bad.exception)
    zero = CliRunner().invoke(make_eval_app(), [*args, "--sources-share", "0"])
    assert zero.exit_code != 0 and "0 < max_sources_share <= 1" in str(zero.exception)


def test_the_cap_on_the_anchors_part_reaches_the_policy_and_the_report(
    locomo_tiny: Path, tmp_path: Path
) -> None:
    args = ["locomo", str(locomo_tiny), "--settings", "full", "--no-plots", *FAST]
    invoke([*args, "-o", str(tmp_path / "capped"), "--max-anchor-tokens", "120"])
    data = json.loads((tmp_path / "capped" / "results.json").read_text())
    assert data["config"]["policy"]["max_anchor_tokens"] == 120
    assert "at most 120 tokens and the preset's budget" in (tmp_path / "capped" / "report.md").read_text()
    invoke([*args, "-o", str(tmp_path / "uncapped"), "--max-anchor-tokens", "0"])
    data = json.loads((tmp_path / "uncapped" / "results.json").read_text())
    assert data["config"]["policy"]["max_anchor_tokens"] is None
    assert "capped by the preset" in (tmp_path / "uncapped" / "report.md").read_text()
