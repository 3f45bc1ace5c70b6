"""build_gravity_chain(token_budget=B): the anchors and the retrieved documents share one budget the
way `gravity eval` shares it (the anchors' part from the context policy, documents in rank order)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.errors import ConfigurationError
from gravity_core.query.engine import GravityEngine
from gravity_langchain import GravityEmbeddings, GravityRetriever, build_gravity_chain, format_documents


class Capturing(FakeListChatModel):
    seen: list[Any] = []

    def _call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        self.seen.append(messages)
        return super()._call(messages, *args, **kwargs)


def system_prompt(
    engine: GravityEngine, store: Any, question: str, budget: int, policy: ContextPolicy
) -> str:
    model = Capturing(responses=["fine"], seen=[])
    chain = build_gravity_chain(engine, store, model, k=60, token_budget=budget, policy=policy)
    assert chain.invoke(question) == "fine"
    content = model.seen[0][0].content
    assert isinstance(content, str)
    return content


@pytest.mark.parametrize("budget", [300, 800, 1500])
def test_anchors_and_documents_fit_one_budget(
    engine: GravityEngine,
    documents: list[Document],
    make_store: Callable[..., Any],
    question: str,
    budget: int,
) -> None:
    store = make_store(GravityEmbeddings(engine.embedder), documents)
    policy = ContextPolicy(anchor_share=0.3, host_reserve=200)
    system = system_prompt(engine, store, question, budget, policy)
    memories, _, anchors = system.partition("\n\n")
    assert engine.counter.count(memories) + engine.counter.count(anchors) <= budget
    assert engine.counter.count(anchors) <= policy.anchor_tokens(budget)
    # The documents are the retriever's, in its order (one too long for what is left is skipped).
    ranked = GravityRetriever(engine=engine, vector_store=store, k=60, policy=policy).invoke(question)
    shown = [d.id for d in ranked if f"- {d.page_content}" in memories]
    assert shown and shown[0] == ranked[0].id
    assert memories.count("\n- ") == len(shown)
    assert [d.id for d in ranked if d.id in shown] == shown


def test_a_small_budget_is_all_the_hosts(
    engine: GravityEngine, documents: list[Document], make_store: Callable[..., Any], question: str
) -> None:
    store = make_store(GravityEmbeddings(engine.embedder), documents)
    assert DEFAULT_POLICY.anchor_tokens(400) == 0
    system = system_prompt(engine, store, question, 400, DEFAULT_POLICY)
    assert "<gravity_anchors>" not in system and "<retrieved_memories>" in system


def test_a_budget_too_small_for_anchors_holds_the_stores_top_documents_and_the_source_turns(
    engine: GravityEngine, documents: list[Document], make_store: Callable[..., Any], question: str
) -> None:
    store = make_store(GravityEmbeddings(engine.embedder), documents)
    # Expansions from the second place on: they would change the documents if they ran. No bound on
    # what the fetched turns take, so the documents fill the budget in the retriever's order.
    policy = ContextPolicy(
        lead=1,
        every=1,
        anchor_share=0.25,
        host_reserve=400,
        min_anchor_tokens=150,
        max_source_turn_share=1.0,
        max_sources_share=1.0,
    )
    budget = 600
    assert policy.anchor_tokens(budget) == 0
    expanded = GravityRetriever(engine=engine, vector_store=store, k=60, policy=policy).invoke(question)
    plain = store.similarity_search(question, k=60)
    assert [d.id for d in expanded] != [d.id for d in plain]

    def fill(ranked: list[Document]) -> str:
        kept: list[Document] = []
        for document in ranked:
            if engine.counter.count(format_documents([*kept, document])) <= budget:
                kept.append(document)
        return format_documents(kept)

    # No expansion runs; the selected anchors' source turns still join the store's hits.
    unexpanded = GravityRetriever(
        engine=engine,
        vector_store=store,
        k=60,
        policy=policy,
        config=engine.config.model_copy(update={"expand": False}),
    ).invoke(question)
    assert any(d.metadata["gravity_slot"] == "provenance" for d in unexpanded)
    memories = system_prompt(engine, store, question, budget, policy).partition("\n\n")[0]
    assert memories == fill(unexpanded) != fill(plain)
    # Without retrieval by provenance the memories are the store's own top documents.
    no_sources = replace(policy, source_every=0)
    assert system_prompt(engine, store, question, budget, no_sources).partition("\n\n")[0] == fill(plain)
    # Bounds no fetched turn fits: each goes back to where the store's own search ranked it, or
    # leaves, so the memories are the store's own top documents again.
    bounded = replace(policy, max_source_turn_share=0.001, max_sources_share=0.001)
    assert system_prompt(engine, store, question, budget, bounded).partition("\n\n")[0] == fill(plain)


def test_a_budget_below_one_is_refused(
    engine: GravityEngine, documents: list[Document], make_store: Any
) -> None:
    store = make_store(GravityEmbeddings(engine.embedder), documents)
    with pytest.raises(ConfigurationError, match="token_budget"):
        build_gravity_chain(engine, store, FakeListChatModel(responses=["x"]), token_budget=0)
