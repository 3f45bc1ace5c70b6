"""What an extractor returns for one batch: observations to merge into the KB.

Extractors never edit the KB; they describe what they saw, and the merge step decides how it
changes the anchors (reinforce, add, or record a state transition).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gravity_core.schema.anchors import EntityType
from gravity_core.schema.time import TimeRef

__all__ = [
    "AnchorUpdate",
    "AttributeObservation",
    "EntityObservation",
    "EventObservation",
    "RelationObservation",
    "SummaryObservation",
    "TopicObservation",
]

_OBS = ConfigDict(extra="forbid", frozen=True)


class AttributeObservation(BaseModel):
    """An attribute value seen of an entity; an ``exclusive`` one holds one value at a time."""

    model_config = _OBS

    name: str
    value: str
    confidence: float = Field(default=0.7, ge=0.0, le=1.0)
    exclusive: bool = False
    sources: list[str] = Field(min_length=1)


class RelationObservation(BaseModel):
    """A relation seen from an entity to ``object``, dated when the utterance says when."""

    model_config = _OBS

    relation: str
    object: str
    object_type: EntityType | None = None
    time: TimeRef | None = None
    confidence: float = Field(default=0.7, ge=0.0, le=1.0)
    sources: list[str] = Field(min_length=1)


class EntityObservation(BaseModel):
    """An entity seen in the batch, with the attributes and relations said of it."""

    model_config = _OBS

    name: str
    type: EntityType = EntityType.OTHER
    aliases: list[str] = Field(default_factory=list)
    is_speaker: bool = False
    attributes: list[AttributeObservation] = Field(default_factory=list)
    relations: list[RelationObservation] = Field(default_factory=list)
    sources: list[str] = Field(min_length=1, description="Utterances mentioning the entity.")


class EventObservation(BaseModel):
    """An event seen in the batch: who did what, with when, where and the outcome when said."""

    model_config = _OBS

    who: list[str]
    what: str
    when: TimeRef | None = None
    where: str | None = None
    outcome: str | None = None
    quote: str | None = Field(default=None, description="The sentence the event was read from, verbatim.")
    sources: list[str] = Field(min_length=1)


class TopicObservation(BaseModel):
    """A topic seen in one session of the batch.

    ``topic_id`` names an existing topic the observation extends; without it the merge step
    matches by label and keywords, or opens a new topic.
    """

    model_config = _OBS

    label: str
    keywords: list[str] = Field(default_factory=list)
    participants: list[str] = Field(default_factory=list)
    session: str
    summary: str
    facts: list[str] = Field(default_factory=list)
    topic_id: str | None = None
    sources: list[str] = Field(min_length=1)


class SummaryObservation(BaseModel):
    """A free-form summary of one batch: the '+Sum' baseline the anchors are compared with."""

    model_config = _OBS

    session: str
    text: str
    sources: list[str] = Field(min_length=1)


class AnchorUpdate(BaseModel):
    """Everything one extractor saw in one batch."""

    model_config = ConfigDict(extra="forbid")

    entities: list[EntityObservation] = Field(default_factory=list)
    events: list[EventObservation] = Field(default_factory=list)
    topics: list[TopicObservation] = Field(default_factory=list)
    summaries: list[SummaryObservation] = Field(default_factory=list)

    def extend(self, other: AnchorUpdate) -> None:
        """Append another update's observations to this one."""
        self.entities.extend(other.entities)
        self.events.extend(other.events)
        self.topics.extend(other.topics)
        self.summaries.extend(other.summaries)
