"""Topics: threads of conversation, summarized per session, that may continue across sessions."""

from __future__ import annotations

from pydantic import BaseModel, Field

from gravity_core.llm.base import Message
from gravity_core.prompts._coerce import OptionalText, StrList
from gravity_core.prompts.context import (
    PromptContext,
    render_known_entities,
    render_known_topics,
    render_schema,
    render_utterances,
    system_user,
)

__all__ = [
    "ExtractedTopic",
    "TOPIC_EXTRACTION_SYSTEM",
    "TOPIC_EXTRACTION_USER",
    "TOPIC_GUIDELINES",
    "TopicExtraction",
    "build_topic_messages",
]


class ExtractedTopic(BaseModel):
    """One topic as discussed in one session."""

    topic_id: OptionalText = Field(
        default=None,
        description="Id of the known topic this continues (e.g. 't3'), or null for a new topic.",
    )
    label: str = Field(description="Short label, 2 to 6 words.")
    keywords: StrList = Field(default_factory=list, description="3 to 8 keywords.")
    participants: StrList = Field(
        default_factory=list, description="Names of the speakers or entities involved."
    )
    summary: str = Field(description="What this session said about the topic, in 1 to 3 sentences.")
    facts: StrList = Field(
        default_factory=list,
        description="Key facts stated about it, each a short self-contained sentence.",
    )
    sources: StrList = Field(description="Ids of its utterances, all from the same session.")


class TopicExtraction(BaseModel):
    """Answer of the topic task."""

    topics: list[ExtractedTopic] = Field(
        description="The topics of the conversation; an empty list if there is none."
    )


TOPIC_EXTRACTION_SYSTEM = (
    "You follow the threads of a long conversation: you group utterances into topics, summarize "
    "what each session said about each topic, and link a topic to the same topic discussed "
    "earlier. Every topic cites the ids of the utterances it comes from. You answer with one JSON "
    "object and nothing else."
)

TOPIC_GUIDELINES = """\
Topics:
- A subject the speakers spend several turns on; not small talk.
- Continuing a known topic: set topic_id to its id and keep its label.
- One entry per topic and session."""

TOPIC_EXTRACTION_USER = """\
<KNOWN TOPICS>
{known_topics}
</KNOWN TOPICS>

<KNOWN ENTITIES>
{known_entities}
</KNOWN ENTITIES>

<CONVERSATION>
{utterances}
</CONVERSATION>

Identify the topics discussed in the conversation above.

{guidelines}
- Every "sources" list holds ids exactly as shown in square brackets, e.g. "{example_id}", and only \
ids of utterances that support the item.

Answer with a JSON object that follows this JSON schema:
{schema}"""


def build_topic_messages(context: PromptContext) -> list[Message]:
    """Messages for the topic task.

    Args:
        context: the batch and what the KB already knows (topics with their ids).

    Returns:
        A system and a user message; the answer fills :class:`TopicExtraction`.
    """
    user = TOPIC_EXTRACTION_USER.format(
        known_topics=render_known_topics(context.known_topics),
        known_entities=render_known_entities(context.known_entities),
        utterances=render_utterances(context.utterances),
        guidelines=TOPIC_GUIDELINES,
        example_id=context.example_id,
        schema=render_schema(TopicExtraction),
    )
    return system_user(TOPIC_EXTRACTION_SYSTEM, user)
