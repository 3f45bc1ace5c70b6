"""Assembling one question's context: filling a token budget, joining the text.

The ranking itself comes from the context policy (:mod:`gravity_core.context.policy`).

Everything placed before the answering model counts inside the budget: GRAVITY's injection takes
its tokens first and the host's passages fill what is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gravity_core.errors import ConfigurationError
from gravity_core.eval.hosts import Passage

__all__ = ["ContextWindow", "fill_budget"]


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
