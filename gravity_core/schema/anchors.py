"""The three anchor types GRAVITY builds: entities, events (4W1O) and topics.

Every field that states a fact carries ``sources``: the ids of the utterances it came from.
"""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from gravity_core.schema.time import TimeRef

__all__ = [
    "AnchorKind",
    "ArcSnapshot",
    "Attribute",
    "EntityAnchor",
    "EntityType",
    "EventAnchor",
    "Fact",
    "Relation",
    "StateTransition",
    "SummaryRecord",
    "TopicAnchor",
    "TrailLink",
]

_MODEL = ConfigDict(extra="forbid", validate_assignment=False)


class AnchorKind(StrEnum):
    """The three anchor modules."""

    ENTITY = "entity"
    EVENT = "event"
    TOPIC = "topic"


class EntityType(StrEnum):
    """Coarse entity types; 'other' when nothing fits."""

    PERSON = "person"
    PET = "pet"
    PLACE = "place"
    ORGANIZATION = "organization"
    ACTIVITY = "activity"
    OBJECT = "object"
    WORK = "work"
    OTHER = "other"


class Attribute(BaseModel):
    """One attribute value of an entity, e.g. occupation = 'nurse'.

    A value said again raises ``confidence`` and ``mentions``; a different value of an
    exclusive attribute (only one can hold at a time) becomes a :class:`StateTransition`
    and the old value is kept with ``current=False``.
    """

    model_config = _MODEL

    name: str
    value: str
    confidence: float = Field(ge=0.0, le=1.0)
    exclusive: bool = False
    current: bool = True
    mentions: int = 1
    first_seen: datetime
    last_seen: datetime
    sources: list[str]


class Relation(BaseModel):
    """A typed relation from the entity that holds it to another entity or value."""

    model_config = _MODEL

    relation: str = Field(description="Relation type in snake_case, e.g. 'sister_of'.")
    object: str = Field(description="Name of the related entity (or a literal value).")
    object_id: str | None = Field(default=None, description="Id of the related entity anchor, if any.")
    time: TimeRef | None = None
    confidence: float = Field(ge=0.0, le=1.0)
    mentions: int = 1
    first_seen: datetime
    last_seen: datetime
    sources: list[str]


class StateTransition(BaseModel):
    """A recorded change of an exclusive attribute's value."""

    model_config = _MODEL

    attribute: str
    old: str
    new: str
    when: datetime
    sources: list[str]


class EntityAnchor(BaseModel):
    """Profile of a person, pet, place, organization or thing in the conversation."""

    model_config = _MODEL

    id: str
    name: str
    aliases: list[str] = Field(default_factory=list)
    type: EntityType = EntityType.OTHER
    is_speaker: bool = False
    attributes: list[Attribute] = Field(default_factory=list)
    relations: list[Relation] = Field(default_factory=list)
    transitions: list[StateTransition] = Field(default_factory=list)
    co_occurrence: dict[str, int] = Field(
        default_factory=dict, description="Other entity id -> number of utterances mentioning both."
    )
    mentions: int = 0
    first_seen: datetime
    last_seen: datetime
    sources: list[str] = Field(default_factory=list, description="Utterances that mention the entity.")

    def current_attributes(self) -> list[Attribute]:
        """The attribute values that currently hold."""
        return [a for a in self.attributes if a.current]


class TrailLink(BaseModel):
    """Position of an event in one chronological trail (per participant or per topic)."""

    model_config = _MODEL

    trail: str = Field(description="Trail key, e.g. 'who:caroline' or 'topic:t3'.")
    prev: str | None = None
    next: str | None = None


class EventAnchor(BaseModel):
    """Something that happened, in 4W1O form: who, what, when, where, outcome."""

    model_config = _MODEL

    id: str
    who: list[str] = Field(description="Participant names.")
    who_ids: list[str] = Field(default_factory=list, description="Entity ids of the participants.")
    what: str
    when: TimeRef | None = None
    where: str | None = None
    outcome: str | None = None
    quote: str | None = Field(
        default=None, description="The sentence the event was read from, verbatim (offline extractor)."
    )
    said_at: datetime = Field(description="Timestamp of the utterance that reported the event.")
    session: str
    topic_id: str | None = None
    trails: list[TrailLink] = Field(default_factory=list)
    sources: list[str]

    def occurred(self) -> date:
        """Best estimate of the day the event happened: its normalized start, else when it was said."""
        if self.when is not None and self.when.start is not None:
            return self.when.start
        return self.said_at.date()


class ArcSnapshot(BaseModel):
    """What a topic was about in one session."""

    model_config = _MODEL

    session: str
    date: datetime
    summary: str
    sources: list[str]


class Fact(BaseModel):
    """A short statement with its provenance."""

    model_config = _MODEL

    text: str
    sources: list[str]


class SummaryRecord(BaseModel):
    """A free-form summary of one build batch, kept for the '+Sum' baseline (not an anchor module)."""

    model_config = _MODEL

    id: str
    session: str
    date: datetime
    text: str
    sources: list[str]


class TopicAnchor(BaseModel):
    """A thread of conversation that may run across sessions."""

    model_config = _MODEL

    id: str
    label: str
    keywords: list[str] = Field(default_factory=list)
    participants: list[str] = Field(default_factory=list)
    sessions: list[str] = Field(default_factory=list, description="Sessions it spans, in time order.")
    arc: list[ArcSnapshot] = Field(
        default_factory=list, description="One snapshot per session, in time order."
    )
    key_facts: list[Fact] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
