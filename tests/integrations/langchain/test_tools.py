"""GRAVITY's memory tools in a LangChain agent (``create_agent``, a scripted chat model): what the
model is offered, what a tool call returns to it, bad arguments as tool errors, one user per call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool
from langchain_core.vectorstores import InMemoryVectorStore
from pydantic import Field

from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.prompts.injection import PRIORITY_INSTRUCTION
from gravity_core.query.engine import GravityEngine
from gravity_core.serving.users import UserKBs
from gravity_langchain import GravityEmbeddings
from gravity_langchain.tools import TOOL_NAMES, gravity_tools
from tests.core.serving.test_users import MARK, marks_of_others, user_chat


class ScriptedModel(BaseChatModel):
    """A tool-calling chat model that answers with ``script`` in turn and records what it was sent."""

    script: list[AIMessage]
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    offered: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        self.offered = [tool.name for tool in tools]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.script[len(self.seen) - 1])])


def calls(tool: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": tool, "args": args, "id": f"call-{tool}"}])


def run_agent(tools: list[BaseTool], call: AIMessage, **invoke: Any) -> tuple[ScriptedModel, ToolMessage]:
    """One tool call, then a final answer; the model and the tool's message."""
    model = ScriptedModel(script=[call, AIMessage(content="done")])
    agent = create_agent(model, tools=tools, context_schema=invoke.pop("context_schema", None))
    result = agent.invoke({"messages": [("user", "What do you remember?")]}, **invoke)
    [message] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert result["messages"][-1].content == "done"  # the loop went on after the tool
    assert model.seen[1][-1] == message  # the model got the tool's answer
    return model, message


@pytest.fixture
def tools(engine: GravityEngine) -> list[BaseTool]:
    return gravity_tools(engine)


def test_the_model_is_offered_four_described_tools(tools: list[BaseTool]) -> None:
    assert [tool.name for tool in tools] == list(TOOL_NAMES)
    schemas = {tool.name: tool.tool_call_schema.model_json_schema() for tool in tools}
    assert set(schemas["search_memory"]["properties"]) == {"query", "question_date"}
    assert set(schemas["entity_profile"]["properties"]) == {"name"}
    assert set(schemas["timeline"]["properties"]) == {"person", "start", "end", "limit"}
    assert set(schemas["topic_arc"]["properties"]) == {"topic"}
    for schema in schemas.values():
        assert "runtime" not in schema["properties"]  # injected, never the model's to set
        assert len(schema["description"]) > 60 and "\n" not in schema["description"]
        assert all(field.get("description") for field in schema["properties"].values())


def test_an_agent_s_tool_call_returns_the_profile_to_the_model(tools: list[BaseTool]) -> None:
    model, message = run_agent(tools, calls("entity_profile", name="maya"))
    assert model.offered == list(TOOL_NAMES)
    assert message.status == "success"
    assert message.content.startswith(PRIORITY_INSTRUCTION)
    assert "- Maya (person, speaker)" in message.content and "occupation: nurse" in message.content


def test_a_timeline_call_returns_the_dated_events(tools: list[BaseTool]) -> None:
    _, message = run_agent(tools, calls("timeline", person="Maya", start="2024-03-01", end="2024-03-31"))
    assert "<event_records>" in message.content
    assert message.content.index("signed the lease") < message.content.index("handed in my notice")


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (
            calls("timeline", start="2024-05-01", end="2024-04-01"),
            "start (2024-05-01) is after end (2024-04-01)",
        ),
        (calls("timeline", start="last week"), "start must be a date as YYYY-MM-DD, got 'last week'"),
        (calls("timeline", limit=0), "limit must be an int of at least 1, got 0"),
        (calls("entity_profile", name="  "), "name must not be empty"),
        (calls("search_memory", query="Maya", question_date="soon"), "question_date must be a date"),
    ],
)
def test_bad_arguments_come_back_as_tool_errors(tools: list[BaseTool], call: AIMessage, error: str) -> None:
    _, message = run_agent(tools, call)
    assert message.status == "error"
    assert error in message.content


def test_arguments_of_the_wrong_type_are_reported_too(tools: list[BaseTool]) -> None:
    timeline = tools[TOOL_NAMES.index("timeline")]
    answer = timeline.invoke({"limit": "many"})
    assert answer.startswith("invalid arguments: limit: Input should be a valid integer")


async def test_the_tools_run_outside_an_agent_and_async(tools: list[BaseTool]) -> None:
    topic = tools[TOOL_NAMES.index("topic_arc")]
    assert "# Topic Summaries\n- wonky bowls / pottery |" in await topic.ainvoke({"topic": "pottery"})
    profile = tools[TOOL_NAMES.index("entity_profile")]
    assert profile.invoke({"name": "Zorro"}).startswith("No entity profile named 'Zorro'. Known names: ")


# -- the host's own memory --------------------------------------------------------------------


def test_search_memory_adds_the_host_s_documents_after_the_anchors(
    engine: GravityEngine, documents: list[Document], embedder: HashingEmbedder
) -> None:
    store = InMemoryVectorStore(GravityEmbeddings(embedder))
    store.add_documents(documents)
    search = gravity_tools(engine, retriever=store.as_retriever(search_kwargs={"k": 6}), token_budget=3000)[0]
    found = store.similarity_search("Where does Maya work now?", k=6)
    _, message = run_agent([search], calls("search_memory", query="Where does Maya work now?"))
    anchors, _, memories = message.content.partition("\n\n<retrieved_memories>\n")
    assert anchors.startswith(PRIORITY_INSTRUCTION) and "<gravity_anchors>" in anchors
    assert memories.startswith("# Retrieved Memories\n") and memories.count("\n- ") == len(found)
    assert all(document.page_content.split(": ", 1)[1][:40] in memories for document in found)
    # At the default 800 tokens the policy gives the anchors nothing: the host's documents fill it.
    small = gravity_tools(engine, retriever=store.as_retriever(search_kwargs={"k": 6}))[0]
    assert small.invoke({"query": "Where does Maya work now?"}).startswith("<retrieved_memories>")


# -- many users -------------------------------------------------------------------------------


@dataclass
class Context:
    user_id: str


@pytest.fixture(scope="module")
def users(tmp_path_factory: pytest.TempPathFactory, nlp: Any) -> UserKBs:
    kbs = UserKBs(
        tmp_path_factory.mktemp("tools") / "users",
        embedder=HashingEmbedder(),
        extractor=lambda embedder, store: OfflineExtractor(embedder, pipeline=nlp),
    )
    for n in (1, 2, 3):
        kbs.add(f"u{n}", user_chat(n))
    return kbs


@pytest.mark.parametrize("context", [{"user_id": "u2"}, Context(user_id="u2")])
def test_each_call_reads_the_kb_of_the_user_in_the_runtime_context(users: UserKBs, context: Any) -> None:
    tools = gravity_tools(users=users)
    schema = Context if isinstance(context, Context) else None
    _, search = run_agent(
        tools, calls("search_memory", query="Wombat2 quokka2"), context=context, context_schema=schema
    )
    _, events = run_agent(tools, calls("timeline", limit=50), context=context, context_schema=schema)
    assert MARK.search(search.content) and MARK.search(events.content)
    assert not marks_of_others([search.content, events.content], 2)


@pytest.mark.parametrize(("context", "error"), [(None, "names none"), ({"user_id": "../u1"}, "user id")])
def test_a_call_without_a_good_user_id_fails_and_reads_no_kb(
    users: UserKBs, context: Any, error: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = gravity_tools(users=users)
    monkeypatch.setattr(users, "engine", lambda user_id: pytest.fail(f"the KB of {user_id!r} was read"))
    with pytest.raises(ConfigurationError, match=error):
        run_agent(tools, calls("entity_profile", name="Ana"), context=context)
    with pytest.raises(ConfigurationError, match="names none"):
        tools[0].invoke({"query": "Wombat1"})  # outside an agent: no runtime, no user


def test_each_user_s_host_documents_come_from_their_own_retriever(
    users: UserKBs, embedder: HashingEmbedder
) -> None:
    store = InMemoryVectorStore(GravityEmbeddings(embedder))
    for n in (1, 2, 3):
        store.add_documents(
            [
                Document(page_content=f"{u.speaker}: {u.text}", metadata={"user_id": f"u{n}"})
                for u in user_chat(n)
            ]
        )

    def own(user_id: str) -> BaseRetriever:
        keep: Callable[[Document], bool] = lambda doc: doc.metadata["user_id"] == user_id  # noqa: E731
        return store.as_retriever(search_kwargs={"k": 4, "filter": keep})

    tools = gravity_tools(users=users, retriever=own, token_budget=2000)
    _, message = run_agent(tools, calls("search_memory", query="Wombat3 lake"), context={"user_id": "u3"})
    assert "<retrieved_memories>" in message.content and MARK.search(message.content)
    assert not marks_of_others([message.content], 3)


def test_tools_that_cannot_keep_users_apart_are_refused(engine: GravityEngine, users: UserKBs) -> None:
    one_store = InMemoryVectorStore(GravityEmbeddings(HashingEmbedder())).as_retriever()
    with pytest.raises(ConfigurationError, match="would mix users"):
        gravity_tools(users=users, retriever=one_store)
    with pytest.raises(ConfigurationError, match="exactly one of engine"):
        gravity_tools(engine, users=users)
    with pytest.raises(ConfigurationError, match="exactly one of engine"):
        gravity_tools()
    with pytest.raises(ConfigurationError, match="BaseRetriever"):
        gravity_tools(engine, retriever=lambda user_id: one_store)  # type: ignore[arg-type]
