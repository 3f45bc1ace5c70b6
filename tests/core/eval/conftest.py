"""Shared pieces of the evaluation tests: the tiny fixtures and fake models."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from gravity_core.llm.base import Message
from gravity_core.testing import FakeChatModel

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _last(messages: Sequence[Message]) -> str:
    return messages[-1]["content"]


def anchors_answerer() -> FakeChatModel:
    """Answers "yes" when GRAVITY's anchors are in the context, "no" otherwise."""

    def answer(messages: Sequence[Message]) -> str:
        said = "yes" if "<gravity_anchors>" in _last(messages) else "no"
        return json.dumps({"answer": said})

    return FakeChatModel(answer, model_name="fake-answerer")


def yes_judge() -> FakeChatModel:
    """Judges an answer CORRECT exactly when it is "yes"."""

    def judge(messages: Sequence[Message]) -> str:
        answer = re.search(r"Answer to grade: (.*)", _last(messages))
        label = "CORRECT" if answer and answer.group(1).strip() == "yes" else "WRONG"
        return json.dumps({"reasoning": "compared", "label": label})

    return FakeChatModel(judge, model_name="fake-judge")


@pytest.fixture
def locomo_tiny() -> Path:
    return FIXTURES / "eval_locomo_tiny.json"


@pytest.fixture
def longmemeval_fixture() -> Path:
    return FIXTURES / "longmemeval_eval.json"
