"""Benchmark questions: LoCoMo QA with evidence ids, and LongMemEval on a fixture in its documented schema."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from gravity_core.errors import InputDataError
from gravity_core.eval.datasets import load_locomo_eval, load_longmemeval_eval, normalize_evidence

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LOCOMO = FIXTURES / "eval_locomo_tiny.json"
LONGMEMEVAL = FIXTURES / "longmemeval_eval.json"


def test_locomo_questions_skip_adversarial_and_keep_categories() -> None:
    samples = load_locomo_eval(LOCOMO)
    assert [s.id for s in samples] == ["t-1", "t-2"]
    first = samples[0]
    assert [q.category for q in first.questions] == [
        "single-hop",
        "temporal",
        "multi-hop",
        "open-domain",
        "single-hop",
    ]
    assert first.categories == ("multi-hop", "temporal", "open-domain", "single-hop")
    assert first.questions[0].id == "t-1/q1"
    assert first.questions[-1].id == "t-1/q6"  # numbering follows the file, q5 (adversarial) skipped
    assert len(first.utterances) == 12 and first.utterances[0].id == "D1:1"


def test_locomo_answers_become_text() -> None:
    (choir,) = load_locomo_eval(LOCOMO, samples=["t-2"])[0].questions
    assert choir.answer == "2022"


def test_locomo_evidence_is_cleaned_and_checked() -> None:
    questions = {q.id: q for q in load_locomo_eval(LOCOMO)[0].questions}
    assert questions["t-1/q3"].evidence == ("D1:2", "D1:3")  # "D1:2; D1:3" split
    assert questions["t-1/q4"].evidence == ("D2:1",)  # "D:2:01" repaired
    assert questions["t-1/q6"].evidence == ("D3:2",)  # "D9:9" names no turn


def test_normalize_evidence_drops_bare_and_unknown_ids() -> None:
    assert normalize_evidence(["D", "D1:1", "D1:1", "X7"], {"D1:1"}) == ("D1:1",)


def test_locomo_unknown_sample_is_an_input_error() -> None:
    with pytest.raises(InputDataError, match="t-9"):
        load_locomo_eval(LOCOMO, samples=["t-9"])


def test_longmemeval_evidence_is_the_has_answer_turns() -> None:
    samples = {s.id: s for s in load_longmemeval_eval(LONGMEMEVAL)}
    assert set(samples) == {"lme_001", "lme_002", "lme_003"}  # the abstention question is left out
    dog = samples["lme_001"].questions[0]
    assert dog.evidence == ("answer_dog:1",)
    assert dog.category == "single-session-user"
    assert dog.question_date == date(2023, 6, 1)
    assert dog.evidence[0] in {u.id for u in samples["lme_001"].utterances}
    assert samples["lme_002"].questions[0].evidence == ("answer_suit:1", "answer_wedding:1")


def test_longmemeval_without_marks_falls_back_to_the_answer_sessions() -> None:
    job = load_longmemeval_eval(LONGMEMEVAL, question_ids=["lme_003"])[0].questions[0]
    assert job.evidence == ("answer_job_new:1", "answer_job_new:2")


def test_longmemeval_categories_and_abstention() -> None:
    samples = load_longmemeval_eval(LONGMEMEVAL, include_abstention=True)
    assert [s.id for s in samples][-1] == "lme_004_abs"
    assert samples[0].categories == ("single-session-user", "temporal-reasoning", "knowledge-update")
    assert samples[-1].questions[0].evidence == ()


def test_longmemeval_preference_answers_are_rubrics(tmp_path: Path) -> None:
    data = json.loads(LONGMEMEVAL.read_text(encoding="utf-8"))
    data[0]["question_type"] = "single-session-preference"
    data[0]["answer"] = "The user would prefer suggestions that suit a small dog."
    changed = tmp_path / "lme.json"
    changed.write_text(json.dumps(data), encoding="utf-8")
    samples = {s.id: s.questions[0] for s in load_longmemeval_eval(changed)}
    assert samples["lme_001"].rubric
    assert not samples["lme_002"].rubric
    assert not any(q.rubric for s in load_longmemeval_eval(LONGMEMEVAL) for q in s.questions)
