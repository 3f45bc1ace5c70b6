"""Arguments GravityRetriever does not take are refused by name, not silently ignored (#16).

LangChain's ``BaseRetriever`` ignores unknown constructor arguments, so ``search_type="mmr"``,
``top_k=2`` or a misspelt ``fecth_k=20`` used to build a retriever that did something else than asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.documents import Document

from gravity_core.errors import ConfigurationError
from gravity_core.query.engine import GravityEngine
from gravity_core.sgmem import SGMem
from gravity_langchain import GravityRetriever, SGMemRetriever


@pytest.fixture
def store(shared_embeddings: Any, documents: list[Document], make_store: Callable[..., Any]) -> Any:
    return make_store(shared_embeddings, documents)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"search_type": "mmr"},
            r"'search_type' \(GravityRetriever runs similarity searches.*retriever=store\.as_retriever",
        ),
        ({"top_k": 2}, r"'top_k' \(use k= \(documents returned\) or fetch_k="),
        ({"fecth_k": 20}, r"'fecth_k' \(did you mean fetch_k\?\)"),
        ({"search_kwarg": {}}, r"did you mean search_kwargs\?"),
        ({"vectorstore": None}, r"use vector_store="),
        ({"colour": "blue"}, r"'colour'\. It takes: engine, vector_store, retriever, k, fetch_k"),
    ],
)
def test_unknown_constructor_arguments_are_named(
    engine: GravityEngine, store: Any, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        GravityRetriever(engine=engine, vector_store=store, **arguments)


@pytest.mark.parametrize(
    ("search_kwargs", "message"),
    [
        ({"fetch_k": 20}, "set fetch_k with fetch_k="),
        ({"k": 2}, "set k with k="),
        ({"question_date": "2024-01-01"}, "set question_date with question_date="),
        ({"score_threshold": 0.5}, r"search_kwargs\['score_threshold'\] is not supported: .*as_retriever"),
        ({"lambda_mult": 0.5}, r"search_kwargs\['lambda_mult'\] is not supported"),
    ],
)
def test_search_kwargs_that_would_be_misread_are_refused(
    engine: GravityEngine, store: Any, search_kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        GravityRetriever(engine=engine, vector_store=store, search_kwargs=search_kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"top_k": 2}, r"'top_k' \(use k="),
        ({"search_type": "mmr"}, r"'search_type'"),
        ({"fecth_k": 20}, r"did you mean fetch_k\?"),
        ({"question_dat": "2024-01-01"}, r"did you mean question_date\?"),
    ],
)
def test_unknown_call_arguments_are_named_before_any_search(
    engine: GravityEngine, store: Any, question: str, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        GravityRetriever(engine=engine, vector_store=store).invoke(question, **kwargs)
    assert store.searched == []


def test_per_call_fetch_k_is_honoured(engine: GravityEngine, store: Any, question: str) -> None:
    GravityRetriever(engine=engine, vector_store=store, k=2, fetch_k=5).invoke(question, fetch_k=9)
    GravityRetriever(engine=engine, vector_store=store, k=2, fetch_k=5).invoke(question)
    assert store.fetched == [9, 5]
    with pytest.raises(ConfigurationError, match="fetch_k must be at least 1"):
        GravityRetriever(engine=engine, vector_store=store).invoke(question, fetch_k=0)


def test_store_search_arguments_still_reach_the_store(
    engine: GravityEngine, store: Any, question: str
) -> None:
    docs = GravityRetriever(engine=engine, vector_store=store, k=3).invoke(
        question, filter=lambda d: d.metadata["speaker"] == "Jonas"
    )
    assert docs and {d.metadata["speaker"] for d in docs} == {"Jonas"}


def test_sgmem_retriever_refuses_unknown_arguments_too(tmp_path: Any) -> None:
    memory = SGMem.__new__(SGMem)  # never searched: the arguments are checked first
    with pytest.raises(
        ConfigurationError, match=r"SGMemRetriever got unknown argument\(s\) 'top_k' \(use k=\)"
    ):
        SGMemRetriever(sgmem=memory, top_k=2)
    with pytest.raises(ConfigurationError, match="did you mean granularity"):
        SGMemRetriever(sgmem=memory, granularty="round")
