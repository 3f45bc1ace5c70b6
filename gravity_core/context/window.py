"""The one rule for filling a token budget: the anchors' share first, then the host's memories in rank order.

Every path that shares one total budget between GRAVITY's anchors and the host's memories (the
LangChain chain, the LlamaIndex postprocessor, SGMem with GRAVITY, ``gravity eval``) takes the
anchors' part from :meth:`ContextPolicy.share <gravity_core.context.policy.ContextPolicy.share>`
and fills what the anchors leave with :func:`fill_budget`; when the memories hold turns fetched by
provenance, with :func:`fill_sourced` (through :meth:`ContextPolicy.fill
<gravity_core.context.policy.ContextPolicy.fill>`), which bounds what those turns may take.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from gravity_core.errors import ConfigurationError

__all__ = ["BudgetShare", "Placement", "fill_budget", "fill_sourced"]

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
class Placement:
    """Why a document holds its place in a ranking, as far as filling a budget needs it.

    Attributes:
        fetched: it holds a source place: a turn fetched by provenance for a selected anchor.
        question_rank: its rank in the question's own results (from 1); ``None`` when the
            question's search did not return it.
    """

    fetched: bool = False
    question_rank: int | None = None


def fill_sourced(
    ranking: Iterable[T],
    budget: int,
    tokens: Callable[[T], int],
    placement: Callable[[T], Placement],
    *,
    turn_limit: float,
    sources_limit: float,
) -> list[T]:
    """:func:`fill_budget` where the turns fetched by provenance take a bounded part of ``budget``.

    A fetched turn keeps its source place only when it takes at most ``turn_limit`` tokens and
    the fetched turns kept so far, with it, at most ``sources_limit``. Otherwise it is what the
    question's own search made it: it goes back to its place there (just before the question's
    first hit ranked after it), or leaves the ranking when that search did not return it.

    Args:
        ranking: the items, best first.
        budget: the tokens they may take together.
        tokens: the tokens of one item.
        placement: why an item holds its place.
        turn_limit: the most tokens one fetched turn may take in a source place.
        sources_limit: the most tokens the fetched turns in source places may take together.
    """
    taken: list[T] = []
    left = budget
    sourced = 0
    # Fetched turns sent back, by their rank in the question's results: (rank, order, turn, tokens).
    back: list[tuple[int, int, T, int]] = []

    def take(item: T, cost: int) -> int:
        nonlocal left
        if cost <= left:
            taken.append(item)
            left -= cost
            return cost
        return 0

    def take_back() -> None:
        _, _, turn, cost = heapq.heappop(back)
        take(turn, cost)

    for order, item in enumerate(ranking):
        if left <= 0:
            break
        place = placement(item)
        cost = tokens(item)
        if place.fetched:
            if cost <= turn_limit and sourced + cost <= sources_limit:
                sourced += take(item, cost)
            elif place.question_rank is not None:
                heapq.heappush(back, (place.question_rank, order, item, cost))
            continue
        while back and place.question_rank is not None and back[0][0] < place.question_rank and left > 0:
            take_back()
        if left > 0:
            take(item, cost)
    while back and left > 0:
        take_back()
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
