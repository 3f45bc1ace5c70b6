"""The data model: utterances in, anchors out."""

from gravity_core.schema.anchors import (
    AnchorKind,
    ArcSnapshot,
    Attribute,
    EntityAnchor,
    EntityType,
    EventAnchor,
    Fact,
    Relation,
    StateTransition,
    SummaryRecord,
    TopicAnchor,
    TrailLink,
)
from gravity_core.schema.kb import SCHEMA_VERSION, BuildInfo, FailedBatch, KnowledgeBase
from gravity_core.schema.time import Granularity, TimeRef
from gravity_core.schema.updates import (
    AnchorUpdate,
    AttributeObservation,
    EntityObservation,
    EventObservation,
    RelationObservation,
    SummaryObservation,
    TopicObservation,
)
from gravity_core.schema.utterance import Utterance

__all__ = [
    "SCHEMA_VERSION",
    "AnchorKind",
    "AnchorUpdate",
    "ArcSnapshot",
    "Attribute",
    "AttributeObservation",
    "BuildInfo",
    "EntityAnchor",
    "EntityObservation",
    "EntityType",
    "EventAnchor",
    "EventObservation",
    "Fact",
    "FailedBatch",
    "Granularity",
    "KnowledgeBase",
    "Relation",
    "RelationObservation",
    "StateTransition",
    "SummaryObservation",
    "SummaryRecord",
    "TimeRef",
    "TopicAnchor",
    "TopicObservation",
    "TrailLink",
    "Utterance",
]
