"""What one evaluation run compares: the settings, budgets and fusion parameters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.recipes import FULL, PRESETS

__all__ = [
    "ABLATION_SETTINGS",
    "DEFAULT_BUDGETS",
    "HOST_ALONE",
    "EvalConfig",
    "EXPANSIONS_ALONE",
    "ANCHORS_ALONE",
    "SOURCES_ALONE",
    "anchor_budget",
    "parse_budgets",
    "preset_of",
]

HOST_ALONE = "host"
"""The setting name of the host without GRAVITY."""

EXPANSIONS_ALONE = "expansions"
"""The setting of the full method's expanded queries with no anchor text: what the expansions alone
do to the host's ranking (the whole budget stays the host's). Under a policy that places no
expansion, as the shipped one, it is the host alone; run it with ``--expansion-every 1``
(:data:`~gravity_core.context.policy.EXPANDING_POLICY`)."""

SOURCES_ALONE = "sources"
"""The setting of the full method's source turns, fetched from the host by provenance and placed by
the policy, with no anchor text and no expansions: what retrieval by provenance alone does."""

ANCHORS_ALONE = "anchors"
"""The setting of the full method's anchor text with no host memories: the whole budget is the
anchors', so it measures what the anchors carry on their own."""

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
"""The full method and the paper's ablations, by their names in :data:`gravity_core.query.recipes.PRESETS`."""


@dataclass(frozen=True)
class EvalConfig:
    """Settings of one evaluation run.

    Attributes:
        budgets: total context budgets in cl100k tokens; everything given to the answering model
            (GRAVITY's injection included) counts inside.
        settings: GRAVITY settings to run beside the host alone (preset names).
        policy: how the expansions' hits join the question's and how each budget is shared
            between GRAVITY's injection and the host (the one the integrations use by default;
            the preset's own ``token_budget`` caps the injection further).
        search_depth: passages a host returns per query.
        llm_settings: settings answered and judged by the chat model (the host alone always is).
        llm_budgets: budgets at which the chat model answers (those not among ``budgets`` never run).
        concurrency: chat-model requests in flight at once.
    """

    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    settings: tuple[str, ...] = ABLATION_SETTINGS
    policy: ContextPolicy = DEFAULT_POLICY
    search_depth: int = 200
    llm_settings: tuple[str, ...] = ("full",)
    llm_budgets: tuple[int, ...] = (1500,)
    concurrency: int = 4

    def __post_init__(self) -> None:
        if not self.budgets or any(b < 1 for b in self.budgets):
            raise ConfigurationError(f"budgets must be positive token counts, got {self.budgets}")
        known = (HOST_ALONE, EXPANSIONS_ALONE, SOURCES_ALONE, ANCHORS_ALONE, *PRESETS)
        unknown = [s for s in (*self.settings, *self.llm_settings) if s not in known]
        if unknown:
            raise ConfigurationError(f"unknown setting(s) {', '.join(unknown)} (known: {', '.join(known)})")
        if min(self.search_depth, self.concurrency) < 1:
            raise ConfigurationError("search_depth and concurrency must be >= 1")

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


def preset_of(setting: str) -> QueryConfig:
    """The query settings of a GRAVITY setting.

    The expansions-alone, sources-alone and anchors-alone settings run the full method.
    """
    return FULL if setting in (EXPANSIONS_ALONE, SOURCES_ALONE, ANCHORS_ALONE) else PRESETS[setting]


def anchor_budget(config: QueryConfig, budget: int, policy: ContextPolicy) -> int:
    """GRAVITY's part of a total budget: the policy's, capped by the preset's own token budget."""
    return policy.anchor_tokens(budget, config.token_budget)


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
