"""The anchors runnable, the prompt, the shared query cache and the one-call chain helper."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from gravity_core.errors import ConfigurationError
from gravity_core.prompts.injection import PRIORITY_INSTRUCTION
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_langchain import (
    GRAVITY_PROMPT,
    AnswerCache,
    GravityEmbeddings,
    build_gravity_chain,
    format_documents,
    gravity_anchors_runnable,
    gravity_prompt,
)
from tests.spies import count_queries

# -- the anchors runnable ----------------------------------------------------------------------


async def test_anchors_runnable_maps_a_string_or_a_dict_to_the_anchor_text(
    engine: GravityEngine, question: str
) -> None:
    expected = engine.query(question).text
    assert expected.startswith(PRIORITY_INSTRUCTION)
    runnable = gravity_anchors_runnable(engine)
    assert runnable.invoke(question) == expected
    assert runnable.invoke({"question": question, "other": 1}) == expected
    assert await runnable.ainvoke({"question": question}) == expected
    assert gravity_anchors_runnable(engine, question_key="input").invoke({"input": question}) == expected
    assert runnable.get_name() == "gravity_anchors"


def test_anchors_runnable_gives_empty_text_when_nothing_qualifies(engine: GravityEngine) -> None:
    assert gravity_anchors_runnable(engine).invoke("zzzz qqq") == ""


def test_anchors_runnable_uses_the_given_query_config(engine: GravityEngine, question: str) -> None:
    only_entities = QueryConfig(k_event=0, k_topic=0)
    text = gravity_anchors_runnable(engine, config=only_entities).invoke(question)
    assert "<entity_profiles>" in text
    assert "<event_records>" not in text
    assert "<topic_summaries>" not in text


@pytest.mark.parametrize("bad_input", [{"query": "x"}, {"question": 3}, 42])
def test_anchors_runnable_rejects_inputs_without_a_question(engine: GravityEngine, bad_input: Any) -> None:
    with pytest.raises(ConfigurationError):
        gravity_anchors_runnable(engine).invoke(bad_input)


def test_anchors_runnable_in_passthrough_assign_keeps_the_input(engine: GravityEngine, question: str) -> None:
    chain = RunnablePassthrough.assign(gravity_anchors=gravity_anchors_runnable(engine))
    out = chain.invoke({"question": question, "history": []})
    assert out == {"question": question, "history": [], "gravity_anchors": engine.query(question).text}


# -- prompt and documents ----------------------------------------------------------------------


def test_gravity_prompt_orders_memories_anchors_history_question() -> None:
    assert set(GRAVITY_PROMPT.input_variables) == {"context", "gravity_anchors", "question"}
    history = [HumanMessage("earlier question"), AIMessage("earlier answer")]
    messages = GRAVITY_PROMPT.invoke(
        {"context": "MEMORIES", "gravity_anchors": "ANCHORS", "question": "NOW?", "history": history}
    ).to_messages()
    assert isinstance(messages[0], SystemMessage)
    assert messages[0].content == "MEMORIES\n\nANCHORS"
    assert messages[1:3] == history
    assert isinstance(messages[3], HumanMessage)
    assert messages[3].content == "NOW?"
    # history is optional
    assert (
        len(GRAVITY_PROMPT.invoke({"context": "", "gravity_anchors": "", "question": "q"}).to_messages()) == 2
    )


def test_gravity_prompt_with_other_variable_names() -> None:
    prompt = gravity_prompt(question_key="input", context_key="docs", anchors_key="anchors", history_key=None)
    assert set(prompt.input_variables) == {"input", "docs", "anchors"}
    assert [type(m) for m in prompt.invoke({"input": "q", "docs": "d", "anchors": "a"}).to_messages()] == [
        SystemMessage,
        HumanMessage,
    ]
    with pytest.raises(ConfigurationError):
        gravity_prompt(question_key="context")
    with pytest.raises(ConfigurationError):
        gravity_prompt(anchors_key="not valid")


def test_format_documents_renders_one_block_item_per_document() -> None:
    docs = [
        Document(page_content="Maya: I got the job!"),
        Document(page_content="Jonas: Two lines\nsecond line"),
        Document(page_content="   "),
    ]
    assert format_documents(docs) == (
        "<retrieved_memories>\n# Retrieved Memories\n"
        "- Maya: I got the job!\n- Jonas: Two lines\n  second line\n</retrieved_memories>"
    )
    assert format_documents([]) == ""


# -- the chain helper --------------------------------------------------------------------------


@pytest.fixture
def store(engine: GravityEngine, documents: list[Document]) -> InMemoryVectorStore:
    store = InMemoryVectorStore(GravityEmbeddings(engine.embedder))
    store.add_documents(documents)
    return store


async def test_chain_runs_the_engine_query_once_per_call(
    engine: GravityEngine, store: InMemoryVectorStore, question: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_queries(engine, monkeypatch, delay=0.05)  # slow enough for the branches to overlap
    chain = build_gravity_chain(engine, store, FakeListChatModel(responses=["one", "two", "three"]), k=3)
    assert chain.invoke(question) == "one"
    assert calls == [question]
    assert await chain.ainvoke({"question": "What did Jonas run?"}) == "two"
    assert calls == [question, "What did Jonas run?"]


def test_chain_over_a_host_retriever_with_history_and_custom_key(
    engine: GravityEngine, store: InMemoryVectorStore, question: str
) -> None:
    seen: list[Any] = []

    class Capturing(FakeListChatModel):
        def _call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
            seen.append(messages)
            return super()._call(messages, *args, **kwargs)

    chain = build_gravity_chain(
        engine,
        store.as_retriever(search_kwargs={"k": 2}),
        Capturing(responses=["fine"]),
        k=2,
        question_key="input",
        prompt=gravity_prompt(question_key="input"),
    )
    history = [HumanMessage("hi"), AIMessage("hello")]
    assert chain.invoke({"input": question, "history": history}) == "fine"
    (messages,) = seen
    memories = messages[0].content.split("</retrieved_memories>")[0]
    assert memories.count("\n- ") == 2  # k=2 documents
    assert engine.query(question).text in messages[0].content
    assert messages[1:3] == history
    assert messages[3].content == question


def test_chain_refuses_a_host_that_is_neither_store_nor_retriever(engine: GravityEngine) -> None:
    with pytest.raises(ConfigurationError, match="VectorStore or BaseRetriever"):
        build_gravity_chain(engine, "not a store", FakeListChatModel(responses=["x"]))  # type: ignore[arg-type]


def test_chain_rejects_input_without_the_question(engine: GravityEngine, store: InMemoryVectorStore) -> None:
    chain = build_gravity_chain(engine, store, FakeListChatModel(responses=["x"]))
    with pytest.raises(ConfigurationError, match="'question'"):
        chain.invoke({"query": "x"})


def test_manual_lcel_composition_with_a_shared_cache(
    engine: GravityEngine, store: InMemoryVectorStore, question: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gravity_langchain import GravityRetriever

    calls = count_queries(engine, monkeypatch, delay=0.05)
    cache = AnswerCache(engine)
    retriever = GravityRetriever(engine=engine, vector_store=store, k=2, cache=cache)
    chain = (
        RunnablePassthrough.assign(
            context=itemgetter("question") | retriever | format_documents,
            gravity_anchors=gravity_anchors_runnable(cache),
        )
        | GRAVITY_PROMPT
    )
    system = chain.invoke({"question": question}).to_messages()[0].content
    assert calls == [question]
    assert isinstance(system, str)
    assert system.startswith("<retrieved_memories>")
    assert PRIORITY_INSTRUCTION in system
