"""Fusing rankings, filling the budget, and counting every context token, anchors included."""

from __future__ import annotations

import pytest

from gravity_core.context.policy import ContextPolicy
from gravity_core.context.window import fill_budget
from gravity_core.errors import ConfigurationError
from gravity_core.eval.context import ContextWindow
from gravity_core.eval.hosts import Passage
from gravity_core.text.tokens import TokenCounter

COUNTER = TokenCounter()


def passage(pid: str, text: str | None = None, position: int = 0) -> Passage:
    body = text or f"[1:00 pm on 1 May, 2023] Anna: turn {pid} says something."
    return Passage(pid, body, COUNTER.count(body + "\n"), (pid,), position)


A, B, C, D = (passage(x, position=i) for i, x in enumerate("abcd"))


def ids(passages: list[Passage]) -> list[str]:
    return [p.id for p in passages]


def test_fill_budget_skips_a_passage_too_long_and_keeps_filling() -> None:
    long = passage("long", "word " * 200)
    taken = fill_budget([A, long, B], A.tokens + B.tokens, lambda p: p.tokens)
    assert ids(taken) == ["a", "b"]


def test_window_counts_anchors_inside_the_budget() -> None:
    anchors = (
        "The retrieved memories are the primary source of truth.\n<gravity_anchors>\n- x\n</gravity_anchors>"
    )
    anchor_tokens = COUNTER.count(anchors)
    budget = anchor_tokens + A.tokens + B.tokens + 1
    window = ContextWindow.assemble([A, B, C, D], budget, anchors_text=anchors, anchors_tokens=anchor_tokens)
    assert ids(list(window.passages)) == ["a", "b"]  # the host only gets what the anchors leave
    assert window.tokens == COUNTER.count(window.text) <= budget
    alone = ContextWindow.assemble([A, B, C, D], budget)
    assert len(alone.passages) > len(window.passages)


def test_window_text_is_memories_in_time_order_then_anchors() -> None:
    window = ContextWindow.assemble(
        [C, A], 1000, anchors_text="ANCHORS", anchors_tokens=COUNTER.count("ANCHORS")
    )
    assert window.text.index("turn a") < window.text.index("turn c") < window.text.index("ANCHORS")
    assert window.turn_ids == {"a", "c"}


def test_anchors_over_the_budget_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        ContextWindow.assemble([A], 5, anchors_text="x " * 50, anchors_tokens=50)


def test_a_merged_ranking_bounds_what_the_fetched_turns_take() -> None:
    long = passage("long", "[1:00 pm on 1 May, 2023] Anna: " + "a long story " * 60, position=9)
    policy = ContextPolicy(source_lead=1, source_every=1, max_source_turn_share=0.2)
    # The question found "long" third; it is fetched as a source and merged into the 2nd place.
    merged = policy.merge("q", [A, B, long, C], [], [], key=lambda p: p.id, sourced=[("event:e1", long)])
    assert ids([h.item for h in merged]) == ["a", "long", "b", "c"]
    budget = A.tokens + B.tokens + C.tokens + long.tokens
    # Over a fifth of the budget, it goes back to the question's third place.
    assert ids(list(ContextWindow.assemble(merged, budget, policy=policy).passages)) == [
        "a",
        "b",
        "long",
        "c",
    ]
    loose = ContextPolicy(source_lead=1, source_every=1, max_source_turn_share=1.0, max_sources_share=1.0)
    assert ids(list(ContextWindow.assemble(merged, budget, policy=loose).passages)) == ["a", "long", "b", "c"]
    # Plain passages say nothing of how they were found: they fill in rank order.
    plain = [h.item for h in merged]
    assert ContextWindow.assemble(plain, budget, policy=policy).passages == tuple(plain)
