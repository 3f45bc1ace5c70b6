"""A LlamaIndex agent with GRAVITY's memory twice: in its ``Memory``, and as tools it can call.

- ``GravityMemoryBlock`` in LlamaIndex ``Memory``: on every turn the anchors GRAVITY selects for the
  user's message (topic summaries, entity profiles, event records) go into the system message, as
  ``<memory><gravity>...</gravity></memory>``.
- ``gravity_tools(engine)``: four read-only tools the agent calls when it wants more, ``search_memory``,
  ``entity_profile``, ``timeline`` and ``topic_arc``; each answers with the same escaped blocks,
  within a token budget.

A ``FunctionAgent`` runs both. The LLM is an offline stand-in (LlamaIndex's
``MockFunctionCallingLLM`` with scripted replies): for each question it calls the tool a real model
would pick, then answers with the first line the tool gave back. The script prints what the LLM saw
(the memory block in its system message, the tool's answer) and what it answered.

Run from anywhere (offline, about 15 s):

    python cookbook/llamaindex_agent.py
    python cookbook/llamaindex_agent.py --question "Who is Femi?"   # answered through search_memory
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.core.memory import Memory

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import MiniLMEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.engine import GravityEngine
from gravity_llamaindex import GravityMemoryBlock
from gravity_llamaindex.tools import gravity_tools

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample_conversation.jsonl"
ITEM = re.compile(r"^- (.*)$", re.MULTILINE)

# The questions, with the tool call a real model would make for each.
QUESTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "Where does Maya work now?": ("entity_profile", {"name": "Maya"}),
    "What did Maya do in March 2024?": (
        "timeline",
        {"person": "Maya", "start": "2024-03-01", "end": "2024-03-31"},
    ),
    "How is the pottery going?": ("topic_arc", {"topic": "pottery"}),
}


class ScriptedModel:
    """Stands in for the LLM: calls the question's tool, then answers from the tool's first item.

    It keeps every input it gets, so the script can show what the agent sent.
    """

    def __init__(self, questions: dict[str, tuple[str, dict[str, Any]]]) -> None:
        self.questions = questions
        self.inputs: list[list[ChatMessage]] = []

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.inputs.append(list(messages))
        last = messages[-1]
        if last.role == MessageRole.TOOL:
            items = ITEM.findall(last.content or "")
            found = items[0] if items else (last.content or "nothing")
            return ChatMessage(role=MessageRole.ASSISTANT, content=f"From memory: {found}")
        tool, arguments = self.questions[last.content or ""]
        call = ToolCallBlock(tool_call_id=f"call-{len(self.inputs)}", tool_name=tool, tool_kwargs=arguments)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[call])


def shown(text: str, width: int = 110) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


async def ask(agent: FunctionAgent, memory: Memory, model: ScriptedModel, question: str) -> None:
    print(f"\nQ: {question}")
    before = len(model.inputs)
    handler = agent.run(user_msg=question, memory=memory)
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            arguments = ", ".join(f"{k}={v!r}" for k, v in event.tool_kwargs.items())
            print(f"  tool call:   {event.tool_name}({arguments})")
            for item in ITEM.findall(str(event.tool_output))[:4]:
                print(f"  tool result: - {shown(item)}")
    response = await handler
    # What the LLM got on its first call of this turn: GRAVITY's memory block in a system message.
    first = model.inputs[before]
    block = next((m.content or "" for m in first if "<gravity>" in (m.content or "")), "")
    profiles = block.partition("# Entity Profiles\n")[2].partition("</entity_profiles>")[0]
    print(f"  memory block in the system message: {len(ITEM.findall(block))} anchors")
    for item in ITEM.findall(profiles)[:2]:
        print(f"  memory block:  - {shown(item)}")
    print(f"  answer: {response}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--question", action="append", help="ask this instead, through search_memory (repeatable)"
    )
    args = parser.parse_args(argv)
    questions = {q: ("search_memory", {"query": q}) for q in args.question} if args.question else QUESTIONS

    # 1. The anchors, built offline in memory (AnchorStore(dir) would keep them, see the README).
    embedder = MiniLMEmbedder()
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder)
    builder.add(load_conversation(SAMPLE))
    engine = GravityEngine.from_builder(builder)

    # 2. The agent: GRAVITY in its Memory and as its tools.
    model = ScriptedModel(questions)
    llm = MockFunctionCallingLLM(
        response_generator=model
    )  # real: from llama_index.llms.openai import OpenAI; llm = OpenAI(model="gpt-4o-mini")  # noqa: E501
    agent = FunctionAgent(
        tools=gravity_tools(engine, token_budget=800),
        llm=llm,
        system_prompt="Answer from memory; call a memory tool when you need more.",
    )
    memory = Memory.from_defaults(
        session_id="maya-chat", token_limit=8000, memory_blocks=[GravityMemoryBlock(engine)]
    )

    async def chat() -> None:
        for question in questions:
            await ask(agent, memory, model, question)

    asyncio.run(chat())


if __name__ == "__main__":
    main()
