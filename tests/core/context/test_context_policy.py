"""The context policy: expansions only add what the question has not placed, at bounded places;
the anchors' share of a budget grows with it."""

from __future__ import annotations

import pytest

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.errors import ConfigurationError


def merged_ids(
    policy: ContextPolicy, question: list[str], expansions: list[list[str]], top_n: int | None = None
):
    texts = [f"expansion {n}" for n in range(1, len(expansions) + 1)]
    return [h.item for h in policy.merge("q", question, texts, expansions, key=str, top_n=top_n)]


def test_the_question_leads_and_expansions_take_every_nth_place_after() -> None:
    policy = ContextPolicy(lead=2, every=3, depth=1)
    question = ["q1", "q2", "q3", "q4", "q5", "q6"]
    expansions = [["e1", "q9"], ["q2", "e2"], ["e3"]]
    # places: q1 q2 | q3 q4 E | q5 q6 E | ...; expansion 2's best hit (q2) is already placed,
    # so the stream is e1, e3 (depth 1: 'e2' at rank 2 never joins).
    assert merged_ids(policy, question, expansions) == ["q1", "q2", "q3", "q4", "e1", "q5", "q6", "e3"]


def test_a_shorter_merge_is_the_start_of_a_longer_one() -> None:
    policy = ContextPolicy(lead=1, every=2, depth=2)
    question = [f"q{i}" for i in range(10)]
    expansions = [[f"e{i}", f"q{i + 5}", f"x{i}"] for i in range(4)]
    full = merged_ids(policy, question, expansions)
    for n in range(1, len(full) + 1):
        assert merged_ids(policy, question, expansions, top_n=n) == full[:n]


def test_expansions_never_displace_the_lead_and_every_zero_adds_nothing() -> None:
    question = ["q1", "q2", "q3", "q4"]
    expansions = [["e1"], ["e2"], ["e3"]]
    for top in range(1, 5):
        assert (
            merged_ids(ContextPolicy(lead=3, every=1), question, expansions, top)[: min(top, 3)]
            == question[: min(top, 3)]
        )
    assert merged_ids(ContextPolicy(every=0), question, expansions) == question


def test_when_the_question_runs_out_expansions_fill_the_rest() -> None:
    policy = ContextPolicy(lead=3, every=4, depth=1)
    assert merged_ids(policy, ["q1"], [["e1"], ["e2"]], top_n=5) == ["q1", "e1", "e2"]


def test_every_hit_says_which_queries_found_it_and_at_what_rank() -> None:
    policy = ContextPolicy(lead=1, every=1, depth=1, rrf_c=60)
    hits = policy.merge("where?", ["a", "b"], ["Maya moved"], [["b", "c"]], key=str)
    by_id = {h.item: h for h in hits}
    assert [h.item for h in hits] == ["a", "b"]
    b = by_id["b"]
    assert b.slot == "expansion"
    assert [(f.query, f.index, f.text, f.rank) for f in b.found_by] == [
        ("question", 0, "where?", 2),
        ("expansion", 1, "Maya moved", 1),
    ]
    assert b.score == pytest.approx(1 / 62 + 1 / 61)
    assert by_id["a"].metadata() == {
        "gravity_score": pytest.approx(1 / 61),
        "gravity_slot": "question",
        "gravity_found_by": [{"query": "question", "index": 0, "text": "where?", "rank": 1}],
    }


def test_duplicates_in_one_list_count_once() -> None:
    hits = DEFAULT_POLICY.merge("q", ["a", "a", "b"], [], [], key=str)
    assert [h.item for h in hits] == ["a", "b"] and hits[0].found_by[0].rank == 1


def test_the_anchor_share_grows_with_the_budget_and_small_budgets_stay_the_hosts() -> None:
    policy = ContextPolicy(anchor_share=0.25, host_reserve=400, min_anchor_tokens=0, max_anchor_tokens=None)
    assert [policy.anchor_tokens(b) for b in (200, 400, 800, 1500, 3000)] == [0, 0, 100, 275, 650]


def test_the_anchors_part_stops_growing_at_the_cap_and_the_query_settings_cap_it_too() -> None:
    capped = ContextPolicy(anchor_share=0.25, host_reserve=400, min_anchor_tokens=0, max_anchor_tokens=300)
    assert [capped.anchor_tokens(b) for b in (1500, 1600, 3000, 8000)] == [275, 300, 300, 300]
    assert capped.anchor_tokens(3000, cap=200) == 200  # the query settings' own budget is lower
    assert capped.anchor_tokens(3000, cap=700) == 300
    assert capped.share(3000).host(300) == 2700
    assert DEFAULT_POLICY.anchor_tokens(3000) == DEFAULT_POLICY.max_anchor_tokens


def test_a_share_below_the_minimum_gives_the_anchors_nothing() -> None:
    policy = ContextPolicy(anchor_share=0.25, host_reserve=400, min_anchor_tokens=150)
    assert [policy.anchor_tokens(b) for b in (800, 999, 1000, 1500)] == [0, 0, 150, 275]
    assert ContextPolicy().anchor_tokens(800) == 0  # the default: 800 tokens stay the host's


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lead": -1},
        {"every": -1},
        {"depth": 0},
        {"rrf_c": -1},
        {"anchor_share": 1.0},
        {"host_reserve": -5},
        {"min_anchor_tokens": -1},
        {"max_anchor_tokens": 0},
        {"max_source_turn_share": 0.0},
        {"max_source_turn_share": 1.5},
        {"max_sources_share": 0.0},
        {"max_sources_share": 1.01},
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        ContextPolicy(**kwargs)  # type: ignore[arg-type]


def test_mismatched_lists_and_a_bad_top_n_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="result lists"):
        DEFAULT_POLICY.merge("q", ["a"], ["one", "two"], [["b"]], key=str)
    with pytest.raises(ConfigurationError, match="top_n"):
        DEFAULT_POLICY.merge("q", ["a"], [], [], key=str, top_n=0)


def searching(policy: ContextPolicy, question: list[str], expansions: list[list[str]], top_n: int | None):
    """merge_searching over ``expansions``; also which expansions it searched."""
    asked: list[int] = []

    def search(n: int) -> list[str]:
        asked.append(n)
        return expansions[n]

    texts = [f"expansion {n}" for n in range(1, len(expansions) + 1)]
    merged, searched = policy.merge_searching("q", question, texts, search, key=str, top_n=top_n)
    assert searched == len(asked)
    return merged, asked


def test_expansions_are_searched_in_order_only_while_the_merge_can_place_their_hits() -> None:
    policy = ContextPolicy(lead=2, every=1, depth=1)
    question = ["q1", "q2", "q3", "q4"]
    # e1 is new, q2's place is the question's already, then e3 fills the second expansion place.
    expansions = [["e1", "x"], ["q2"], ["e3"], ["e4"], ["e5"]]
    merged, asked = searching(policy, question, expansions, top_n=4)
    assert [h.item for h in merged] == ["q1", "q2", "e1", "e3"] == merged_ids(policy, question, expansions, 4)
    assert asked == [0, 1, 2]
    # Within the lead, or when expansions get no place (every 0), nothing is searched; without top_n,
    # or with depth 2, everything is.
    assert searching(ContextPolicy(every=0), question, expansions, top_n=None)[1] == []
    assert searching(policy, question, expansions, top_n=2)[1] == []
    assert searching(policy, question, expansions, top_n=None)[1] == [0, 1, 2, 3, 4]
    assert searching(ContextPolicy(lead=2, every=1, depth=2), question, expansions, top_n=4)[1] == [
        0,
        1,
        2,
        3,
        4,
    ]
    # When the question runs out, expansions take its places too: q2 (expansion 2's) is placed.
    merged, asked = searching(policy, ["q1"], expansions, top_n=4)
    assert [h.item for h in merged] == ["q1", "e1", "q2", "e3"] and asked == [0, 1, 2]


@pytest.mark.parametrize("seed", range(40))
def test_searching_lazily_places_what_the_merge_of_every_expansion_places(seed: int) -> None:
    import random

    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(12)]
    policy = ContextPolicy(lead=rng.randint(0, 4), every=rng.randint(1, 3), depth=1)
    question = rng.sample(pool, rng.randint(0, 8))
    expansions = [rng.sample(pool, rng.randint(0, 3)) for _ in range(rng.randint(0, 6))]
    top_n = rng.randint(1, 14)
    merged, _ = searching(policy, question, expansions, top_n)
    every = policy.merge(
        "q", question, [f"expansion {n}" for n in range(1, len(expansions) + 1)], expansions, str, top_n=top_n
    )
    assert [(h.item, h.slot) for h in merged] == [(h.item, h.slot) for h in every]
