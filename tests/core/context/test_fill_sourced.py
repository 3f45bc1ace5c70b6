"""Filling a budget when some memories are turns fetched by provenance (ContextPolicy.fill)."""

from __future__ import annotations

import random

import pytest

from gravity_core.context.policy import ContextPolicy, placement_of
from gravity_core.context.window import Placement, fill_budget

# Item name -> tokens. q* are the question's hits (q1 its first), s* turns fetched by provenance.
TOKENS = {"q1": 10, "q2": 10, "q3": 10, "q4": 10, "q5": 10, "s1": 10, "s2": 10, "long": 30}


def fill(policy: ContextPolicy, ranking: list[str], budget: int, places: dict[str, Placement]) -> list[str]:
    return policy.fill(ranking, budget, TOKENS.__getitem__, lambda item: places[item])


def question_places(*items: str) -> dict[str, Placement]:
    return {item: Placement(question_rank=int(item[1:])) for item in items}


def test_short_fetched_turns_keep_their_source_places() -> None:
    policy = ContextPolicy(max_source_turn_share=0.2, max_sources_share=0.5)
    places = {
        **question_places("q1", "q2", "q3"),
        "s1": Placement(fetched=True),
        "s2": Placement(fetched=True),
    }
    ranking = ["q1", "s1", "q2", "s2", "q3"]
    assert fill(policy, ranking, 50, places) == ranking


def test_a_fetched_turn_too_long_for_one_turn_goes_back_to_its_rank_in_the_question_results() -> None:
    # 30 tokens is over 0.2 of 100: "long" loses its source place; the question's search ranked it
    # 4th, so it comes just before q5.
    policy = ContextPolicy(max_source_turn_share=0.2, max_sources_share=1.0)
    places = {**question_places("q1", "q2", "q3", "q5"), "long": Placement(fetched=True, question_rank=4)}
    assert fill(policy, ["q1", "long", "q2", "q3", "q5"], 100, places) == ["q1", "q2", "q3", "long", "q5"]
    # With room for all but one, the turn the host ranked last is the one left out.
    assert fill(policy, ["q1", "long", "q2", "q3", "q5"], 60, places) == ["q1", "q2", "q3", "long"]


def test_a_fetched_turn_the_question_did_not_find_leaves_when_over_a_bound() -> None:
    policy = ContextPolicy(max_source_turn_share=0.2, max_sources_share=1.0)
    places = {**question_places("q1", "q2", "q3"), "long": Placement(fetched=True)}
    assert fill(policy, ["q1", "long", "q2", "q3"], 100, places) == ["q1", "q2", "q3"]


def test_the_fetched_turns_together_take_at_most_their_share() -> None:
    # Half of 40 tokens: two fetched turns of 10 fit, the third goes back to its question rank (5).
    policy = ContextPolicy(max_source_turn_share=1.0, max_sources_share=0.5)
    tokens = {**TOKENS, "s3": 10}
    places = {
        **question_places("q1", "q2"),
        "s1": Placement(fetched=True),
        "s2": Placement(fetched=True),
        "s3": Placement(fetched=True, question_rank=5),
    }
    kept = policy.fill(["q1", "s1", "s2", "s3", "q2"], 40, tokens.__getitem__, lambda item: places[item])
    assert kept == ["q1", "s1", "s2", "q2"]
    kept = policy.fill(["q1", "s1", "s2", "s3", "q2"], 50, tokens.__getitem__, lambda item: places[item])
    assert kept == ["q1", "s1", "s2", "q2", "s3"]


def test_without_fetched_turns_the_fill_is_the_plain_rank_order_fill() -> None:
    rng = random.Random(7)
    policy = ContextPolicy(max_source_turn_share=0.1, max_sources_share=0.1)
    for _ in range(200):
        tokens = {f"q{n}": rng.randint(1, 40) for n in range(1, 30)}
        ranking = list(tokens)
        budget = rng.randint(1, 400)
        places = {item: Placement(question_rank=n) for n, item in enumerate(ranking, 1)}
        placed = policy.fill(ranking, budget, tokens.__getitem__, places.__getitem__)
        assert placed == fill_budget(ranking, budget, tokens.__getitem__)
        assert policy.fill(ranking, budget, tokens.__getitem__) == placed


@pytest.mark.parametrize("seed", range(40))
def test_the_fill_never_exceeds_the_budget_or_the_bounds_and_keeps_each_item_once(seed: int) -> None:
    rng = random.Random(seed)
    policy = ContextPolicy(
        max_source_turn_share=rng.choice([0.1, 0.3, 1.0]), max_sources_share=rng.random() or 1.0
    )
    ranking = [f"m{n}" for n in range(40)]
    tokens = {item: rng.randint(1, 60) for item in ranking}
    places = {
        item: Placement(fetched=rng.random() < 0.4, question_rank=rng.choice([None, rng.randint(1, 80)]))
        for item in ranking
    }
    budget = rng.randint(1, 800)
    kept = policy.fill(ranking, budget, tokens.__getitem__, lambda item: places[item])
    assert len(kept) == len(set(kept))
    assert sum(tokens[item] for item in kept) <= budget
    # A fetched turn the question's search did not return is only ever in a source place, within bounds.
    alone = [item for item in kept if places[item].fetched and places[item].question_rank is None]
    assert all(tokens[item] <= policy.max_source_turn_share * budget for item in alone)
    assert sum(tokens[item] for item in alone) <= policy.max_sources_share * budget


def test_a_merged_hit_and_a_documents_metadata_give_the_same_placement() -> None:
    policy = ContextPolicy(source_lead=1, source_every=1)
    merged = policy.merge(
        "q", ["a", "b", "c"], [], [], key=str, sourced=[("event:e1", "c"), ("entity:p1", "x")]
    )
    by_item = {hit.item: hit for hit in merged}
    assert by_item["a"].placement == Placement(False, 1)
    assert by_item["c"].placement == Placement(True, 3)
    assert by_item["x"].placement == Placement(True, None)
    for hit in merged:
        assert placement_of(hit.metadata()) == hit.placement
    assert placement_of({}) == Placement()
    assert placement_of({"gravity_slot": "provenance", "gravity_found_by": "not a list"}) == Placement(
        True, None
    )
