"""The date a question is asked reaches GRAVITY through the retriever, the runnable and the chain (#16).

"What did Maya do last month?" asked on 1 February 2024 is about January; the KB's last day is in
June, so without the date the engine picks May's events. ``GravityRetriever.invoke(q,
question_date=d)`` used to fail inside the store (``unexpected keyword argument 'question_date'``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import AIMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore

from gravity_core.context.policy import DEFAULT_POLICY, EXPANDING_POLICY
from gravity_core.errors import ConfigurationError
from gravity_core.query.engine import GravityEngine
from gravity_langchain import (
    ANCHORS_EVENT,
    AnswerCache,
    GravityRetriever,
    build_gravity_chain,
    gravity_anchors_runnable,
)
from tests.integrations.langchain.conftest import EARLY

QUESTION = "What did Maya do last month?"
FEBRUARY = date(2024, 2, 1)


class Anchors(BaseCallbackHandler):
    """Keeps the anchor ids and expansions of every anchors event."""

    def __init__(self) -> None:
        self.seen: list[tuple[list[str], list[str]]] = []

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name == ANCHORS_EVENT:
            self.seen.append(([a["id"] for a in data["anchors"]], list(data["expansions"])))


class Recording(BaseRetriever):
    """A host retriever that records its queries and takes no keyword argument."""

    store: InMemoryVectorStore
    queries: list[str] = []

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.queries.append(query)
        return self.store.similarity_search(query, k=3)


def selected(engine: GravityEngine, asked: date | None) -> tuple[list[str], list[str]]:
    context = engine.query(QUESTION, question_date=asked)
    return [a.id for a in context.anchors], list(context.expansions)


@pytest.fixture
def store(shared_embeddings: Any, documents: list[Document], make_store: Callable[..., Any]) -> Any:
    return make_store(shared_embeddings, documents)


def test_the_date_changes_what_the_engine_selects(engine: GravityEngine) -> None:
    # The premise of every test below.
    assert selected(engine, FEBRUARY) != selected(engine, None)


@pytest.mark.parametrize(
    "value", [FEBRUARY, datetime(2024, 2, 1, 9, 30), "2024-02-01", "2024-02-01T09:30:00Z", " 2024-02-01 "]
)
def test_invoke_takes_the_question_date_as_a_keyword(engine: GravityEngine, store: Any, value: Any) -> None:
    events = Anchors()
    retriever = GravityRetriever(engine=engine, vector_store=store, k=8, policy=EARLY)
    docs = retriever.invoke(QUESTION, config={"callbacks": [events]}, question_date=value)
    assert events.seen == [selected(engine, FEBRUARY)]
    expansions = [
        f["text"] for d in docs for f in d.metadata["gravity_found_by"] if f["query"] == "expansion"
    ]
    assert expansions and set(expansions) <= set(selected(engine, FEBRUARY)[1])
    assert 1 < len(store.fetched) <= 1 + len(selected(engine, FEBRUARY)[1])  # and the store got no date


def test_the_date_in_configurable_reaches_the_retriever(engine: GravityEngine, store: Any) -> None:
    events = Anchors()
    retriever = GravityRetriever(engine=engine, vector_store=store, k=8, policy=EARLY)
    retriever.invoke(
        QUESTION, config={"callbacks": [events], "configurable": {"question_date": "2024-02-01"}}
    )
    retriever.invoke(QUESTION, config={"callbacks": [events]})
    assert events.seen == [selected(engine, FEBRUARY), selected(engine, None)]


async def test_async_and_batch_take_the_date_too(engine: GravityEngine, store: Any) -> None:
    events = Anchors()
    retriever = GravityRetriever(engine=engine, vector_store=store, k=8, policy=EARLY)
    dated: RunnableConfig = {"callbacks": [events], "configurable": {"question_date": FEBRUARY}}
    await retriever.ainvoke(QUESTION, config={"callbacks": [events]}, question_date=FEBRUARY)
    await retriever.ainvoke(QUESTION, config=dated)
    retriever.batch([QUESTION], config=dated)
    assert events.seen == [selected(engine, FEBRUARY)] * 3


def test_precedence_keyword_then_configurable_then_field(engine: GravityEngine, store: Any) -> None:
    april = date(2024, 4, 20)
    events = Anchors()
    retriever = GravityRetriever(engine=engine, vector_store=store, k=8, question_date="2024-02-01")
    assert retriever.question_date == FEBRUARY
    retriever.invoke(QUESTION, config={"callbacks": [events]})
    retriever.invoke(QUESTION, config={"callbacks": [events], "configurable": {"question_date": april}})
    retriever.invoke(
        QUESTION,
        config={"callbacks": [events], "configurable": {"question_date": april}},
        question_date=date(2024, 5, 1),
    )
    assert events.seen == [
        selected(engine, FEBRUARY),
        selected(engine, april),
        selected(engine, date(2024, 5, 1)),
    ]


def test_a_host_retriever_gets_the_dated_expansions_but_no_date(engine: GravityEngine, store: Any) -> None:
    host = Recording(store=store)
    GravityRetriever(engine=engine, retriever=host, policy=EXPANDING_POLICY).invoke(
        QUESTION, question_date=FEBRUARY
    )
    assert host.queries == [QUESTION, *selected(engine, FEBRUARY)[1]]


def test_the_cache_keeps_each_question_date_apart(
    engine: GravityEngine, store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = AnswerCache(engine)
    events = Anchors()
    expected = [selected(engine, None), selected(engine, FEBRUARY)]
    asked: list[date | None] = []
    query = engine.query

    def counted(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("question_date"))
        return query(*args, **kwargs)

    monkeypatch.setattr(engine, "query", counted)
    retriever = GravityRetriever(engine=engine, vector_store=store, k=8, cache=cache)
    for when in (None, FEBRUARY, None, FEBRUARY):
        retriever.invoke(QUESTION, config={"callbacks": [events]}, question_date=when)
    assert events.seen == expected * 2
    assert asked == [None, FEBRUARY]  # one engine query per (question, date), then served from the cache
    assert len(cache) == 2


@pytest.mark.parametrize("bad", ["last Tuesday", "2024-13-01", 20240201, 3.5])
def test_a_bad_date_is_a_configuration_error_naming_the_argument(
    engine: GravityEngine, store: Any, bad: Any
) -> None:
    retriever = GravityRetriever(engine=engine, vector_store=store)
    with pytest.raises(ConfigurationError, match=r"^question_date must be a date.*got"):
        retriever.invoke(QUESTION, question_date=bad)
    with pytest.raises(ConfigurationError, match=r"configurable\['question_date'\] must be a date"):
        retriever.invoke(QUESTION, config={"configurable": {"question_date": bad}})
    with pytest.raises(ConfigurationError, match=r"^question_date must be a date"):
        GravityRetriever(engine=engine, vector_store=store, question_date=bad)


# -- the anchors runnable ----------------------------------------------------------------------


async def test_the_anchors_runnable_reads_the_configurable_date(engine: GravityEngine) -> None:
    dated = engine.query(QUESTION, question_date=FEBRUARY).text
    assert dated != engine.query(QUESTION).text
    runnable = gravity_anchors_runnable(AnswerCache(engine))
    config: RunnableConfig = {"configurable": {"question_date": "2024-02-01"}}
    assert runnable.invoke({"question": QUESTION}, config=config) == dated
    assert await runnable.ainvoke(QUESTION, config=config) == dated
    assert runnable.invoke(QUESTION) == engine.query(QUESTION).text
    assert gravity_anchors_runnable(engine, question_date=FEBRUARY).invoke(QUESTION) == dated
    with pytest.raises(ConfigurationError, match="question_date"):
        gravity_anchors_runnable(engine, question_date="soon")


# -- the chain ---------------------------------------------------------------------------------


def system_text(prompt: PromptValue) -> AIMessage:
    """A 'model' answering with the prompt's system message, so the chain returns what it was shown."""
    return AIMessage(str(prompt.to_messages()[0].content))


@pytest.mark.parametrize("route", ["input", "configurable", "built"])
async def test_the_chain_dates_both_the_retrieval_and_the_anchors(
    engine: GravityEngine, store: Any, route: str
) -> None:
    events = Anchors()
    chain = build_gravity_chain(
        engine,
        store,
        RunnableLambda(system_text),
        k=8,
        policy=EARLY,
        question_date=FEBRUARY if route == "built" else None,
    )
    inputs: dict[str, Any] = {"question": QUESTION}
    config: RunnableConfig = {"callbacks": [events]}
    if route == "input":
        inputs["question_date"] = "2024-02-01"
    elif route == "configurable":
        config["configurable"] = {"question_date": datetime(2024, 2, 1, 8, tzinfo=UTC)}
    shown = chain.invoke(inputs, config=config)
    ashown = await chain.ainvoke(inputs, config=config)
    dated = engine.query(QUESTION, question_date=FEBRUARY).text
    assert shown == ashown
    assert dated in shown and engine.query(QUESTION).text not in shown
    assert events.seen == [selected(engine, FEBRUARY)] * 2  # the retrieval was dated too


def test_the_chains_input_date_wins_and_a_bad_one_is_refused(engine: GravityEngine, store: Any) -> None:
    chain = build_gravity_chain(engine, store, RunnableLambda(system_text), question_date="2024-05-01")
    shown = chain.invoke(
        {"question": QUESTION, "question_date": FEBRUARY},
        config={"configurable": {"question_date": "2024-04-20"}},
    )
    assert engine.query(QUESTION, question_date=FEBRUARY).text in shown
    with pytest.raises(ConfigurationError, match="the input's 'question_date' must be a date"):
        chain.invoke({"question": QUESTION, "question_date": "yesterday"})
    with pytest.raises(ConfigurationError, match="question_date_key"):
        build_gravity_chain(engine, store, RunnableLambda(system_text), question_date_key="question")


def test_the_chain_with_a_token_budget_is_dated_too(engine: GravityEngine, store: Any) -> None:
    chain = build_gravity_chain(engine, store, RunnableLambda(system_text), k=20, token_budget=3000)
    room = min(DEFAULT_POLICY.anchor_tokens(3000), engine.config.token_budget or 3000)
    dated, _ = engine.fit_anchors(engine.query(QUESTION, question_date=FEBRUARY), room)
    undated, _ = engine.fit_anchors(engine.query(QUESTION), room)
    assert dated != undated
    assert dated in chain.invoke({"question": QUESTION, "question_date": FEBRUARY})
    assert undated in chain.invoke({"question": QUESTION})
