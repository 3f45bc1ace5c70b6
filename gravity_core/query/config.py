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
- ``weights``: the scores of native (embedding-free) matching, :class:`MatchWeights`; the defaults are
  the values the LoCoMo figures of the README were measured with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from gravity_core.schema import AnchorKind

__all__ = ["ContextMode", "MatchWeights", "QueryConfig"]


class ContextMode(StrEnum):
    """What is injected: structured anchors, or the free-form summaries baseline (+Sum)."""

    ANCHORS = "anchors"
    SUMMARIES = "summaries"


@dataclass(frozen=True, slots=True)
class MatchWeights:
    """The weights of native matching (:mod:`gravity_core.query.matching`), as data.

    All are in ``[0, 1]`` but ``decay_days``. Entity scores: the best kind of match wins. Keyword
    fields: a stem found in several fields of an anchor counts with the highest weight; they must be
    above 0. Temporal interval matches rank by tiers (participant, then phrase date, then the interval
    fit and native score), so each tier's weight must be at least the sum of those below it.

    Attributes:
        name: An entity's name in the question.
        alias: One of its aliases.
        fuzzy: Times the ``difflib`` ratio of a misspelt name word.
        fuzzy_cutoff: The lowest ratio read as a misspelling ('Melany' / 'melanie' is 0.77).
        plural: A name with an 's' ('Melanies' for 'Melanie's').
        lowercase_common: Times the score of a name made of ordinary words written in lower case
            ('pride parade' for the entity 'Pride').
        partial: Times the share of a multi-word name's words present ('Nutt' for 'Amy Ellis Nutt').
        holder: Times the named entity's score, for the holders of a relation to it ('Oscar' named:
            his owner).
        relation_object: Times the named entity's score, for the objects of its relations.
        attribute: Times the keyword coverage of an entity's attribute and relation values.
        participant_min: The name score that makes a named entity a participant for events.
        event_keywords: Share of keyword coverage in an event's score when the question has
            participants (the rest is whether one takes part).
        what: Keyword field: an event's ``what``.
        where: Keyword field: an event's ``where``.
        outcome: Keyword field: an event's ``outcome``.
        topic_label: Keyword field: a topic's label and keywords.
        key_fact: Keyword field: a topic's key facts.
        attribute_value: Keyword field: an entity's current attribute values and relation objects.
        past_attribute_value: Keyword field: its past attribute values.
        attribute_name: Keyword field: its attribute and relation names.
        temporal_participant: Date matches: an event of an entity the question names.
        temporal_phrase: Date matches: an event dated by a time phrase (not by its mention day).
        temporal_contained: Date matches: an event lying wholly inside the question's interval.
        temporal_native: Date matches: times the event's native matching score.
        temporal_intent: 'When...?' questions: the score of a phrase-dated event without keyword
            match; the rest of 1 goes by native score (mention-dated events get that part only).
        decay_days: 'before / after X' matches score ``1 / (1 + days / decay_days)``.
    """

    name: float = 1.0
    alias: float = 0.95
    fuzzy: float = 0.9
    fuzzy_cutoff: float = 0.75
    plural: float = 0.95
    lowercase_common: float = 0.6
    partial: float = 0.8
    holder: float = 0.6
    relation_object: float = 0.4
    attribute: float = 0.5
    participant_min: float = 0.5
    event_keywords: float = 0.7
    what: float = 1.0
    where: float = 0.8
    outcome: float = 0.5
    topic_label: float = 1.0
    key_fact: float = 0.4
    attribute_value: float = 1.0
    past_attribute_value: float = 0.6
    attribute_name: float = 0.5
    temporal_participant: float = 0.5
    temporal_phrase: float = 0.3
    temporal_contained: float = 0.1
    temporal_native: float = 0.1
    temporal_intent: float = 0.5
    decay_days: float = 30.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
                raise ValueError(f"{f.name} must be a finite number, got {value!r}")
            if f.name != "decay_days" and not 0.0 <= value <= 1.0:
                raise ValueError(f"{f.name} must be in [0, 1], got {value}")
        if self.decay_days <= 0:
            raise ValueError(f"decay_days must be above 0, got {self.decay_days}")
        for group in (self.event_fields, self.topic_fields, self.attribute_fields):
            if min(group) <= 0:
                raise ValueError("keyword field weights must be above 0")
        tiers = (
            self.temporal_participant,
            self.temporal_phrase,
            self.temporal_contained,
            self.temporal_native,
        )
        for i in range(len(tiers) - 1):
            if tiers[i] < sum(tiers[i + 1 :]) - 1e-9:
                raise ValueError(
                    "temporal weights must rank by tiers: participant >= phrase + contained + native, "
                    "phrase >= contained + native, contained >= native"
                )

    @property
    def event_participant(self) -> float:
        """Share of taking part in an event's score when the question has participants."""
        return 1.0 - self.event_keywords

    @property
    def event_fields(self) -> tuple[float, float, float]:
        """Keyword field weights of events: ``what``, ``where``, ``outcome``."""
        return (self.what, self.where, self.outcome)

    @property
    def topic_fields(self) -> tuple[float, float]:
        """Keyword field weights of topics: label and keywords, key facts."""
        return (self.topic_label, self.key_fact)

    @property
    def attribute_fields(self) -> tuple[float, float, float]:
        """Keyword field weights of entities: current values, past values, names."""
        return (self.attribute_value, self.past_attribute_value, self.attribute_name)


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
    weights: MatchWeights = Field(
        default=MatchWeights(), description="Weights of native matching (names, keywords, dates)."
    )

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
