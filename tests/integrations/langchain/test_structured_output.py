"""LangChain chat models answer extraction prompts through structured output when they support it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage

from gravity_core.extract.llm import LLMExtractor
from gravity_core.schema import AnchorUpdate, KnowledgeBase, Utterance
from gravity_langchain import LangChainChatModel

BATCH = [
    Utterance(
        id="s1:1",
        speaker="Maya",
        text="I'm a nurse.",
        session="s1",
        timestamp=datetime(2024, 1, 8, tzinfo=UTC),
    )
]
GOOD = {
    "entities": [
        {
            "name": "Maya",
            "type": "person",
            "sources": ["s1:1"],
            "attributes": [{"name": "occupation", "value": "nurse", "exclusive": True, "sources": ["s1:1"]}],
        }
    ],
    "events": [],
    "topics": [],
}


class ToolCallingFake(GenericFakeChatModel):
    """A fake that 'supports tools': bind_tools returns itself, answers are tool calls."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolCallingFake:  # type: ignore[override]
        return self


def tool_answers(*args: dict[str, Any]) -> Iterator[AIMessage]:
    return iter(
        AIMessage(content="", tool_calls=[{"name": "FusedExtraction", "args": a, "id": f"call{n}"}])
        for n, a in enumerate(args)
    )


def extract(model: LangChainChatModel) -> AnchorUpdate:
    return LLMExtractor(model, fused=True).extract(BATCH, KnowledgeBase())


def test_tool_calling_model_fills_the_schema_through_structured_output() -> None:
    model = ToolCallingFake(messages=tool_answers(GOOD))
    update = LLMExtractor(LangChainChatModel(model, name="fake-tools"), fused=True).extract(
        BATCH, KnowledgeBase()
    )
    [maya] = update.entities
    assert (maya.attributes[0].name, maya.attributes[0].value) == ("occupation", "nurse")


def test_invalid_tool_arguments_are_re_asked() -> None:
    bad = {"entities": "not a list of entities", "events": 3}
    model = ToolCallingFake(messages=tool_answers(bad, GOOD))
    update = LLMExtractor(LangChainChatModel(model, name="fake-tools"), fused=True).extract(
        BATCH, KnowledgeBase()
    )
    assert [e.name for e in update.entities] == ["Maya"]


def test_model_without_structured_output_uses_the_json_prompt() -> None:
    model = FakeListChatModel(responses=[f"Here you go:\n```json\n{json.dumps(GOOD)}\n```"])
    update = LLMExtractor(LangChainChatModel(model, name="fake-text"), fused=True).extract(
        BATCH, KnowledgeBase()
    )
    assert [e.name for e in update.entities] == ["Maya"]
