"""A LangChain agent (``create_agent``) with GRAVITY as its long-term memory: ``GravityMiddleware``.

Nova is Maya's assistant. Maya's memory is the KB of her chats with Jonas (examples/sample_conversation.jsonl,
January to June 2024). The agent is LangChain's own ``create_agent`` with a tool and a checkpointer;
``GravityMiddleware`` does two things around it:

- before every model call, it asks the KB about Maya's latest message and appends the anchors to
  Nova's system prompt, within the anchors' share of a token budget;
- after every run (``ingest=True``), it adds the run's new messages to the KB in a background
  thread. The engine follows the KB folder, so the next turn's anchors include what Maya just said,
  with no rebuild and no new engine.

The chat model is a stand-in that calls the ``today`` tool and then replies with a line it was
given; it records the system message of each call, so the recipe prints what reached the model. A
real model replaces it in one line. For many users, give ``GravityMiddleware(users=UserKBs(root),
ingest=True)`` and pass ``context={"user_id": ...}`` per run: each user gets their own KB.

Run from anywhere (offline, about 20 s):

    python cookbook/langchain_agent.py
    python cookbook/langchain_agent.py --workdir /tmp/agent   # keep the KB to inspect it
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import MiniLMEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.engine import GravityEngine
from gravity_core.storage.store import AnchorStore
from gravity_langchain.middleware import GravityMiddleware

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample_conversation.jsonl"
TODAY = "2024-06-10"  # two days after the last chat in the sample
SYSTEM = "You are Nova, Maya's assistant. Answer from what you remember about her."

# Maya's messages, and the replies the stand-in model gives (a real model writes its own).
TURNS = [
    ("Which hospital do I work at now?", "You are a nurse at Harbourside Children's Hospital in Bristol."),
    (
        "I signed Biscuit up for a puppy agility course at Clifton Downs yesterday.",
        "Lovely! Agility at Clifton Downs, noted.",
    ),
    ("What did I sign Biscuit up for?", "A puppy agility course at Clifton Downs, yesterday."),
]


@dataclass
class Run:
    """What each run tells the agent besides the messages: the day it is asked."""

    question_date: str


@tool
def today() -> str:
    """Today's date."""
    return TODAY


class StandInModel(BaseChatModel):
    """Calls ``today`` once per turn, then gives the next prepared reply; keeps each call's system message."""

    replies: list[str]
    systems: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "stand-in"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.systems.append(messages[0].text)
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(self.replies.pop(0))
        else:
            reply = AIMessage(
                "", tool_calls=[{"name": "today", "args": {}, "id": f"call-{len(self.systems)}"}]
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def anchor_lines(system: str) -> list[str]:
    """The anchor items GRAVITY appended to the system prompt (profiles, events, topics), shortened."""
    _, _, anchors = system.partition("<gravity_anchors>")
    return [line[:120] for line in anchors.splitlines() if line.startswith("- ")]


def counts(builder: AnchorBuilder) -> dict[str, int]:
    kb = builder.kb
    return {"turns": len(kb.utterances), "entities": len(kb.entities), "events": len(kb.events)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workdir", type=Path, help="keep the KB here (default: a temp folder)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="gravity-agent-") as tmp:
        kb_dir = (args.workdir or Path(tmp)) / "kb"

        # Maya's KB, and an engine that follows its folder (it serves each new version at its next query).
        embedder = MiniLMEmbedder()
        builder = AnchorBuilder(OfflineExtractor(embedder), embedder, store=AnchorStore(kb_dir))
        builder.add(load_conversation(SAMPLE))
        engine = GravityEngine.from_dir(kb_dir, embedder=embedder)
        print(f"Maya's KB: {counts(builder)}")

        model = StandInModel(replies=[reply for _, reply in TURNS])
        # real: model = ChatOpenAI(model="gpt-4o-mini")
        memory = GravityMiddleware(engine, ingest=True, builder=builder, speakers={"user": "Maya"})
        agent = create_agent(
            model,
            [today],
            system_prompt=SYSTEM,
            middleware=[memory],
            context_schema=Run,
            checkpointer=InMemorySaver(),
        )

        with memory:  # close() at the end waits for the last ingestion
            for number, (text, _) in enumerate(TURNS, start=1):
                before = counts(builder)
                calls = len(model.systems)
                result = agent.invoke(
                    {"messages": [HumanMessage(text)]},
                    {"configurable": {"thread_id": "maya"}},
                    context=Run(question_date=TODAY),
                )
                memory.flush()  # only so the counts below include this turn; the agent never waits
                after = counts(builder)
                system = model.systems[calls]
                print(f"\nturn {number}, Maya: {text}")
                print(f"  system prompt kept first: {system.startswith(SYSTEM)}")
                print(f"  anchors that reached the model ({len(model.systems) - calls} calls):")
                for line in anchor_lines(system):
                    print(f"    {line}")
                print(f"  Nova: {result['messages'][-1].text}")
                growth = ", ".join(f"{k} {after[k]} (+{after[k] - before[k]})" for k in after)
                print(f"  KB after the turn: {growth}; engine serves generation {engine.generation}")


if __name__ == "__main__":
    main()
