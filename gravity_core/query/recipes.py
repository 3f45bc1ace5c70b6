"""Named query presets: the full method and the paper's ablations and baseline.

``PRESETS["+EV"]`` runs the entity and event modules only; ``"-rerank"`` keeps native matching
order; ``"-expansion"`` makes no expanded queries; ``"+Sum"`` injects free-form batch summaries in
the anchors' slot, without expansion.
"""

from __future__ import annotations

from types import MappingProxyType

from gravity_core.errors import ConfigurationError
from gravity_core.query.config import ContextMode, QueryConfig
from gravity_core.schema import AnchorKind

__all__ = ["FULL", "PRESETS", "SUMMARY_BASELINE", "modules_preset"]

E, V, T = AnchorKind.ENTITY, AnchorKind.EVENT, AnchorKind.TOPIC

FULL = QueryConfig()
SUMMARY_BASELINE = QueryConfig(mode=ContextMode.SUMMARIES, expand=False)


def modules_preset(letters: str) -> QueryConfig:
    """The full method restricted to modules named by letters: ``"EV"`` = entities and events."""
    table = {"E": E, "V": V, "T": T}
    unknown = set(letters) - set(table)
    if not letters or unknown:
        raise ConfigurationError(
            f"modules are letters among E (entity), V (event), T (topic); got {letters!r}"
        )
    return FULL.model_copy(update={"modules": frozenset(table[c] for c in letters)})


PRESETS: MappingProxyType[str, QueryConfig] = MappingProxyType(
    {
        "full": FULL,
        **{f"+{m}": modules_preset(m) for m in ("E", "V", "T", "EV", "ET", "VT", "EVT")},
        "-rerank": FULL.model_copy(update={"rerank": False}),
        "-expansion": FULL.model_copy(update={"expand": False}),
        "+Sum": SUMMARY_BASELINE,
    }
)
