"""Assembling one question's context: fusing rankings, filling a token budget, joining the text.

Everything placed before the answering model counts inside the budget: GRAVITY's injection takes
its tokens first and the host's passages fill what is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gravity_core.errors import ConfigurationError
from gravity_core.eval.hosts import Passage

__all__ = ["RRF_K", "ContextWindow", "fill_budget", "rrf_fuse"]

RRF_K = 60
"""The usual constant of reciprocal rank fusion: a passage at rank r scores 1 / (60 + r)."""


def rrf_fuse(
    rankings: Sequence[Sequence[Passage]],
    *,
    weights: Sequence[float] | None = None,
    k: int = RRF_K,
) -> list[Passage]:
    """Reciprocal rank fusion: each ranking adds ``weight / (k + rank)`` to a passage (ranks from 1).

    Ties keep the order in which passages were first met (the first ranking's order first).

    Args:
        rankings: rankings of passages, best first (the original question's first, then expansions').
        weights: one weight per ranking (default: all 1).
        k: the smoothing constant.

    Returns:
        Every passage of any ranking, by fused score.

    Raises:
        ConfigurationError: ``weights`` does not match ``rankings`` or ``k`` is negative.
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ConfigurationError(f"{len(weights)} weights for {len(rankings)} rankings")
    if k < 0:
        raise ConfigurationError(f"k must be >= 0, got {k}")
    scores: dict[str, float] = {}
    passages: dict[str, Passage] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, passage in enumerate(ranking, start=1):
            if passage.id not in passages:
                passages[passage.id] = passage
                scores[passage.id] = 0.0
            scores[passage.id] += weight / (k + rank)
    ids = list(passages)
    ranked = sorted(range(len(ids)), key=lambda i: (-scores[ids[i]], i))
    return [passages[ids[i]] for i in ranked]


def fill_budget(ranking: Sequence[Passage], budget: int) -> list[Passage]:
    """The passages taken in rank order while they fit in ``budget`` tokens.

    A passage too long for what is left is skipped and the next ones are still tried, so a long
    turn does not stop shorter, lower-ranked ones from filling the budget.
    """
    taken: list[Passage] = []
    left = budget
    for passage in ranking:
        if passage.tokens <= left:
            taken.append(passage)
            left -= passage.tokens
            if left <= 0:
                break
    return taken


@dataclass(frozen=True)
class ContextWindow:
    """What the answering model is given for one question.

    Attributes:
        passages: the host's passages in the context, in rank order.
        anchors_text: GRAVITY's injection (``""`` for the host alone).
        anchors_tokens: cl100k tokens of ``anchors_text``.
    """

    passages: tuple[Passage, ...]
    anchors_text: str = ""
    anchors_tokens: int = 0

    @property
    def tokens(self) -> int:
        """Tokens of :attr:`text`: the passages' and the anchors' (line breaks never merge across lines)."""
        return self.anchors_tokens + sum(p.tokens for p in self.passages)

    @property
    def turn_ids(self) -> frozenset[str]:
        """Ids of the raw turns in the context (anchors' provenance ids do not count)."""
        return frozenset(t for p in self.passages for t in p.turn_ids)

    @property
    def memories_text(self) -> str:
        """The passages in conversation order, one per line."""
        ordered = sorted(self.passages, key=lambda p: p.position)
        return "".join(f"{p.text}\n" for p in ordered)

    @property
    def text(self) -> str:
        """The whole context: the retrieved memories in conversation order, then GRAVITY's injection."""
        return self.memories_text + self.anchors_text

    @classmethod
    def assemble(
        cls, ranking: Sequence[Passage], budget: int, *, anchors_text: str = "", anchors_tokens: int = 0
    ) -> ContextWindow:
        """GRAVITY's injection plus the host's passages filling the rest of ``budget``.

        Raises:
            ConfigurationError: the injection alone is over the budget.
        """
        if anchors_tokens > budget:
            raise ConfigurationError(f"the anchors take {anchors_tokens} tokens, over the budget of {budget}")
        passages = fill_budget(ranking, budget - anchors_tokens)
        return cls(tuple(passages), anchors_text, anchors_tokens)
