"""The context policy: how extra hits join the question's own, and how one token budget is shared."""

from gravity_core.context.fusion import reciprocal_rank_fusion
from gravity_core.context.policy import DEFAULT_POLICY, EXPANDING_POLICY, ContextPolicy, MergedHit, QueryHit
from gravity_core.context.window import BudgetShare, fill_budget

__all__ = [
    "BudgetShare",
    "ContextPolicy",
    "DEFAULT_POLICY",
    "EXPANDING_POLICY",
    "MergedHit",
    "QueryHit",
    "fill_budget",
    "reciprocal_rank_fusion",
]
