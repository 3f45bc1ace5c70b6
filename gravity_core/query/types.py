"""What a query returns: the selected anchors with scores, the expansions and the blocks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gravity_core.schema import AnchorKind

__all__ = ["AnchorContext", "AnchorSources", "Blocks", "ScoredAnchor"]


@dataclass(frozen=True)
class ScoredAnchor:
    """One selected anchor.

    Attributes:
        kind: entity, event or topic.
        id: the anchor's id in the KB.
        score: cosine similarity to the question (native match score when reranking is off).
        reason: why it was selected: ``"similarity"``, ``"temporal"`` (a reserved date slot) or ``"native"``.
    """

    kind: AnchorKind
    id: str
    score: float
    reason: str = "similarity"


@dataclass(frozen=True)
class AnchorSources:
    """One selected anchor's source utterance ids, the most telling first.

    Attributes:
        kind: entity, event or topic.
        anchor_id: the anchor's id in the KB.
        utterance_ids: for an event, the utterances that reported it; for a profile or a topic,
            those about what the question asks (:class:`~gravity_core.query.provenance.SourceRanker`).
            Each id once.
        score: the anchor's score for the question (as :attr:`ScoredAnchor.score`).
        fits: per utterance id, how surely it is about the question, in ``[0, 1]``
            (:class:`~gravity_core.query.provenance.SourceRanker` says how); empty: 1 for each.
    """

    kind: AnchorKind
    anchor_id: str
    utterance_ids: tuple[str, ...]
    score: float = 0.0
    fits: tuple[float, ...] = ()

    def fit(self, position: int) -> float:
        """How surely the source at ``position`` in :attr:`utterance_ids` is about the question."""
        return self.fits[position] if position < len(self.fits) else 1.0

    @property
    def label(self) -> str:
        """``"<kind>:<id>"``, how a fetched turn names the anchor that brought it."""
        return f"{self.kind.value}:{self.anchor_id}"


@dataclass(frozen=True)
class Blocks:
    """The three formatted blocks; an empty string when a block has nothing.

    ``summaries`` is filled only by the '+Sum' baseline, instead of the three blocks.
    """

    topics: str = ""
    entities: str = ""
    events: str = ""
    summaries: str = ""

    def as_dict(self) -> dict[str, str]:
        """``{"topics": ..., "entities": ..., "events": ...}`` (plus ``"summaries"`` when set)."""
        blocks = {"topics": self.topics, "entities": self.entities, "events": self.events}
        if self.summaries:
            blocks["summaries"] = self.summaries
        return blocks


@dataclass(frozen=True)
class AnchorContext:
    """Everything GRAVITY adds to one question.

    Attributes:
        question: the question as asked.
        anchors: the anchors kept after trimming, best first within each kind.
        expansions: expanded queries for the host's store, in round-robin order.
        blocks: the formatted blocks.
        text: the whole injection (priority instruction plus blocks), ready for a prompt.
        tokens: cl100k tokens of ``text``.
        sources: the selected anchors' source utterance ids, anchor by anchor in selection order
            (every selected anchor, also those the token budget left out of ``text``): what
            retrieval by provenance fetches from the host.
    """

    question: str
    anchors: list[ScoredAnchor] = field(default_factory=list)
    expansions: list[str] = field(default_factory=list)
    blocks: Blocks = field(default_factory=Blocks)
    text: str = ""
    tokens: int = 0
    sources: list[AnchorSources] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as printed by ``gravity query --json``."""
        return {
            "question": self.question,
            "expansions": list(self.expansions),
            "blocks": self.blocks.as_dict(),
            "anchors": [
                {"kind": a.kind.value, "id": a.id, "score": round(a.score, 4), "reason": a.reason}
                for a in self.anchors
            ],
            "sources": [
                {"kind": s.kind.value, "id": s.anchor_id, "utterance_ids": list(s.utterance_ids)}
                for s in self.sources
            ],
            "tokens": self.tokens,
            "text": self.text,
        }
