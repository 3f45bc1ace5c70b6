"""The LLM path with fakes: answering, judging, re-asking, and the response cache (a rerun makes no call)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

from gravity_core.eval.grading import Grader
from gravity_core.prompts.eval import build_answer_messages, build_judge_messages
from gravity_core.testing import FakeChatModel, RecordedModel

ANSWER = json.dumps({"answer": "red"})
CORRECT = json.dumps({"reasoning": "same colour", "label": "CORRECT"})


def recorded() -> RecordedModel:
    # Every prompt embeds its response model's schema, so the class name selects the task.
    return RecordedModel({"AnswerResponse": ANSWER, "JudgeVerdict": CORRECT}, model_name="recorded-eval")


def test_answer_prompt_carries_context_question_and_date() -> None:
    messages = build_answer_messages(
        "What colour?", "[1:00 pm on 1 May, 2023] Anna: red", question_date=date(2023, 5, 2)
    )
    user = messages[-1]["content"]
    assert "Anna: red" in user and "What colour?" in user and "2 May 2023" in user
    assert "asked on" not in build_answer_messages("q", "c")[-1]["content"]


def test_judge_prompt_is_lenient_on_wording_and_dates() -> None:
    user = build_judge_messages("When?", "7 May 2023", "May 7th")[-1]["content"]
    assert "Gold answer: 7 May 2023" in user and "Answer to grade: May 7th" in user
    assert "any format" in user and "longer" in user


def test_grade_answers_then_judges(tmp_path: Path) -> None:
    model = recorded()
    grade = Grader(model, cache_dir=tmp_path).grade("What colour is the bike?", "red", "Anna: a red bike")
    assert grade.prediction == "red" and grade.correct is True
    assert len(model.calls) == 2


def test_a_second_grader_on_the_same_cache_makes_no_call(tmp_path: Path) -> None:
    Grader(recorded(), cache_dir=tmp_path).grade("What colour?", "red", "ctx")
    again_model = recorded()
    again = Grader(again_model, cache_dir=tmp_path)
    assert again.grade("What colour?", "red", "ctx").correct is True
    assert again_model.calls == [] and again.calls == 0 and again.hits == 2


def test_separate_judge_model(tmp_path: Path) -> None:
    answerer = FakeChatModel([ANSWER], model_name="a")
    judge = FakeChatModel([json.dumps({"reasoning": "no", "label": "WRONG"})], model_name="j")
    grade = Grader(answerer, judge, cache_dir=tmp_path).grade("q", "blue", "ctx")
    assert grade.correct is False and len(answerer.calls) == 1 and len(judge.calls) == 1


def test_bad_json_is_reasked(tmp_path: Path) -> None:
    model = FakeChatModel(["the bike is red", ANSWER, CORRECT])
    grade = Grader(model, cache_dir=tmp_path).grade("q", "red", "ctx")
    assert grade.prediction == "red" and grade.correct is True
    assert "could not be used" in model.calls[1][-1]["content"]


def test_no_usable_answer_counts_wrong_without_asking_the_judge(tmp_path: Path) -> None:
    model = FakeChatModel(["nope", "still nope"])
    grade = Grader(model, cache_dir=tmp_path, max_attempts=2).grade("q", "red", "ctx")
    assert grade.prediction == "" and grade.correct is False
    assert len(model.calls) == 2
