"""Reciprocal-rank fusion shared by every integration."""

from __future__ import annotations

import pytest

from gravity_core.context.fusion import reciprocal_rank_fusion
from gravity_core.errors import ConfigurationError


def test_items_in_several_lists_rise_and_ties_go_to_the_first_list() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["d", "b"], ["b"]], key=str, c=0)
    assert [item for item, _ in fused] == ["b", "a", "d", "c"]
    assert dict(fused)["b"] == pytest.approx(1 / 2 + 1 / 2 + 1)


def test_duplicates_within_a_list_count_once_and_first_object_is_kept() -> None:
    first, later = {"id": 1, "v": "first"}, {"id": 1, "v": "later"}
    fused = reciprocal_rank_fusion([[first, first], [later]], key=lambda d: d["id"], c=60)
    assert fused == [(first, pytest.approx(2 / 61))]


def test_top_n_and_bad_arguments() -> None:
    assert len(reciprocal_rank_fusion([["a", "b", "c"]], key=str, top_n=2)) == 2
    with pytest.raises(ConfigurationError):
        reciprocal_rank_fusion([["a"]], key=str, c=-1)
    with pytest.raises(ConfigurationError):
        reciprocal_rank_fusion([["a"]], key=str, top_n=0)
