"""The one rule for filling a token budget: the anchors' share first, then the host's memories in rank order.

Every path that shares one total budget between GRAVITY's anchors and the host's memories (the
LangChain chain, the LlamaIndex postprocessor, SGMem with GRAVITY, ``gravity eval``) takes the
anchors' part from :meth:`ContextPolicy.share <gravity_core.context.policy.ContextPolicy.share>`
and fills what the anchors leave with :func:`fill_budget`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from gravity_core.errors import ConfigurationError

__all__ = ["BudgetShare", "fill_budget"]

T = TypeVar("T")


def fill_budget(ranking: Iterable[T], budget: int, tokens: Callable[[T], int]) -> list[T]:
    """The items taken in rank order while they fit in ``budget`` tokens.

    An item too long for what is left is skipped and the next ones are still tried, so a long turn
    does not stop shorter, lower-ranked ones from filling the budget. Once nothing is left, no
    further item is taken.

    Args:
        ranking: the items, best first.
        budget: the tokens they may take together.
        tokens: the tokens of one item (their sum is what the items take together).
    """
    taken: list[T] = []
    left = budget
    for item in ranking:
        if left <= 0:
            break
        cost = tokens(item)
        if cost <= left:
            taken.append(item)
            left -= cost
    return taken


@dataclass(frozen=True)
class BudgetShare:
    """One total budget shared by the anchors and the host's memories.

    Attributes:
        total: the whole budget, in tokens.
        anchors: the most the anchors may take (0: too small a budget for anchors; the host's own
            context then fills it all, with no expansion).
    """

    total: int
    anchors: int

    def __post_init__(self) -> None:
        if self.total < 1:
            raise ConfigurationError(f"a token budget must be at least 1, got {self.total}")
        if not 0 <= self.anchors <= self.total:
            raise ConfigurationError(f"the anchors' part must be within 0..{self.total}, got {self.anchors}")

    def host(self, anchor_tokens: int) -> int:
        """The tokens left for the host's memories once the anchors took ``anchor_tokens``.

        Raises:
            ConfigurationError: the anchors took more than the whole budget.
        """
        if not 0 <= anchor_tokens <= self.total:
            raise ConfigurationError(
                f"the anchors take {anchor_tokens} tokens, over the budget of {self.total}"
            )
        return self.total - anchor_tokens
