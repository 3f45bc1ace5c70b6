"""Assembling one question's context: filling a token budget, joining the text.

The ranking comes from the context policy (:mod:`gravity_core.context.policy`), and so does the
filling rule (:meth:`ContextPolicy.fill <gravity_core.context.policy.ContextPolicy.fill>`), as for
every integration.

Everything placed before the answering model counts inside the budget: GRAVITY's injection takes
its tokens first and the host's passages fill what is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy, MergedHit
from gravity_core.context.window import Placement
from gravity_core.errors import ConfigurationError
from gravity_core.eval.hosts import Passage

__all__ = ["ContextWindow"]


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
        cls,
        ranking: Sequence[Passage | MergedHit[Passage]],
        budget: int,
        *,
        anchors_text: str = "",
        anchors_tokens: int = 0,
        policy: ContextPolicy = DEFAULT_POLICY,
    ) -> ContextWindow:
        """GRAVITY's injection plus the host's passages filling the rest of ``budget``.

        ``ranking`` is the host's passages, best first, or the policy's merge of them: then the
        turns fetched by provenance take no more than ``policy`` allows (:meth:`ContextPolicy.fill`).

        Raises:
            ConfigurationError: the injection alone is over the budget.
        """
        if anchors_tokens > budget:
            raise ConfigurationError(f"the anchors take {anchors_tokens} tokens, over the budget of {budget}")
        kept = policy.fill(ranking, budget - anchors_tokens, lambda h: _passage(h).tokens, _placement)
        return cls(tuple(map(_passage, kept)), anchors_text, anchors_tokens)


def _passage(entry: Passage | MergedHit[Passage]) -> Passage:
    return entry.item if isinstance(entry, MergedHit) else entry


def _placement(entry: Passage | MergedHit[Passage]) -> Placement:
    """A merged hit's placement; a bare passage holds a place of the question's."""
    return entry.placement if isinstance(entry, MergedHit) else Placement()
