"""GravityMiddleware in a LangChain ``create_agent`` agent: each model call gets its user's anchors.

The agent is real (``langchain.agents.create_agent`` with a LangGraph checkpointer, a thread per
user); only the chat model is a stand-in: it calls a tool once per turn, then answers, and records
every input it is given. Each user's chat names words no other user's does (``Wombat<n>``,
``quokka<n>``), so another user's memory in a model input shows up as another user's mark.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from gravity_core.build import AnchorBuilder, BuildReport
from gravity_core.context.policy import ContextPolicy
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import AnchorStoreError, ConfigurationError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.prompts.injection import PRIORITY_INSTRUCTION
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.serving.users import UserKBs
from gravity_core.storage.store import AnchorStore
from gravity_core.text.tokens import TokenCounter
from gravity_langchain import ANCHORS_EVENT
from gravity_langchain.middleware import GravityMiddleware
from tests.core.serving.test_users import marks_of_others, offline, user_chat

SYSTEM = "You are Nova, a helpful assistant."
FACT = "Wombat1 swam in the quokka1 lake again with my cousin Zephyrine, who just moved to Tromso."
LATER = "Where did my cousin move to?"
SECOND = "What did Wombat2 do at the quokka2 lake?"
RUN_DAY = "2024-03-20"


@tool
def clock() -> str:
    """The time now."""
    return "half past nine"


class ToolCallingModel(BaseChatModel):
    """A tool-calling chat model stand-in: calls ``clock`` once per turn, then answers; keeps every input."""

    inputs: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "tool-calling-fake"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.inputs.append(list(messages))
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(f"Noted, it is {messages[-1].text}.")
        else:
            reply = AIMessage(
                "", tool_calls=[{"name": "clock", "args": {}, "id": f"call-{len(self.inputs)}"}]
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


@dataclass
class Context:
    """The run context of the agent: who asks, and (optionally) on which day."""

    user_id: str | None = None
    question_date: str | None = None


class SpyKBs(UserKBs):
    """UserKBs recording what it is asked and given (then doing it), optionally failing the first adds."""

    def __init__(self, *args: Any, failures: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.added: list[tuple[str, list[str]]] = []
        self.asked: list[tuple[str, str, date | None]] = []
        self.failures = failures

    def add(self, user_id: str, utterances: Any) -> BuildReport:
        turns = list(utterances)
        self.added.append((user_id, [u.id for u in turns]))
        if self.failures:
            self.failures -= 1
            raise AnchorStoreError("another build is writing this KB; wait for it to finish", path=user_id)
        return super().add(user_id, turns)

    def query(self, user_id: str, question: str, **kwargs: Any) -> AnchorContext:
        self.asked.append((user_id, question, kwargs.get("question_date")))
        return super().query(user_id, question, **kwargs)


class Events(BaseCallbackHandler):
    """Keeps the payload of every anchors event."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == ANCHORS_EVENT:
            self.seen.append(data)


def make_kbs(root: Path, nlp: Any, **kwargs: Any) -> SpyKBs:
    kbs = SpyKBs(root, embedder=HashingEmbedder(), extractor=offline(nlp), **kwargs)
    for n in (1, 2):
        UserKBs.add(kbs, f"u{n}", user_chat(n))
    return kbs


@pytest.fixture
def kbs(tmp_path: Path, nlp: Any) -> SpyKBs:
    return make_kbs(tmp_path / "users", nlp)


@pytest.fixture
def memory(kbs: SpyKBs) -> Iterator[GravityMiddleware]:
    with GravityMiddleware(users=kbs, ingest=True) as middleware:
        yield middleware


def make_agent(model: ToolCallingModel, middleware: GravityMiddleware) -> Any:
    return create_agent(
        model, [clock], system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver()
    )


def thread(user: str, **more: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"{user}-chat"}, **more}


def system_text(inputs: list[BaseMessage]) -> str:
    first = inputs[0]
    assert isinstance(first, SystemMessage)
    return first.text


def all_text(inputs: list[BaseMessage]) -> str:
    return "\n".join(m.text for m in inputs)


async def run(agent: Any, mode: str, text: str, user: str, context: Any, **config: Any) -> dict[str, Any]:
    inputs = {"messages": [HumanMessage(text)]}
    if mode == "async":
        return dict(await agent.ainvoke(inputs, thread(user, **config), context=context))
    return dict(agent.invoke(inputs, thread(user, **config), context=context))


# -- the done-when scenario --------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_three_turns_of_two_users_each_model_call_holds_only_its_users_anchors(
    kbs: SpyKBs, memory: GravityMiddleware, mode: str
) -> None:
    model = ToolCallingModel()
    agent = make_agent(model, memory)
    events = Events()
    turns = [
        (FACT, "u1", Context("u1", RUN_DAY), date(2024, 3, 20)),
        (SECOND, "u2", {"user_id": "u2"}, None),
        (LATER, "u1", Context("u1"), None),
    ]
    share = ContextPolicy().anchor_tokens(3000, QueryConfig().token_budget)
    calls_of: list[tuple[str, list[list[BaseMessage]]]] = []
    expected: list[AnchorContext] = []  # what the user's KB gives the question just before the turn
    for text, user, context, day in turns:
        expected.append(kbs.query(user, text, config=QueryConfig(token_budget=share), question_date=day))
        before = len(model.inputs)
        result = await run(agent, mode, text, user, context, callbacks=[events])
        assert result["messages"][-1].text == "Noted, it is half past nine."
        await memory.aflush() if mode == "async" else memory.flush()
        calls_of.append((user, model.inputs[before:]))

    # Two model calls per turn (before and after the tool), each with the user's anchors after the
    # agent's own system prompt, and nothing of the other user's.
    assert [len(calls) for _, calls in calls_of] == [2, 2, 2]
    for (user, calls), mark in zip(calls_of, ("Wombat1", "Wombat2", "Zephyrine"), strict=True):
        n = int(user[1])
        for inputs in calls:
            system = system_text(inputs)
            assert system.startswith(SYSTEM + "\n\n" + PRIORITY_INSTRUCTION)
            assert "<gravity_anchors>" in system and mark in system
            assert marks_of_others([all_text(inputs)], n) == set()
            if user == "u2":
                assert "Zephyrine" not in all_text(inputs) and "Tromso" not in all_text(inputs)

    # Turn 1's fact, ingested in the background, reached turn 3's anchors (not in turn 1's: it was new).
    assert "Zephyrine" not in system_text(calls_of[0][1][0])
    assert "Tromso" in system_text(calls_of[2][1][0])

    # One anchors event per model call, naming the user and the anchors the user's KB gives; the
    # system message holds exactly those anchors' blocks, after the agent's own prompt.
    assert [e["user_id"] for e in events.seen] == ["u1", "u1", "u2", "u2", "u1", "u1"]
    assert [e["question"] for e in events.seen] == [FACT, FACT, SECOND, SECOND, LATER, LATER]
    for turn, ((_, calls), given) in enumerate(zip(calls_of, expected, strict=True)):
        assert given.anchors
        for call, inputs in enumerate(calls):
            assert [a["id"] for a in events.seen[2 * turn + call]["anchors"]] == [a.id for a in given.anchors]
            assert system_text(inputs) == f"{SYSTEM}\n\n{given.text}"

    # Each message was handed to its user's KB once: the human turn and the answer with text.
    added = {user: [i for who, ids in kbs.added if who == user for i in ids] for user in ("u1", "u2")}
    assert len(added["u1"]) == 4 and len(set(added["u1"])) == 4 and len(added["u2"]) == 2
    stored = {user: kbs.builder(user).kb.utterances for user in ("u1", "u2")}
    assert set(added["u1"]) <= stored["u1"].keys() and len(stored["u1"]) == 4 + 4
    assert set(added["u2"]) <= stored["u2"].keys() and len(stored["u2"]) == 4 + 2
    assert not any("Zephyrine" in u.text for u in stored["u2"].values())
    # Turn 1's messages are dated by the run's question_date and filed under the thread.
    first = [stored["u1"][i] for i in added["u1"][:2]]
    assert {u.timestamp for u in first} == {datetime(2024, 3, 20, tzinfo=UTC)}
    assert {u.session for u in first} == {"u1-chat"} and first[0].text == FACT


# -- the run's user ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("context", "error"),
    [
        (None, r"names none: it expected the run context's 'user_id'.*context=\{'user_id'"),
        (Context(), r"names none: it expected the run context's 'user_id'"),
        ({"user_id": "../u2"}, r"user id '\.\./u2' cannot name a folder"),
        ({"user_id": 7}, "a user id must be a string"),
    ],
)
def test_a_run_without_a_valid_user_id_is_refused_before_the_model_is_called(
    kbs: SpyKBs, memory: GravityMiddleware, context: Any, error: str
) -> None:
    model = ToolCallingModel()
    agent = make_agent(model, memory)
    with pytest.raises(ConfigurationError, match=error):
        agent.invoke({"messages": [HumanMessage(SECOND)]}, thread("u2"), context=context)
    assert model.inputs == [] and kbs.asked == []


async def test_async_runs_are_refused_the_same_way(memory: GravityMiddleware) -> None:
    model = ToolCallingModel()
    with pytest.raises(ConfigurationError, match="names none"):
        await make_agent(model, memory).ainvoke({"messages": [HumanMessage(SECOND)]}, thread("u2"))
    assert model.inputs == []


# -- the event, the budget and the date --------------------------------------------------------


async def test_the_anchors_event_reaches_astream_events(kbs: SpyKBs) -> None:
    agent = make_agent(ToolCallingModel(), GravityMiddleware(users=kbs))
    seen = [
        event["data"]
        async for event in agent.astream_events(
            {"messages": [HumanMessage(SECOND)]}, thread("u2"), context={"user_id": "u2"}, version="v2"
        )
        if event["event"] == "on_custom_event" and event["name"] == ANCHORS_EVENT
    ]
    assert len(seen) == 2 and all(data["user_id"] == "u2" and data["question"] == SECOND for data in seen)
    share = ContextPolicy().anchor_tokens(3000, QueryConfig().token_budget)
    expected = kbs.query("u2", SECOND, config=QueryConfig(token_budget=share))
    assert expected.anchors and [a["id"] for a in seen[0]["anchors"]] == [a.id for a in expected.anchors]


@pytest.mark.parametrize("budget", [1200, 3000])
def test_the_anchors_fit_the_policys_share_of_the_budget(kbs: SpyKBs, budget: int) -> None:
    model = ToolCallingModel()
    events = Events()
    middleware = GravityMiddleware(users=kbs, token_budget=budget)
    make_agent(model, middleware).invoke(
        {"messages": [HumanMessage(SECOND)]}, thread("u2", callbacks=[events]), context={"user_id": "u2"}
    )
    share = ContextPolicy().anchor_tokens(budget, QueryConfig().token_budget)
    appended = system_text(model.inputs[0])[len(SYSTEM) + 2 :]
    tokens = TokenCounter().count(appended)
    assert 0 < tokens <= share and events.seen[0]["tokens"] == tokens
    unlimited = kbs.query("u2", SECOND, config=QueryConfig(token_budget=None))
    if budget == 1200:  # 200 tokens: fewer anchors than the KB would give
        assert len(events.seen[0]["anchors"]) < len(unlimited.anchors)


def test_a_budget_that_leaves_the_anchors_nothing_is_refused(kbs: SpyKBs) -> None:
    with pytest.raises(ConfigurationError, match="token_budget=800 leaves the anchors nothing"):
        GravityMiddleware(users=kbs, token_budget=800)


@pytest.mark.parametrize(
    ("context", "stamp", "expected"),
    [
        (Context("u1", "2024-04-02"), "2024-05-01T10:00:00Z", date(2024, 4, 2)),  # the run's date wins
        (Context("u1"), "2024-05-01T10:00:00Z", date(2024, 5, 1)),  # else the message's own time
        (Context("u1"), None, None),  # else the KB's latest day (the engine's default)
    ],
)
def test_the_question_is_dated_by_the_run_else_the_message(
    kbs: SpyKBs, context: Context, stamp: str | None, expected: date | None
) -> None:
    message = HumanMessage(LATER, additional_kwargs={"timestamp": stamp} if stamp else {})
    make_agent(ToolCallingModel(), GravityMiddleware(users=kbs)).invoke(
        {"messages": [message]}, thread("u1"), context=context
    )
    assert kbs.asked == [("u1", LATER, expected)] * 2


def test_without_a_system_prompt_the_anchors_are_the_system_message(kbs: SpyKBs) -> None:
    model = ToolCallingModel()
    agent = create_agent(model, [clock], middleware=[GravityMiddleware(users=kbs)])
    agent.invoke({"messages": [HumanMessage(SECOND)]}, context={"user_id": "u2"})
    assert system_text(model.inputs[0]).startswith(PRIORITY_INSTRUCTION) and "Wombat2" in system_text(
        model.inputs[0]
    )


# -- ingestion ---------------------------------------------------------------------------------


def test_a_failed_ingestion_is_logged_and_retried_with_the_next_turn(
    tmp_path: Path, nlp: Any, caplog: pytest.LogCaptureFixture
) -> None:
    kbs = make_kbs(tmp_path / "users", nlp, failures=1)
    with GravityMiddleware(users=kbs, ingest=True) as memory:
        agent = make_agent(ToolCallingModel(), memory)
        with caplog.at_level(logging.ERROR, logger="gravity_core.serving.turn_ingestion"):
            first = agent.invoke({"messages": [HumanMessage(FACT)]}, thread("u1"), context={"user_id": "u1"})
            memory.flush()
        assert first["messages"][-1].text == "Noted, it is half past nine."  # the agent answered anyway
        assert "could not add 2 turns to user u1's KB" in caplog.text
        agent.invoke({"messages": [HumanMessage(LATER)]}, thread("u1"), context={"user_id": "u1"})
        memory.flush()
    (_, failed), (_, retried) = kbs.added
    assert set(failed) < set(retried) and len(retried) == 4
    assert set(retried) <= kbs.builder("u1").kb.utterances.keys()


def test_turns_without_ingest_are_not_added(kbs: SpyKBs) -> None:
    agent = make_agent(ToolCallingModel(), GravityMiddleware(users=kbs))
    agent.invoke({"messages": [HumanMessage(FACT)]}, thread("u1"), context={"user_id": "u1"})
    assert kbs.added == [] and len(kbs.builder("u1").kb.utterances) == 4


def test_one_kb_with_its_builder_learns_from_the_turns(tmp_path: Path, nlp: Any) -> None:
    embedder = HashingEmbedder()
    builder = AnchorBuilder(
        OfflineExtractor(embedder, pipeline=nlp), embedder, store=AnchorStore(tmp_path / "kb")
    )
    builder.add(user_chat(1))
    engine = GravityEngine.from_dir(tmp_path / "kb", embedder=embedder)
    model = ToolCallingModel()
    with GravityMiddleware(engine, ingest=True, builder=builder, speakers={"user": "Ana"}) as memory:
        agent = make_agent(model, memory)
        agent.invoke({"messages": [HumanMessage(FACT)]}, thread("ana"))  # one KB: no user id needed
        memory.flush()
        agent.invoke({"messages": [HumanMessage(LATER)]}, thread("ana"))
    assert "Wombat1" in system_text(model.inputs[0]) and "Tromso" not in system_text(model.inputs[0])
    assert "Tromso" in system_text(model.inputs[-1])
    kept = AnchorStore(tmp_path / "kb").load().kb.utterances
    assert len(kept) == 4 + 4 and any(u.speaker == "Ana" and u.text == FACT for u in kept.values())


def test_flush_and_close_without_ingestion_do_nothing(kbs: SpyKBs) -> None:
    middleware = GravityMiddleware(users=kbs)
    assert middleware.flush(timeout=0) is True
    middleware.close()


# -- configuration -----------------------------------------------------------------------------


def test_misconfigurations_are_refused_by_name(kbs: SpyKBs, tmp_path: Path, nlp: Any) -> None:
    embedder = HashingEmbedder()
    in_memory = AnchorBuilder(OfflineExtractor(embedder, pipeline=nlp), embedder)
    in_memory.add(user_chat(1))
    engine = GravityEngine.from_builder(in_memory)
    with pytest.raises(ConfigurationError, match="exactly one of engine= .* or users="):
        GravityMiddleware()
    with pytest.raises(ConfigurationError, match="exactly one of engine= .* or users="):
        GravityMiddleware(engine, users=kbs)
    with pytest.raises(ConfigurationError, match="ingest=True with one engine needs builder="):
        GravityMiddleware(engine, ingest=True)
    with pytest.raises(ConfigurationError, match="would never serve the new turns"):
        GravityMiddleware(engine, ingest=True, builder=in_memory)
    with pytest.raises(ConfigurationError, match="builder= goes with one engine"):
        GravityMiddleware(users=kbs, ingest=True, builder=in_memory)
    with pytest.raises(ConfigurationError, match="builder= is only used with ingest=True"):
        GravityMiddleware(engine, builder=in_memory)
    with pytest.raises(ConfigurationError, match="must be a UserKBs"):
        GravityMiddleware(users=tmp_path)  # type: ignore[arg-type]


def test_importing_it_without_langchain_names_the_extra() -> None:
    script = (
        "import sys; sys.modules['langchain'] = None\n"
        "from gravity_core.errors import MissingDependencyError\n"
        "try:\n    import gravity_langchain.middleware\n"
        "except MissingDependencyError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "GravityMiddleware (LangChain agents) needs the 'langchain' package" in out.stdout
    assert "pip install 'gravity-memory[langchain]'" in out.stdout
