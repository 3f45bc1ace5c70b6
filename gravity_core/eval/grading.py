"""Answering questions from a context with a chat model, and judging the answers, through a disk cache."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import date

from gravity_core.errors import UnexpectedModelOutput
from gravity_core.llm.base import ChatModel
from gravity_core.llm.cache import CachedModel, ResponseCache
from gravity_core.llm.json_call import call_json
from gravity_core.prompts.eval import (
    AnswerResponse,
    JudgeVerdict,
    build_answer_messages,
    build_judge_messages,
)

__all__ = ["Grade", "Grader"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Grade:
    """One answered and judged question.

    Attributes:
        prediction: the model's answer (``""`` when it gave no usable answer).
        correct: the judge's verdict (``None`` when the judge gave no usable verdict).
    """

    prediction: str
    correct: bool | None


class Grader:
    """Answers from a context and judges the answer; every request goes through a response cache.

    A rerun with the same cache folder makes no new model call for what it already asked, so an
    interrupted run resumes where it stopped and a finished one repeats for free.

    Args:
        answerer: the chat model that answers.
        judge: the chat model that judges (default: the answerer).
        cache_dir: the response cache folder.
        max_attempts: requests per answer at most (re-asks on output that is not the expected JSON).
    """

    def __init__(
        self,
        answerer: ChatModel,
        judge: ChatModel | None = None,
        *,
        cache_dir: str | os.PathLike[str],
        max_attempts: int = 3,
    ) -> None:
        cache = ResponseCache(cache_dir)
        self.answerer = CachedModel(answerer, cache)
        self.judge = CachedModel(judge or answerer, cache)
        self.max_attempts = max_attempts

    @property
    def calls(self) -> int:
        """Requests that reached the models (not answered by the cache)."""
        return self.answerer.calls + self.judge.calls

    @property
    def hits(self) -> int:
        """Requests the cache answered."""
        return self.answerer.hits + self.judge.hits

    def answer(self, question: str, context: str, *, question_date: date | None = None) -> str:
        """The answerer's answer to ``question`` from ``context`` (``""`` if it never gave valid JSON)."""
        messages = build_answer_messages(question, context, question_date=question_date)
        try:
            parsed, _ = call_json(self.answerer, messages, AnswerResponse, max_attempts=self.max_attempts)
        except UnexpectedModelOutput as exc:
            logger.warning("no usable answer to %r: %s", question, exc)
            return ""
        return parsed.answer.strip()

    def verdict(self, question: str, gold: str, prediction: str) -> bool | None:
        """Whether the judge labels ``prediction`` CORRECT (an empty prediction is WRONG without asking)."""
        if not prediction:
            return False
        messages = build_judge_messages(question, gold, prediction)
        try:
            parsed, _ = call_json(self.judge, messages, JudgeVerdict, max_attempts=self.max_attempts)
        except UnexpectedModelOutput as exc:
            logger.warning("no usable verdict on %r: %s", question, exc)
            return None
        return parsed.label == "CORRECT"

    def grade(self, question: str, gold: str, context: str, *, question_date: date | None = None) -> Grade:
        """Answer, then judge."""
        prediction = self.answer(question, context, question_date=question_date)
        return Grade(prediction, self.verdict(question, gold, prediction))
