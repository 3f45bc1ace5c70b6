"""The context policy: how extra hits join the question's own, and how one token budget is shared."""

from gravity_core.context.fusion import reciprocal_rank_fusion
from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy, MergedHit, QueryHit

__all__ = [
    "ContextPolicy",
    "DEFAULT_POLICY",
    "MergedHit",
    "QueryHit",
    "reciprocal_rank_fusion",
]
