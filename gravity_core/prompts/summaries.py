"""A free-form summary per batch: the '+Sum' baseline GRAVITY's anchors are compared with."""

from __future__ import annotations

from pydantic import BaseModel, Field

from gravity_core.llm.base import Message
from gravity_core.prompts._coerce import StrList
from gravity_core.prompts.context import PromptContext, render_schema, render_utterances, system_user

__all__ = [
    "BatchSummary",
    "SUMMARY_SYSTEM",
    "SUMMARY_USER",
    "build_summary_messages",
]


class BatchSummary(BaseModel):
    """Answer of the summary task."""

    summary: str = Field(
        description="A factual summary of the conversation excerpt that keeps names, dates, places "
        "and decisions, in at most 8 sentences."
    )
    sources: StrList = Field(description="Ids of the utterances the summary draws on.")


SUMMARY_SYSTEM = (
    "You write concise, factual summaries of conversations that will serve as long-term memory. "
    "You answer with one JSON object and nothing else."
)

SUMMARY_USER = """\
<CONVERSATION>
{utterances}
</CONVERSATION>

Summarize the conversation above so that someone who did not read it can answer questions about \
it later: who said what about whom, what happened and when (write time phrases as they were said, \
with the date of the utterance), plans, preferences and changes. List in "sources" the ids, \
exactly as shown in square brackets (e.g. "{example_id}"), of the utterances the summary uses.

Answer with a JSON object that follows this JSON schema:
{schema}"""


def build_summary_messages(context: PromptContext) -> list[Message]:
    """Messages for the summary task.

    Args:
        context: the batch (known entities and topics are not used).

    Returns:
        A system and a user message; the answer fills :class:`BatchSummary`.
    """
    user = SUMMARY_USER.format(
        utterances=render_utterances(context.utterances),
        example_id=context.example_id,
        schema=render_schema(BatchSummary),
    )
    return system_user(SUMMARY_SYSTEM, user)
