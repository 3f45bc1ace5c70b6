"""Events in 4W1O form: who did what, when, where, with what outcome."""

from __future__ import annotations

from pydantic import BaseModel, Field

from gravity_core.llm.base import Message
from gravity_core.prompts._coerce import OptionalText, StrList
from gravity_core.prompts.context import (
    PromptContext,
    render_known_entities,
    render_schema,
    render_utterances,
    system_user,
)

__all__ = [
    "EVENT_EXTRACTION_SYSTEM",
    "EVENT_EXTRACTION_USER",
    "EVENT_GUIDELINES",
    "EventExtraction",
    "ExtractedEvent",
    "build_event_messages",
]


class ExtractedEvent(BaseModel):
    """One event reported in the conversation."""

    who: StrList = Field(description="Names of the participants; reuse known entity names.")
    what: str = Field(description="What happened, as a short self-contained sentence.")
    when: OptionalText = Field(
        default=None,
        description="The time phrase exactly as written, e.g. 'yesterday', 'last Friday', "
        "'in June 2022', 'two weeks ago'; null if the conversation gives none. Do not compute a date.",
    )
    where: OptionalText = Field(default=None, description="Where it happened, if stated; else null.")
    outcome: OptionalText = Field(
        default=None, description="Its result or consequence, if stated; else null."
    )
    sources: StrList = Field(
        description="Ids of the utterances that report it; the one with the time phrase first."
    )


class EventExtraction(BaseModel):
    """Answer of the event task."""

    events: list[ExtractedEvent] = Field(
        description="Every event reported in the conversation; an empty list if there is none."
    )


EVENT_EXTRACTION_SYSTEM = (
    "You extract the events reported in a conversation as records of who, what, when, where and "
    "outcome. Every event cites the ids of the utterances it comes from. You answer with one JSON "
    "object and nothing else."
)

EVENT_GUIDELINES = """\
Events:
- Something that happened, happens or is planned (a trip, a purchase, a decision, a milestone); not \
opinions or standing facts. One record per event.
- who: names, also for a speaker who says "I"; reuse known names.
- when: the time phrase copied word for word ("yesterday", "in 2019"), never turned into a date; \
null if none."""

EVENT_EXTRACTION_USER = """\
<KNOWN ENTITIES>
{known_entities}
</KNOWN ENTITIES>

<CONVERSATION>
{utterances}
</CONVERSATION>

Extract the events reported in the conversation above.

{guidelines}
- Every "sources" list holds ids exactly as shown in square brackets, e.g. "{example_id}", and only \
ids of utterances that support the item.

Answer with a JSON object that follows this JSON schema:
{schema}"""


def build_event_messages(context: PromptContext) -> list[Message]:
    """Messages for the event task.

    Args:
        context: the batch and what the KB already knows.

    Returns:
        A system and a user message; the answer fills :class:`EventExtraction`.
    """
    user = EVENT_EXTRACTION_USER.format(
        known_entities=render_known_entities(context.known_entities),
        utterances=render_utterances(context.utterances),
        guidelines=EVENT_GUIDELINES,
        example_id=context.example_id,
        schema=render_schema(EventExtraction),
    )
    return system_user(EVENT_EXTRACTION_SYSTEM, user)
