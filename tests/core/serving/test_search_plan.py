"""The search plan: which queries a retrieval searches, which vectors it reuses, what it embeds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from gravity_core.context.policy import DEFAULT_POLICY, EXPANDING_POLICY, ContextPolicy
from gravity_core.query.types import AnchorContext
from gravity_core.serving.search_plan import (
    AskGravity,
    EmbedQuestion,
    EmbedTexts,
    PlanSteps,
    SearchPlan,
    arun_plan,
    distinct_queries,
    plan_searches,
    run_plan,
)

QUESTION = "Where does Maya work?"
EXPANSIONS = ["Maya Kiln House", "maya  kiln house", "", "where does maya work?", "Maya Theo"]
EARLY = ContextPolicy(lead=1, every=2)


def _vector(text: str) -> list[float]:
    return [float(len(text)), 1.0]


def _stored(known: dict[str, list[float]]):  # type: ignore[no-untyped-def]
    def stored(texts: list[str]) -> Sequence[np.ndarray | None]:
        return [np.asarray(known[t]) if t in known else None for t in texts]

    return stored


def _drive(steps: PlanSteps, log: list[object]) -> SearchPlan:
    def embed_question(text: str) -> list[float]:
        log.append(EmbedQuestion(text))
        return _vector(text)

    def ask(vector: list[float] | None) -> AnchorContext:
        log.append(AskGravity(vector))
        return AnchorContext(QUESTION, expansions=list(EXPANSIONS))

    def embed_texts(texts: list[str]) -> list[list[float]]:
        log.append(EmbedTexts(texts))
        return [_vector(t) for t in texts]

    return run_plan(steps, embed_question=embed_question, ask=ask, embed_texts=embed_texts)


def test_distinct_queries_drop_blanks_repeats_and_the_question() -> None:
    assert distinct_queries(QUESTION, EXPANSIONS) == ["Maya Kiln House", "Maya Theo"]


def test_a_shared_model_embeds_the_question_once_reuses_stored_vectors_and_batches_the_rest() -> None:
    log: list[object] = []
    stored = {"Maya Theo": [9.0, 9.0]}
    plan = _drive(
        plan_searches(
            QUESTION, policy=EARLY, top_n=6, fetch=6, embeds=True, shares_model=True, stored=_stored(stored)
        ),
        log,
    )
    assert log == [
        EmbedQuestion(QUESTION),
        AskGravity(_vector(QUESTION)),  # the engine gets the question's vector
        EmbedTexts(["Maya Kiln House"]),  # only what is not known, in one request
    ]
    assert plan.queries == [QUESTION, "Maya Kiln House", "Maya Theo"]
    assert plan.vectors == [_vector(QUESTION), _vector("Maya Kiln House"), [9.0, 9.0]]
    assert (plan.skipped, plan.embedded) == (0, [QUESTION, "Maya Kiln House"])


def test_another_model_embeds_every_query_in_one_request_and_the_engine_embeds_its_own() -> None:
    log: list[object] = []
    stored = {"Maya Theo": [9.0, 9.0]}  # the build's vectors are of another model: not used
    plan = _drive(
        plan_searches(
            QUESTION, policy=EARLY, top_n=6, fetch=6, embeds=True, shares_model=False, stored=_stored(stored)
        ),
        log,
    )
    assert log == [AskGravity(None), EmbedTexts([QUESTION, "Maya Kiln House", "Maya Theo"])]
    assert plan.vectors == [_vector(t) for t in plan.queries]


def test_expansions_the_policy_cannot_place_are_neither_embedded_nor_searched() -> None:
    log: list[object] = []
    steps = plan_searches(
        QUESTION,
        policy=EXPANDING_POLICY,
        top_n=10,
        fetch=10,
        embeds=True,
        shares_model=True,
        stored=_stored({}),
    )
    plan = _drive(steps, log)
    assert plan.queries == [QUESTION] and plan.skipped == 2
    assert log == [EmbedQuestion(QUESTION), AskGravity(_vector(QUESTION))]
    # Fewer hits per search than places, or an unknown fetch: the expansions may place theirs.
    for fetch in (4, None):
        steps = plan_searches(
            QUESTION,
            policy=EXPANDING_POLICY,
            top_n=10,
            fetch=fetch,
            embeds=False,
            shares_model=False,
            stored=_stored({}),
        )
        assert _drive(steps, []).expansions == ["Maya Kiln House", "Maya Theo"]
    no_expansions = ContextPolicy(every=0)
    steps = plan_searches(
        QUESTION,
        policy=no_expansions,
        top_n=50,
        fetch=1,
        embeds=False,
        shares_model=False,
        stored=_stored({}),
    )
    assert _drive(steps, []).queries == [QUESTION]


def test_the_default_policy_neither_embeds_nor_searches_expansions() -> None:
    # The engine still makes them (GRAVITY is asked once); the shipped policy places none, whatever
    # the host fetches and however many results are asked for.
    assert DEFAULT_POLICY.every == 0 and EXPANDING_POLICY.every == 1
    assert replace(EXPANDING_POLICY, every=0) == DEFAULT_POLICY  # the paper's path differs in that only
    for shares_model in (True, False):
        for top_n, fetch in ((4, 4), (10, None), (50, 1)):
            log: list[object] = []
            steps = plan_searches(
                QUESTION,
                policy=DEFAULT_POLICY,
                top_n=top_n,
                fetch=fetch,
                embeds=True,
                shares_model=shares_model,
                stored=_stored({"Maya Theo": [9.0, 9.0]}),
            )
            plan = _drive(steps, log)
            assert plan.queries == [QUESTION] and plan.expansions == [] and plan.skipped == 2
            assert plan.embedded == [QUESTION] and plan.vectors == [_vector(QUESTION)]
            if shares_model:
                assert log == [EmbedQuestion(QUESTION), AskGravity(_vector(QUESTION))]
            else:
                assert log == [AskGravity(None), EmbedTexts([QUESTION])]


def test_given_vectors_and_expansions_skip_the_engine_and_the_question_embedding() -> None:
    log: list[object] = []
    steps = plan_searches(
        QUESTION,
        policy=EARLY,
        top_n=6,
        fetch=None,
        embeds=True,
        shares_model=True,
        stored=_stored({}),
        question_vector=[1.0, 2.0],
        given_expansions=["Maya Theo", QUESTION.upper()],
    )
    plan = _drive(steps, log)
    assert plan.context is None and log == [EmbedTexts(["Maya Theo"])]
    assert plan.vectors == [[1.0, 2.0], _vector("Maya Theo")]


def test_without_a_model_nothing_is_embedded() -> None:
    log: list[object] = []
    steps = plan_searches(
        QUESTION, policy=EARLY, top_n=6, fetch=6, embeds=False, shares_model=True, stored=_stored({})
    )
    plan = _drive(steps, log)
    assert log == [AskGravity(None)] and plan.vectors is None
    assert plan.expansions == ["Maya Kiln House", "Maya Theo"]


async def test_the_async_driver_plans_what_the_sync_one_does() -> None:
    def steps() -> PlanSteps:
        return plan_searches(
            QUESTION,
            policy=EARLY,
            top_n=6,
            fetch=6,
            embeds=True,
            shares_model=True,
            stored=_stored({"Maya Theo": [9.0, 9.0]}),
        )

    async def embed_question(text: str) -> list[float]:
        return _vector(text)

    async def ask(vector: list[float] | None) -> AnchorContext:
        return AnchorContext(QUESTION, expansions=list(EXPANSIONS))

    async def embed_texts(texts: list[str]) -> list[list[float]]:
        return [_vector(t) for t in texts]

    plan = await arun_plan(steps(), embed_question=embed_question, ask=ask, embed_texts=embed_texts)
    assert plan == _drive(steps(), [])
