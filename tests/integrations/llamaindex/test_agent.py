"""A LlamaIndex FunctionAgent with GRAVITY twice: the anchors in its Memory (GravityMemoryBlock) and the
memory tools. A scripted function-calling LLM stands in for the model and records every input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.core.memory import Memory

from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.serving.memory_tools import MemoryTools
from gravity_core.serving.users import UserKBs
from gravity_llamaindex import GravityMemoryBlock
from gravity_llamaindex.tools import gravity_tools
from tests.core.serving.test_users import MARK, marks_of_others, user_chat

from .conftest import QUESTION

ANSWER = "He has settled in well."

# FunctionAgent's workflow library walks the agent with inspect.getmembers, which touches pydantic's
# deprecated attributes: upstream noise, not GRAVITY's.
pytestmark = pytest.mark.filterwarnings(
    "ignore::pydantic.warnings.PydanticDeprecatedSince20",
    "ignore::pydantic.warnings.PydanticDeprecatedSince211",
)


class ScriptedReplies:
    """The model's side: each reply in turn (a tool call, then the answer), every input recorded."""

    def __init__(self, *replies: ChatMessage) -> None:
        self.replies = list(replies)
        self.inputs: list[list[ChatMessage]] = []

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.inputs.append(list(messages))
        return self.replies[len(self.inputs) - 1]

    def llm(self) -> MockFunctionCallingLLM:
        return MockFunctionCallingLLM(response_generator=self)


def tool_call(tool: str, **arguments: Any) -> ChatMessage:
    block = ToolCallBlock(tool_call_id=f"call-{tool}", tool_name=tool, tool_kwargs=arguments)
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=[block])


def answer(text: str = ANSWER) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


async def run(agent: FunctionAgent, memory: Memory, question: str) -> tuple[str, list[ToolCallResult]]:
    handler = agent.run(user_msg=question, memory=memory)
    results = [event async for event in handler.stream_events() if isinstance(event, ToolCallResult)]
    return str(await handler), results


def memory_of(block: GravityMemoryBlock, session: str) -> Memory:
    return Memory.from_defaults(session_id=session, token_limit=8000, memory_blocks=[block])


async def test_the_anchors_reach_the_llm_and_a_tool_call_returns_the_profile(
    engine: GravityEngine, context: AnchorContext
) -> None:
    model = ScriptedReplies(tool_call("entity_profile", name="Maya"), answer())
    agent = FunctionAgent(tools=gravity_tools(engine), llm=model.llm(), system_prompt="Answer from memory.")
    response, results = await run(agent, memory_of(GravityMemoryBlock(engine), "agent"), QUESTION)

    assert response == ANSWER
    first, second = model.inputs
    # The memory block: GRAVITY's anchors for the question, in the system message LlamaIndex builds.
    systems = [m.content or "" for m in first if m.role == MessageRole.SYSTEM]
    assert any(f"<memory>\n<gravity>\n{context.text}\n</gravity>" in text for text in systems)
    assert first[-1].role == MessageRole.USER and first[-1].content == QUESTION
    # The tool: Maya's profile, as the core tools render it, is what the model reads next.
    [result] = results
    assert result.tool_name == "entity_profile" and not result.tool_output.is_error
    profile = MemoryTools(engine).profile("Maya")
    assert "- Maya (person, speaker)" in profile
    assert second[-1].role == MessageRole.TOOL and second[-1].content == profile


async def test_a_bad_tool_call_is_answered_with_its_error_and_the_agent_goes_on(
    engine: GravityEngine,
) -> None:
    model = ScriptedReplies(tool_call("timeline", start="2024-05-01", end="2024-04-01"), answer("Sorry."))
    agent = FunctionAgent(tools=gravity_tools(engine), llm=model.llm())
    response, [result] = await run(
        agent, memory_of(GravityMemoryBlock(engine), "bad"), "What happened in spring?"
    )
    assert response == "Sorry."
    assert result.tool_output.is_error
    told = model.inputs[1][-1]
    assert told.role == MessageRole.TOOL
    assert "start (2024-05-01) is after end (2024-04-01)" in (told.content or "")


@pytest.fixture(scope="module")
def users(tmp_path_factory: pytest.TempPathFactory, nlp: Any) -> UserKBs:
    kbs = UserKBs(
        tmp_path_factory.mktemp("agent") / "users",
        embedder=HashingEmbedder(),
        extractor=lambda embedder, store: OfflineExtractor(embedder, pipeline=nlp),
    )
    for n in (1, 2):
        kbs.add(f"u{n}", user_chat(n))
    return kbs


async def test_one_user_s_agent_sees_only_that_user_s_memory(users: UserKBs) -> None:
    model = ScriptedReplies(tool_call("search_memory", query="Wombat2 quokka2 lake"), answer())
    agent = FunctionAgent(tools=gravity_tools(users=users, user_id="u2"), llm=model.llm())
    block = GravityMemoryBlock(users=users, user_id="u2")
    await run(agent, memory_of(block, "u2-session"), "Where did Wombat2 swim?")
    seen = [m.content or "" for messages in model.inputs for m in messages]
    assert MARK.search(seen[0] + seen[1])  # the memory block's anchors
    assert MARK.search(model.inputs[1][-1].content or "")  # the tool's answer
    assert not marks_of_others(seen, 2)
