"""Prompts of the evaluation harness: answering a question from a context, and judging the answer.

The judge is lenient in the way memory-system papers judge LoCoMo: an answer is CORRECT when it
states the same fact as the gold answer, however worded, even when it is longer or adds detail,
and a date counts in any format. Both prompts ask for one JSON object (see the response models).
"""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import BaseModel, Field

from gravity_core.llm.base import Message
from gravity_core.prompts.context import render_schema, system_user

__all__ = [
    "ANSWER_SYSTEM",
    "ANSWER_USER",
    "JUDGE_SYSTEM",
    "JUDGE_USER",
    "AnswerResponse",
    "JudgeVerdict",
    "build_answer_messages",
    "build_judge_messages",
]


class AnswerResponse(BaseModel):
    """Answer of the answering task."""

    answer: str = Field(
        description="The answer to the question, as short as possible (a few words or one sentence)."
    )


class JudgeVerdict(BaseModel):
    """Answer of the judging task."""

    reasoning: str = Field(description="One sentence on whether the answer states the gold answer's fact.")
    label: Literal["CORRECT", "WRONG"] = Field(description="CORRECT or WRONG.")


ANSWER_SYSTEM = (
    "You answer questions about a long conversation between people, using only the memories "
    "retrieved from it. You answer with one JSON object and nothing else."
)

ANSWER_USER = """\
<CONTEXT>
{context}
</CONTEXT>

Each retrieved memory starts with the date of its session in square brackets. {date_line}\
Answer the question below from the context only:
- Resolve relative times ("last year", "two days ago") against the date of the memory that says \
them, and give an absolute date, month or year.
- Keep the answer short: the fact asked for, in a few words.
- If the context does not say, give your best guess from what it does say.

Question: {question}

Answer with a JSON object that follows this JSON schema:
{schema}"""

JUDGE_SYSTEM = (
    "You grade answers to questions about a conversation against a gold answer. You are lenient "
    "about wording and strict about facts. You answer with one JSON object and nothing else."
)

JUDGE_USER = """\
Question: {question}
Gold answer: {gold}
Answer to grade: {answer}

Label the answer CORRECT when it states the same fact as the gold answer:
- Wording does not matter: a paraphrase, a synonym or a longer answer with extra detail is CORRECT \
as long as it contains the gold fact and does not contradict it.
- A date or time counts in any format ("7 May 2023", "May 7th", "2023-05-07"); a relative time \
that names the same period as the gold answer is CORRECT.
- For a list, the answer must name the gold items (in any order); missing most of them is WRONG.
Label it WRONG when it gives another fact, says the information is unknown, or contradicts the gold answer.

Answer with a JSON object that follows this JSON schema:
{schema}"""


def build_answer_messages(question: str, context: str, *, question_date: date | None = None) -> list[Message]:
    """Messages asking a model to answer ``question`` from ``context``.

    Args:
        question: the question.
        context: the retrieved memories, and GRAVITY's injection when it runs.
        question_date: the day the question is asked, when known (for "last week" questions).

    Returns:
        A system and a user message; the answer fills :class:`AnswerResponse`.
    """
    date_line = (
        f"The question is asked on {question_date.day} {question_date:%B %Y}. " if question_date else ""
    )
    user = ANSWER_USER.format(
        context=context,
        date_line=date_line,
        question=question,
        schema=render_schema(AnswerResponse),
    )
    return system_user(ANSWER_SYSTEM, user)


def build_judge_messages(question: str, gold: str, answer: str) -> list[Message]:
    """Messages asking a model to grade ``answer`` against ``gold``.

    Returns:
        A system and a user message; the answer fills :class:`JudgeVerdict`.
    """
    user = JUDGE_USER.format(question=question, gold=gold, answer=answer, schema=render_schema(JudgeVerdict))
    return system_user(JUDGE_SYSTEM, user)
