"""The one budget rule: the anchors' share first, then the memories in rank order while they fit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gravity_core.context.policy import ContextPolicy
from gravity_core.context.window import BudgetShare, Placement, fill_budget
from gravity_core.errors import ConfigurationError
from gravity_core.prompts.memories import format_memories, memories_within
from gravity_core.text.tokens import TokenCounter


def test_fill_budget_skips_what_is_too_long_keeps_filling_and_stops_when_full() -> None:
    sizes = {"a": 3, "long": 9, "b": 2, "zero": 0, "c": 1}
    assert fill_budget(sizes, 5, sizes.__getitem__) == ["a", "b"]  # full at 5: nothing after
    assert fill_budget(sizes, 7, sizes.__getitem__) == ["a", "b", "zero", "c"]
    assert fill_budget(sizes, 0, sizes.__getitem__) == []


def test_a_share_gives_the_anchors_their_part_and_the_host_the_rest() -> None:
    policy = ContextPolicy(anchor_share=0.25, host_reserve=400, min_anchor_tokens=150)
    share = policy.share(1500)
    assert share == BudgetShare(1500, 275)
    assert share.host(200) == 1300 and share.host(0) == 1500
    assert policy.share(1500, cap=100).anchors == 100
    assert policy.share(800).anchors == 0  # 100 tokens: below the minimum, the host takes it all
    with pytest.raises(ConfigurationError, match="over the budget"):
        share.host(1501)
    with pytest.raises(ConfigurationError, match="at least 1"):
        policy.share(0)


def _greedy_by_whole_block(texts: list[str], budget: int, counter: TokenCounter) -> list[int]:
    """The chain's former rule: a document is kept when the whole block with it still fits."""
    kept: list[int] = []
    for n in range(len(texts)):
        if counter.count(format_memories([texts[i] for i in [*kept, n]])) <= budget:
            kept.append(n)
    return kept


_LINE = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.lists(_LINE, min_size=1, max_size=3).map("\n".join), max_size=8),
    budget=st.integers(1, 120),
)
def test_memories_within_counts_the_block_exactly(texts: list[str], budget: int) -> None:
    """Counting the block's frame once and each item with its line break equals counting the whole
    block, so the kept documents are what counting the whole block each time would keep."""
    counter = TokenCounter()
    kept = memories_within(texts, budget, counter.count)
    block = format_memories([texts[n] for n in kept])
    assert counter.count(block) <= budget
    with_content = [n for n in kept if texts[n].strip()]
    assert with_content == [n for n in _greedy_by_whole_block(texts, budget, counter) if texts[n].strip()]


def test_memories_within_refuses_placements_that_do_not_match_the_texts() -> None:
    with pytest.raises(ConfigurationError, match="2 placements for 1 texts"):
        memories_within(["one"], 100, TokenCounter().count, [Placement(), Placement()])
