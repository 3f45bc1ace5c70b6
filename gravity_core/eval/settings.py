"""What one evaluation run compares: the settings, budgets and fusion parameters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.recipes import PRESETS

__all__ = [
    "ABLATION_SETTINGS",
    "DEFAULT_BUDGETS",
    "HOST_ALONE",
    "EvalConfig",
    "anchor_budget",
    "parse_budgets",
]

HOST_ALONE = "host"
"""The setting name of the host without GRAVITY."""

DEFAULT_BUDGETS: tuple[int, ...] = (800, 1500, 3000)

ABLATION_SETTINGS: tuple[str, ...] = (
    "full",
    "+E",
    "+V",
    "+T",
    "+EV",
    "+ET",
    "+VT",
    "+EVT",
    "-rerank",
    "-expansion",
    "+Sum",
)
"""The full method and the paper's ablations, by their names in :data:`gravity_core.recipes.PRESETS`."""


@dataclass(frozen=True)
class EvalConfig:
    """Settings of one evaluation run.

    Attributes:
        budgets: total context budgets in cl100k tokens; everything given to the answering model
            (GRAVITY's injection included) counts inside.
        settings: GRAVITY settings to run beside the host alone (preset names).
        anchor_share: the most of the budget GRAVITY's injection may take; the preset's own
            ``token_budget`` caps it further. The host fills the rest.
        query_weight: weight of the question's own ranking in the reciprocal rank fusion with the
            expansions' rankings (each weighs 1). Above 1, the question's best hits stay on top and
            the expansions add what it missed.
        rrf_k: the fusion's smoothing constant.
        search_depth: passages a host returns per query.
        expansion_depth: passages of each expansion's ranking that take part in the fusion: an
            expansion is an extra search whose best few hits are added, not a reordering of everything.
        llm_settings: settings answered and judged by the chat model (the host alone always is).
        llm_budgets: budgets at which the chat model answers (those not among ``budgets`` never run).
        concurrency: chat-model requests in flight at once.
    """

    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    settings: tuple[str, ...] = ABLATION_SETTINGS
    anchor_share: float = 0.25
    query_weight: float = 3.0
    rrf_k: int = 60
    search_depth: int = 200
    expansion_depth: int = 2
    llm_settings: tuple[str, ...] = ("full",)
    llm_budgets: tuple[int, ...] = (1500,)
    concurrency: int = 4

    def __post_init__(self) -> None:
        if not self.budgets or any(b < 1 for b in self.budgets):
            raise ConfigurationError(f"budgets must be positive token counts, got {self.budgets}")
        unknown = [s for s in (*self.settings, *self.llm_settings) if s != HOST_ALONE and s not in PRESETS]
        if unknown:
            raise ConfigurationError(
                f"unknown setting(s) {', '.join(unknown)} (known: {HOST_ALONE}, {', '.join(PRESETS)})"
            )
        if not 0.0 < self.anchor_share < 1.0:
            raise ConfigurationError(f"anchor_share must be between 0 and 1, got {self.anchor_share}")
        if (
            self.query_weight <= 0
            or self.rrf_k < 0
            or min(self.search_depth, self.expansion_depth, self.concurrency) < 1
        ):
            raise ConfigurationError(
                "query_weight must be > 0, rrf_k >= 0, search_depth, expansion_depth and concurrency >= 1"
            )

    @property
    def gravity_settings(self) -> tuple[str, ...]:
        """The settings that run GRAVITY, in order, without duplicates."""
        return tuple(dict.fromkeys(s for s in self.settings if s != HOST_ALONE))

    @property
    def all_settings(self) -> tuple[str, ...]:
        """The host alone, then the GRAVITY settings."""
        return (HOST_ALONE, *self.gravity_settings)

    def answered(self, setting: str, budget: int) -> bool:
        """Whether the chat model answers this setting at this budget."""
        return budget in self.llm_budgets and (setting == HOST_ALONE or setting in self.llm_settings)


def anchor_budget(config: QueryConfig, budget: int, share: float) -> int:
    """GRAVITY's part of a total budget: ``share`` of it, capped by the preset's own token budget."""
    part = max(1, int(budget * share))
    return min(part, config.token_budget) if config.token_budget is not None else part


def parse_budgets(text: str | Sequence[int]) -> tuple[int, ...]:
    """``"800,1500,3000"`` -> ``(800, 1500, 3000)``.

    Raises:
        ConfigurationError: not a comma-separated list of positive integers.
    """
    if not isinstance(text, str):
        return tuple(int(b) for b in text)
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise ConfigurationError(
            f"expected comma-separated token counts like '800,1500', got {text!r}"
        ) from exc
    if not values or any(v < 1 for v in values):
        raise ConfigurationError(f"expected positive token counts, got {text!r}")
    return values
