"""SGMem: the generated-memory prompt (session summary, facts, insights) and the context layout.

One request per session: the model reads the session's utterances and answers with a
:class:`SessionMemories` object. The layout of a retrieved SGMem context is defined here too, so
the wording lives with the other prompt text::

    # Memories
    - (summary, session_3) Caroline told Melanie about ...
    - (fact, session_3) Caroline went to an LGBTQ support group on 7 May 2023. [D3:2]
    # Conversation excerpts
    [D3:2] (8 May 2023) Caroline: I went to a support group yesterday.
    [D3:3] (8 May 2023) Melanie: ...

Chunks are separated by a blank line; empty sections are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from gravity_core.llm.base import Message
from gravity_core.prompts._coerce import StrList
from gravity_core.prompts.context import render_schema, render_utterances, system_user
from gravity_core.schema import Utterance

__all__ = [
    "EXCERPTS_HEADER",
    "MEMORIES_HEADER",
    "SESSION_MEMORIES_SYSTEM",
    "SESSION_MEMORIES_USER",
    "MemoryItem",
    "SessionMemories",
    "build_session_memory_messages",
    "render_memory_line",
    "render_turn_line",
]


class MemoryItem(BaseModel):
    """One fact or insight, with the utterances it rests on."""

    text: str = Field(description="One self-contained sentence that names people, places and dates.")
    sources: StrList = Field(
        default_factory=list, description="Ids of the utterances it comes from, as shown in brackets."
    )


class SessionMemories(BaseModel):
    """Answer of the session-memory task."""

    summary: str = Field(
        description="A factual summary of the session in at most 6 sentences: who said what about "
        "whom, what happened and when, plans and decisions."
    )
    facts: list[MemoryItem] = Field(
        default_factory=list,
        description="At most 15 atomic facts stated in the session, each understandable alone.",
    )
    insights: list[MemoryItem] = Field(
        default_factory=list,
        description="At most 5 insights about the speakers (preferences, traits, goals, recurring "
        "themes) that the session supports.",
    )


SESSION_MEMORIES_SYSTEM = (
    "You turn one session of a long conversation into memories for later questions: a summary, "
    "atomic facts and insights about the speakers. Every fact and insight cites the ids of the "
    "utterances it comes from. You answer with one JSON object and nothing else."
)

SESSION_MEMORIES_USER = """\
<SESSION>
{utterances}
</SESSION>

Write the memories of the session above so that someone who never read it can answer questions \
about it later.
- "summary": what the session is about, who said what about whom, what happened and when.
- "facts": atomic facts, one per item, in full sentences that name the person (never "I" or \
"she") and give dates: write a time phrase as it was said together with the date of the \
utterance, e.g. "last week (said on 8 May 2023)".
- "insights": what the session shows about the speakers' preferences, traits, goals or plans.
In "sources", list the ids exactly as shown in square brackets (e.g. "{example_id}").

Answer with a JSON object that follows this JSON schema:
{schema}"""

MEMORIES_HEADER = "# Memories"
"""Title line of the generated memories in a retrieved context."""

EXCERPTS_HEADER = "# Conversation excerpts"
"""Title line of the retrieved dialogue chunks in a retrieved context."""


def build_session_memory_messages(utterances: Sequence[Utterance]) -> list[Message]:
    """Messages asking for the memories of one session.

    Args:
        utterances: the session's utterances, in order.

    Returns:
        A system and a user message; the answer fills :class:`SessionMemories`.
    """
    example = utterances[0].id if utterances else "D1:1"
    user = SESSION_MEMORIES_USER.format(
        utterances=render_utterances(utterances),
        example_id=example,
        schema=render_schema(SessionMemories),
    )
    return system_user(SESSION_MEMORIES_SYSTEM, user)


def render_turn_line(utterance_id: str, day: str, speaker: str, text: str) -> str:
    """One dialogue line of a retrieved chunk: ``[id] (day) speaker: text`` on a single line."""
    flat = " ".join(text.split())
    return f"[{utterance_id}] ({day}) {speaker}: {flat}"


def render_memory_line(kind: str, session: str, text: str) -> str:
    """One generated memory in a retrieved context: ``- (kind, session) text``."""
    flat = " ".join(text.split())
    return f"- ({kind}, {session}) {flat}"
