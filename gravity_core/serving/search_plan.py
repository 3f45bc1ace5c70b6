"""Which searches a question's retrieval runs on the host, and which vectors it already has.

Both integrations' retrievers run the same plan: ask GRAVITY (through an answer cache) for the
question's expansions, keep those whose hits the context policy can place, reuse every vector that
is already known (the question's own when the host embeds with GRAVITY's model, the vectors the
build stored for expansions) and embed only the rest, in one request.

The plan is written once, as a generator that yields what it needs (:class:`EmbedQuestion`,
:class:`AskGravity`, :class:`EmbedTexts`) and receives the answers; :func:`run_plan` and
:func:`arun_plan` drive it with a framework's sync or async calls. So sync and async retrieval in
LangChain and LlamaIndex all plan the same searches.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gravity_core.context.policy import ContextPolicy
from gravity_core.query.types import AnchorContext

__all__ = [
    "AskGravity",
    "EmbedQuestion",
    "EmbedTexts",
    "PlanSteps",
    "SearchPlan",
    "arun_plan",
    "distinct_queries",
    "merge_queries",
    "plan_searches",
    "run_plan",
]

Vector = list[float]


@dataclass(frozen=True)
class EmbedQuestion:
    """Embed the question as a query (the answer: its vector)."""

    text: str


@dataclass(frozen=True)
class AskGravity:
    """Ask GRAVITY about the question (the answer: an :class:`AnchorContext`).

    ``vector`` is the question's vector by the engine's own model, when the host's model is it.
    """

    vector: Vector | None


@dataclass(frozen=True)
class EmbedTexts:
    """Embed these texts, in order, in one request if the model allows (the answer: their vectors)."""

    texts: list[str]


Step = EmbedQuestion | AskGravity | EmbedTexts
PlanSteps = Generator[Step, Any, "SearchPlan"]


@dataclass(frozen=True)
class SearchPlan:
    """The searches of one question: the question first, then the expansions to search.

    Attributes:
        context: GRAVITY's answer (``None`` when the expansions were given, e.g. by a query transform).
        queries: the question, then the expansions worth searching, in order.
        vectors: one vector per query, or ``None`` when the host embeds the queries itself.
        skipped: expansions made but not searched, because the policy cannot place their hits.
        embedded: the texts embedded for this plan, in order (the others' vectors were given or stored).
    """

    context: AnchorContext | None
    queries: list[str]
    vectors: list[Vector] | None = None
    skipped: int = 0
    embedded: list[str] = field(default_factory=list)

    @property
    def question(self) -> str:
        """The question (the first query)."""
        return self.queries[0]

    @property
    def expansions(self) -> list[str]:
        """The expansions to search, in order."""
        return self.queries[1:]


def merge_queries(*groups: Sequence[str]) -> list[str]:
    """The strings of ``groups`` in order, without blanks and case-insensitive repeats."""
    seen: set[str] = set()
    merged: list[str] = []
    for group in groups:
        for text in group:
            key = " ".join(text.split()).casefold()
            if key and key not in seen:
                seen.add(key)
                merged.append(text)
    return merged


def distinct_queries(question: str, expansions: Sequence[str]) -> list[str]:
    """The expansions without blanks, without the question and without case-insensitive repeats."""
    merged = merge_queries([question], expansions)
    return merged[1:] if question.strip() else merged


def plan_searches(
    question: str,
    *,
    policy: ContextPolicy,
    top_n: int,
    fetch: int | None,
    embeds: bool,
    shares_model: bool,
    stored: Callable[[list[str]], Sequence[np.ndarray | None]],
    question_vector: Sequence[float] | None = None,
    given_expansions: Sequence[str] | None = None,
) -> PlanSteps:
    """The steps that plan the searches of ``question``; drive them with :func:`run_plan`.

    Args:
        question: the user's question.
        policy: the context policy that merges the searches' hits.
        top_n: how many merged results the retrieval returns.
        fetch: how many hits each search brings back (``None``: unknown, e.g. a retriever with its
            own settings); with ``fetch >= top_n`` within the policy's lead, the expansions cannot
            take a place and are not searched.
        embeds: whether the integration embeds the queries (``False``: the host searches by text).
        shares_model: whether the host embeds with the engine's own model, so the question's vector
            also serves GRAVITY and the build's stored expansion vectors serve the host.
        stored: the vectors the build stored for these expansions (``None`` for one it did not).
        question_vector: the question's vector, when the caller already has it.
        given_expansions: expansions made already (GRAVITY is then not asked).
    """
    vector = list(question_vector) if question_vector is not None else None
    context: AnchorContext | None = None
    embedded: list[str] = []
    if given_expansions is None:
        if embeds and shares_model and vector is None:
            vector = list((yield EmbedQuestion(question)))
            embedded.append(question)
        context = yield AskGravity(vector if shares_model else None)
        made = distinct_queries(question, context.expansions)
    else:
        made = distinct_queries(question, given_expansions)
    expansions = made if policy.places_expansions(top_n, fetch) else []
    queries = [question, *expansions]
    skipped = len(made) - len(expansions)
    if not embeds:
        return SearchPlan(context, queries, None, skipped=skipped)
    known: list[Vector | None] = [vector]
    if shares_model and expansions:
        known += [None if v is None else v.tolist() for v in stored(expansions)]
    else:
        known += [None] * len(expansions)
    missing = [text for text, v in zip(queries, known, strict=True) if v is None]
    fresh = iter((yield EmbedTexts(missing)) if missing else [])
    vectors = [list(next(fresh)) if v is None else v for v in known]
    return SearchPlan(context, queries, vectors, skipped, embedded + missing)


def run_plan(
    steps: PlanSteps,
    *,
    embed_question: Callable[[str], Sequence[float]],
    ask: Callable[[Vector | None], AnchorContext],
    embed_texts: Callable[[list[str]], Sequence[Sequence[float]]],
) -> SearchPlan:
    """Run the planning ``steps`` with sync calls; returns the plan."""
    try:
        step = next(steps)
        while True:
            if isinstance(step, EmbedQuestion):
                step = steps.send(embed_question(step.text))
            elif isinstance(step, AskGravity):
                step = steps.send(ask(step.vector))
            else:
                step = steps.send(embed_texts(step.texts))
    except StopIteration as done:
        plan: SearchPlan = done.value
        return plan


async def arun_plan(
    steps: PlanSteps,
    *,
    embed_question: Callable[[str], Awaitable[Sequence[float]]],
    ask: Callable[[Vector | None], Awaitable[AnchorContext]],
    embed_texts: Callable[[list[str]], Awaitable[Sequence[Sequence[float]]]],
) -> SearchPlan:
    """Run the planning ``steps`` with async calls; returns the plan."""
    try:
        step = next(steps)
        while True:
            if isinstance(step, EmbedQuestion):
                step = steps.send(await embed_question(step.text))
            elif isinstance(step, AskGravity):
                step = steps.send(await ask(step.vector))
            else:
                step = steps.send(await embed_texts(step.texts))
    except StopIteration as done:
        plan: SearchPlan = done.value
        return plan
