"""GravityMemoryBlock inside LlamaIndex Memory: anchors for the latest user message, writes ignored."""

from __future__ import annotations

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import Memory

from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_llamaindex import GravityMemoryBlock
from gravity_llamaindex.memory import latest_user_text

from .conftest import QUESTION


def _memory(engine: GravityEngine, session: str) -> Memory:
    return Memory.from_defaults(
        session_id=session, token_limit=8000, memory_blocks=[GravityMemoryBlock(engine)]
    )


async def test_memory_serves_the_anchors_for_the_latest_user_message(
    engine: GravityEngine, context: AnchorContext, engine_calls: list[str]
) -> None:
    memory = _memory(engine, "latest")
    await memory.aput(ChatMessage(role=MessageRole.USER, content="Where does Jonas work?"))
    await memory.aput(ChatMessage(role=MessageRole.ASSISTANT, content="At Fernleaf."))
    await memory.aput(ChatMessage(role=MessageRole.USER, content=QUESTION))
    messages = await memory.aget()
    system = messages[0]
    assert system.role == MessageRole.SYSTEM
    assert f"<gravity>\n{context.text}\n</gravity>" in (system.content or "")
    assert engine_calls == [QUESTION]
    assert [m.content for m in messages[1:]] == ["Where does Jonas work?", "At Fernleaf.", QUESTION]


async def test_the_input_of_aget_is_the_latest_user_message(
    engine: GravityEngine, context: AnchorContext
) -> None:
    memory = _memory(engine, "input")
    await memory.aput(ChatMessage(role=MessageRole.USER, content="Where does Jonas work?"))
    messages = await memory.aget(input=QUESTION)
    assert context.text in (messages[0].content or "")


async def test_without_a_user_message_the_block_adds_nothing(
    engine: GravityEngine, engine_calls: list[str]
) -> None:
    memory = _memory(engine, "empty")
    await memory.aput(ChatMessage(role=MessageRole.ASSISTANT, content="Hello! How can I help?"))
    messages = await memory.aget()
    assert [m.role for m in messages] == [MessageRole.ASSISTANT]
    assert engine_calls == []


async def test_writes_are_ignored(engine: GravityEngine, engine_calls: list[str]) -> None:
    block = GravityMemoryBlock(engine)
    assert block.name == "gravity" and not block.accept_short_term_memory
    await block.aput([ChatMessage(role=MessageRole.USER, content=QUESTION)])
    await block.aput([ChatMessage(role=MessageRole.USER, content=QUESTION)], from_short_term_memory=True)
    assert engine_calls == []


def test_latest_user_text() -> None:
    messages = [
        ChatMessage(role=MessageRole.USER, content="first"),
        ChatMessage(role=MessageRole.USER, content="second"),
        ChatMessage(role=MessageRole.USER, content="  "),
        ChatMessage(role=MessageRole.ASSISTANT, content="reply"),
    ]
    assert latest_user_text(messages) == "second"
    assert latest_user_text(None) == ""
