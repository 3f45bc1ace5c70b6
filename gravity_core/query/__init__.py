"""The query phase: anchor selection, temporal slots, expansion and prompt blocks, with no model call."""

from gravity_core.query.config import ContextMode, QueryConfig
from gravity_core.query.types import AnchorContext, Blocks, ScoredAnchor

__all__ = ["AnchorContext", "Blocks", "ContextMode", "QueryConfig", "ScoredAnchor"]
