"""GRAVITY's memory tools as LlamaIndex FunctionTools: what the model is offered, what a call returns,
bad input, the host's own nodes after the anchors, and one user's KB per set of tools."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters

from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.prompts.injection import PRIORITY_INSTRUCTION
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.serving.memory_tools import TOOL_SPECS
from gravity_core.serving.users import UserKBs
from gravity_llamaindex import GravityEmbedding, nodes_from_utterances
from gravity_llamaindex.tools import TOOL_NAMES, gravity_tools
from tests.core.serving.test_users import MARK, marks_of_others, user_chat


def tool(tools: list[Any], name: str) -> Any:
    return tools[TOOL_NAMES.index(name)]


@pytest.fixture
def tools(engine: GravityEngine) -> list[Any]:
    return gravity_tools(engine)


def test_the_model_is_offered_the_four_tools_as_specified(tools: list[Any]) -> None:
    assert [t.metadata.name for t in tools] == list(TOOL_NAMES)
    for made, spec in zip(tools, TOOL_SPECS, strict=True):
        assert made.metadata.description == spec.description
        parameters = made.metadata.get_parameters_dict()["properties"]
        assert set(parameters) == set(spec.arguments.model_fields)
        assert all(field.get("description") for field in parameters.values())


def test_a_call_returns_the_profile_text(tools: list[Any]) -> None:
    output = tool(tools, "entity_profile").call(name="MAYA")
    assert not output.is_error
    assert output.content.startswith(PRIORITY_INSTRUCTION)
    assert "- Maya (person, speaker)" in output.content and "occupation: nurse" in output.content


async def test_an_async_call_returns_the_timeline(tools: list[Any]) -> None:
    output = await tool(tools, "timeline").acall(person="Maya", start="2024-03-01", end="2024-03-31")
    content = output.content
    assert "<event_records>" in content
    assert content.index("signed the lease") < content.index("handed in my notice")
    assert "ran the Eastville" not in content


def test_topic_arc_and_search(tools: list[Any]) -> None:
    assert (
        "# Topic Summaries\n- wonky bowls / pottery |"
        in tool(tools, "topic_arc").call(topic="pottery").content
    )
    found = tool(tools, "search_memory").call(query="Where does Maya work now?").content
    assert "<entity_profiles>" in found and "Harbourside" in found


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("entity_profile", {"name": ""}, "name must not be empty"),
        ("timeline", {"start": "2024-05-01", "end": "2024-04-01"}, r"start \(2024-05-01\) is after end"),
        ("timeline", {"limit": 0}, "limit must be an int of at least 1"),
        ("timeline", {"end": "next year"}, "end must be a date as YYYY-MM-DD"),
        ("search_memory", {"query": "   "}, "query must not be empty"),
        ("topic_arc", {"topic": 3}, "topic must be a string"),
    ],
)
def test_bad_input_raises_an_input_data_error(
    tools: list[Any], name: str, arguments: dict[str, Any], error: str
) -> None:
    with pytest.raises(InputDataError, match=error):
        tool(tools, name).call(**arguments)


def test_search_memory_adds_the_host_s_nodes_after_the_anchors(
    engine: GravityEngine, utterances: list[Utterance], hashing: HashingEmbedder
) -> None:
    index = VectorStoreIndex(nodes_from_utterances(utterances), embed_model=GravityEmbedding(hashing))
    retriever = index.as_retriever(similarity_top_k=5)
    search = tool(gravity_tools(engine, retriever=retriever, token_budget=3000), "search_memory")
    content = search.call(query="How is Biscuit settling in?").content
    anchors, _, memories = content.partition("\n\n<retrieved_memories>\n")
    assert anchors.startswith(PRIORITY_INSTRUCTION)
    nodes = retriever.retrieve("How is Biscuit settling in?")
    assert memories.count("\n- ") == len(nodes) == 5
    assert all(scored.node.get_content().split(": ", 1)[1][:40] in memories for scored in nodes)


# -- many users -------------------------------------------------------------------------------


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


def test_the_tools_of_a_user_read_only_that_user_s_kb(users: UserKBs) -> None:
    for n in (1, 3):
        tools = gravity_tools(users=users, user_id=f"u{n}")
        texts = [
            tool(tools, "search_memory").call(query=f"Wombat{n} lake").content,
            tool(tools, "timeline").call(limit=50).content,
        ]
        assert all(MARK.search(text) for text in texts)
        assert not marks_of_others(texts, n)


def test_each_user_s_nodes_come_from_their_own_retriever(users: UserKBs, hashing: HashingEmbedder) -> None:
    nodes = [
        TextNode(text=f"{u.speaker}: {u.text}", metadata={"user_id": f"u{n}"})
        for n in (1, 2, 3)
        for u in user_chat(n)
    ]
    index = VectorStoreIndex(nodes, embed_model=GravityEmbedding(hashing))

    def own(user_id: str) -> BaseRetriever:
        only = MetadataFilters(filters=[ExactMatchFilter(key="user_id", value=user_id)])
        return index.as_retriever(similarity_top_k=4, filters=only)

    search = tool(gravity_tools(users=users, user_id="u2", retriever=own, token_budget=2000), "search_memory")
    content = search.call(query="Wombat2 lake").content
    assert "<retrieved_memories>" in content and MARK.search(content)
    assert not marks_of_others([content], 2)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"users": True}, "name the user"),
        ({"users": True, "user_id": "../u1"}, "user id"),
        ({"engine": True, "user_id": "u1"}, "user_id names a user of users="),
        ({"engine": True, "users": True, "user_id": "u1"}, "exactly one of engine"),
        ({}, "exactly one of engine"),
        ({"users": True, "user_id": "u1", "retriever": "one"}, "would mix users"),
    ],
)
def test_tools_that_cannot_keep_users_apart_are_refused(
    engine: GravityEngine,
    users: UserKBs,
    hashing: HashingEmbedder,
    arguments: dict[str, Any],
    error: str,
) -> None:
    given: dict[str, Callable[[], Any]] = {
        "engine": lambda: engine,
        "users": lambda: users,
        "retriever": lambda: VectorStoreIndex([], embed_model=GravityEmbedding(hashing)).as_retriever(),
    }
    resolved = {key: given[key]() if key in given else value for key, value in arguments.items()}
    with pytest.raises(ConfigurationError, match=error):
        gravity_tools(**resolved)
