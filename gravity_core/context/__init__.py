"""The context policy: how extra hits join the question's own, and how one token budget is shared."""

from gravity_core.context.fusion import reciprocal_rank_fusion
from gravity_core.context.policy import (
    DEFAULT_POLICY,
    EXPANDING_POLICY,
    ContextPolicy,
    MergedHit,
    QueryHit,
    placement_of,
)
from gravity_core.context.window import BudgetShare, Placement, fill_budget, fill_sourced

__all__ = [
    "BudgetShare",
    "ContextPolicy",
    "DEFAULT_POLICY",
    "EXPANDING_POLICY",
    "MergedHit",
    "Placement",
    "QueryHit",
    "fill_budget",
    "fill_sourced",
    "placement_of",
    "reciprocal_rank_fusion",
]
