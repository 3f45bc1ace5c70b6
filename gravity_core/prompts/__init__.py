"""Prompts for the LLM extractor: one module per task, each a pure builder plus its response model.

The registry is :class:`PromptLibrary`; :func:`default_prompts` returns GRAVITY's prompts, and
``default_prompts().with_override("events", my_builder)`` swaps one.
"""

from gravity_core.prompts.context import (
    DEFAULT_MAX_KNOWN_ENTITIES,
    DEFAULT_MAX_KNOWN_TOPICS,
    KnownEntity,
    KnownTopic,
    PromptContext,
    render_known_entities,
    render_known_topics,
    render_schema,
    render_utterances,
)
from gravity_core.prompts.entities import (
    EntityExtraction,
    ExtractedAttribute,
    ExtractedEntity,
    ExtractedRelation,
    build_entity_messages,
)
from gravity_core.prompts.events import EventExtraction, ExtractedEvent, build_event_messages
from gravity_core.prompts.fused import FusedExtraction, build_fused_messages
from gravity_core.prompts.injection import (
    ANCHORS_TAG,
    CONVERSATION_SUMMARIES,
    DEFAULT_INJECTION,
    DEFAULT_SUMMARY_INJECTION,
    ENTITY_PROFILES,
    EVENT_RECORDS,
    PRIORITY_INSTRUCTION,
    SUMMARIES_TAG,
    SUMMARY_INSTRUCTION,
    TOPIC_SUMMARIES,
    BlockTemplate,
    InjectionTemplate,
)
from gravity_core.prompts.outline import render_outline
from gravity_core.prompts.registry import (
    ENTITIES,
    EVENTS,
    FUSED,
    SUMMARIES,
    TOPICS,
    PromptBuilder,
    PromptLibrary,
    PromptTask,
    default_prompts,
)
from gravity_core.prompts.summaries import BatchSummary, build_summary_messages
from gravity_core.prompts.topics import ExtractedTopic, TopicExtraction, build_topic_messages

__all__ = [
    "ANCHORS_TAG",
    "CONVERSATION_SUMMARIES",
    "DEFAULT_INJECTION",
    "DEFAULT_MAX_KNOWN_ENTITIES",
    "DEFAULT_MAX_KNOWN_TOPICS",
    "DEFAULT_SUMMARY_INJECTION",
    "ENTITIES",
    "ENTITY_PROFILES",
    "EVENTS",
    "EVENT_RECORDS",
    "FUSED",
    "PRIORITY_INSTRUCTION",
    "SUMMARIES",
    "SUMMARIES_TAG",
    "SUMMARY_INSTRUCTION",
    "TOPICS",
    "TOPIC_SUMMARIES",
    "BatchSummary",
    "BlockTemplate",
    "EntityExtraction",
    "EventExtraction",
    "ExtractedAttribute",
    "ExtractedEntity",
    "ExtractedEvent",
    "ExtractedRelation",
    "ExtractedTopic",
    "FusedExtraction",
    "InjectionTemplate",
    "KnownEntity",
    "KnownTopic",
    "PromptBuilder",
    "PromptContext",
    "PromptLibrary",
    "PromptTask",
    "TopicExtraction",
    "build_entity_messages",
    "build_event_messages",
    "build_fused_messages",
    "build_summary_messages",
    "build_topic_messages",
    "default_prompts",
    "render_known_entities",
    "render_known_topics",
    "render_outline",
    "render_schema",
    "render_utterances",
]
