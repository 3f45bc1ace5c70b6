"""Entity profiles: who and what the conversation mentions, their attributes and relations."""

from __future__ import annotations

from pydantic import BaseModel, Field

from gravity_core.llm.base import Message
from gravity_core.prompts._coerce import LenientEntityType, OptionalText, StrList
from gravity_core.prompts.context import (
    PromptContext,
    render_known_entities,
    render_schema,
    render_utterances,
    system_user,
)
from gravity_core.schema import EntityType

__all__ = [
    "ENTITY_EXTRACTION_SYSTEM",
    "ENTITY_EXTRACTION_USER",
    "ENTITY_GUIDELINES",
    "EntityExtraction",
    "ExtractedAttribute",
    "ExtractedEntity",
    "ExtractedRelation",
    "build_entity_messages",
]


class ExtractedAttribute(BaseModel):
    """One attribute value of an entity."""

    name: str = Field(
        description="Attribute name in snake_case, e.g. 'occupation', 'location', 'relationship_status', "
        "'hobby', 'favorite_food'."
    )
    value: str = Field(description="Short, specific value, e.g. 'counselor' or 'Boston'.")
    exclusive: bool = Field(
        default=False,
        description="true if only one value holds at a time (occupation, location, "
        "relationship_status, age, ...): a new value replaces the old one. false when values "
        "accumulate (hobbies, likes, skills).",
    )
    confidence: float = Field(
        default=0.7, description="Certainty from 0 to 1: how sure the conversation makes this."
    )
    sources: StrList = Field(description="Ids of the utterances that state it, e.g. ['D1:3'].")


class ExtractedRelation(BaseModel):
    """A relation from an entity to another entity or a value."""

    relation: str = Field(
        description="Relation type in snake_case, read as '<entity> <relation> <object>', "
        "e.g. 'sister_of', 'friend_of', 'owns', 'works_at', 'member_of'."
    )
    object: str = Field(description="The related entity's name, or a literal value.")
    object_type: LenientEntityType | None = Field(
        default=None, description="Type of the related entity, if it is one."
    )
    when: OptionalText = Field(
        default=None,
        description="Time phrase exactly as written, if the relation is dated (e.g. 'since 2019', "
        "'last year'); null otherwise.",
    )
    confidence: float = Field(
        default=0.7, description="Certainty from 0 to 1: how sure the conversation makes this."
    )
    sources: StrList = Field(description="Ids of the utterances that state it.")


class ExtractedEntity(BaseModel):
    """Profile of one entity as seen in this part of the conversation."""

    name: str = Field(
        description="Canonical name; reuse the exact name of a known entity when it is the same one."
    )
    type: LenientEntityType = Field(
        default=EntityType.OTHER,
        description="One of: " + ", ".join(t.value for t in EntityType) + ".",
    )
    aliases: StrList = Field(
        default_factory=list, description="Other names for it in the conversation (nicknames, 'my mom')."
    )
    is_speaker: bool = Field(default=False, description="true if it is one of the speakers.")
    attributes: list[ExtractedAttribute] = Field(
        default_factory=list, description="Facts about the entity itself."
    )
    relations: list[ExtractedRelation] = Field(
        default_factory=list, description="Links to other entities or values."
    )
    sources: StrList = Field(description="Ids of every utterance that mentions it.")


class EntityExtraction(BaseModel):
    """Answer of the entity task."""

    entities: list[ExtractedEntity] = Field(
        description="Every entity mentioned in the conversation; an empty list if there is none."
    )


ENTITY_EXTRACTION_SYSTEM = (
    "You build profiles of the people, pets, places, organizations, activities, objects and works "
    "mentioned in a conversation: their types, attributes and relations. Every item you report "
    "cites the ids of the utterances it comes from. You answer with one JSON object and nothing else."
)

ENTITY_GUIDELINES = """\
Entities:
- The speakers and whoever and whatever they mention that is worth remembering; no generic nouns.
- A known entity keeps its exact known name; a new nickname goes in aliases.
- Each relation once, on the entity it starts from (Caroline sister_of Anna goes under Caroline).
- Only what the utterances say or clearly imply."""

ENTITY_EXTRACTION_USER = """\
<KNOWN ENTITIES>
{known_entities}
</KNOWN ENTITIES>

<CONVERSATION>
{utterances}
</CONVERSATION>

Extract the entities mentioned in the conversation above.

{guidelines}
- Every "sources" list holds ids exactly as shown in square brackets, e.g. "{example_id}", and only \
ids of utterances that support the item.

Answer with a JSON object that follows this JSON schema:
{schema}"""


def build_entity_messages(context: PromptContext) -> list[Message]:
    """Messages for the entity task.

    Args:
        context: the batch and what the KB already knows.

    Returns:
        A system and a user message; the answer fills :class:`EntityExtraction`.
    """
    user = ENTITY_EXTRACTION_USER.format(
        known_entities=render_known_entities(context.known_entities),
        utterances=render_utterances(context.utterances),
        guidelines=ENTITY_GUIDELINES,
        example_id=context.example_id,
        schema=render_schema(EntityExtraction),
    )
    return system_user(ENTITY_EXTRACTION_SYSTEM, user)
