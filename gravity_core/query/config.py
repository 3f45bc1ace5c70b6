"""Query-phase settings: which modules run, how many anchors each keeps, what is switched off.

Defaults and why:

- ``k_entity=3``: questions name one or two people; a third slot catches a pet, place or relative.
- ``k_event=5`` with ``temporal_slots=2`` of them reserved: temporal questions need the dated event
  even when its wording is far from the question; the rest fill by similarity.
- ``k_topic=2``: a topic block is long (arc + facts); two arcs cover multi-hop questions without
  crowding out the host's own memories.
- ``sigma`` floors (cosine, for the packaged MiniLM): unrelated anchors score about 0.0-0.2 against a
  question, related ones 0.3 and up, so 0.2 drops noise without losing paraphrases.
- ``relevance_floor=None``: the embedder's own calibrated floor (the packaged MiniLM: 0.4; other
  embedders have none). When no selected anchor reaches it (and no event matches a date in the
  question), the question is not about the conversation: no anchor and no expansion. On the LoCoMo
  dev KBs (offline extractor, MiniLM), 95% of the questions' best anchor scores 0.5 or more, while
  off-topic questions ("What is the capital of France?") score 0.2-0.4 on generic anchors;
  ``tests/test_relevance_floor.py`` measures both. An empty question never gets anchors.
- ``expansion_budget=9`` (as in the paper): at most nine extra host searches per question.
- ``token_budget=700`` (cl100k tokens of the whole injection: priority instruction and the three
  blocks): about a fifth of a 3,000-token context; the lowest-scored anchors are trimmed first.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from gravity_core.schema import AnchorKind

__all__ = ["ContextMode", "QueryConfig"]


class ContextMode(StrEnum):
    """What is injected: structured anchors, or the free-form summaries baseline (+Sum)."""

    ANCHORS = "anchors"
    SUMMARIES = "summaries"


class QueryConfig(BaseModel):
    """Settings of one query (frozen; derive variants with ``model_copy(update=...)``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    modules: frozenset[AnchorKind] = Field(
        default=frozenset(AnchorKind), description="Anchor modules that run."
    )
    k_entity: int = Field(default=3, ge=0)
    k_event: int = Field(default=5, ge=0)
    k_topic: int = Field(default=2, ge=0)
    sigma_entity: float = Field(default=0.2, ge=-1.0, le=1.0)
    sigma_event: float = Field(default=0.2, ge=-1.0, le=1.0)
    sigma_topic: float = Field(default=0.2, ge=-1.0, le=1.0)
    temporal_slots: int = Field(default=2, ge=0, description="Event slots reserved for date matches.")
    candidate_pool: int = Field(default=50, ge=1, description="Candidates per module from native matching.")
    rerank: bool = Field(
        default=True, description="Rerank candidates by embedding cosine (off: native order)."
    )
    relevance_floor: float | None = Field(
        default=None,
        ge=-1.0,
        le=1.0,
        description=(
            "Below this best anchor cosine (and with no date match) nothing is injected or expanded; "
            "None: the embedder's calibrated floor, if it has one."
        ),
    )
    expand: bool = Field(default=True, description="Make expanded queries for the host's store.")
    expansion_budget: int = Field(default=9, ge=0)
    token_budget: int | None = Field(default=700, ge=1, description="cl100k tokens of the whole injection.")
    mode: ContextMode = ContextMode.ANCHORS
    k_summary: int = Field(default=4, ge=0, description="Summaries injected in the +Sum baseline.")

    def k_for(self, kind: AnchorKind) -> int:
        """How many anchors of ``kind`` to keep (0 when the module is off)."""
        if kind not in self.modules:
            return 0
        return {
            AnchorKind.ENTITY: self.k_entity,
            AnchorKind.EVENT: self.k_event,
            AnchorKind.TOPIC: self.k_topic,
        }[kind]

    def sigma_for(self, kind: AnchorKind) -> float:
        """The similarity floor of ``kind``."""
        return {
            AnchorKind.ENTITY: self.sigma_entity,
            AnchorKind.EVENT: self.sigma_event,
            AnchorKind.TOPIC: self.sigma_topic,
        }[kind]
