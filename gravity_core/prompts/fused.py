"""Entities, events and topics in one call: the cheaper 'fused' extraction mode."""

from __future__ import annotations

from pydantic import BaseModel, Field

from gravity_core.llm.base import Message
from gravity_core.prompts.context import (
    PromptContext,
    render_known_entities,
    render_known_topics,
    render_utterances,
    system_user,
)
from gravity_core.prompts.entities import ENTITY_GUIDELINES, ExtractedEntity
from gravity_core.prompts.events import EVENT_GUIDELINES, ExtractedEvent
from gravity_core.prompts.outline import render_outline
from gravity_core.prompts.topics import TOPIC_GUIDELINES, ExtractedTopic

__all__ = [
    "FUSED_EXTRACTION_SYSTEM",
    "FUSED_EXTRACTION_USER",
    "FusedExtraction",
    "build_fused_messages",
]


class FusedExtraction(BaseModel):
    """Answer of the fused task: the three module answers in one object."""

    entities: list[ExtractedEntity] = Field(
        description="Every entity mentioned; an empty list if there is none."
    )
    events: list[ExtractedEvent] = Field(description="Every event reported; an empty list if there is none.")
    topics: list[ExtractedTopic] = Field(description="The topics discussed; an empty list if there is none.")


FUSED_EXTRACTION_SYSTEM = (
    "You turn a conversation into structured memory: entities, events and topics, each citing the "
    "utterances it comes from. You answer with one JSON object and nothing else."
)

FUSED_EXTRACTION_USER = """\
<KNOWN TOPICS>
{known_topics}
</KNOWN TOPICS>

<KNOWN ENTITIES>
{known_entities}
</KNOWN ENTITIES>

<CONVERSATION>
{utterances}
</CONVERSATION>

Extract the entities, events and topics of the conversation above. Every "sources" list holds ids \
exactly as shown in brackets (e.g. "{example_id}"), only of utterances that support the item.

{entity_guidelines}

{event_guidelines}

{topic_guidelines}

Answer with one JSON object of this shape (field?: optional, = its default):
{schema}"""


def build_fused_messages(context: PromptContext) -> list[Message]:
    """Messages for the fused task.

    Args:
        context: the batch and what the KB already knows.

    Returns:
        A system and a user message; the answer fills :class:`FusedExtraction`.
    """
    user = FUSED_EXTRACTION_USER.format(
        known_topics=render_known_topics(context.known_topics),
        known_entities=render_known_entities(context.known_entities),
        utterances=render_utterances(context.utterances),
        entity_guidelines=ENTITY_GUIDELINES,
        event_guidelines=EVENT_GUIDELINES,
        topic_guidelines=TOPIC_GUIDELINES,
        example_id=context.example_id,
        schema=render_outline(FusedExtraction),
    )
    return system_user(FUSED_EXTRACTION_SYSTEM, user)
