"""GravityRetriever: expanded queries against the host's store or retriever, fusion, k, callbacks, async."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import InMemoryVectorStore

from gravity_core.context.policy import DEFAULT_POLICY, EXPANDING_POLICY
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_langchain import (
    ANCHORS_EVENT,
    AnswerCache,
    GravityEmbeddings,
    GravityRetriever,
    document_key,
)
from tests.integrations.langchain.conftest import EARLY, EVERY_SEARCHED


class Recorder(BaseCallbackHandler):
    """Records retriever runs and custom events."""

    def __init__(self) -> None:
        self.retriever_starts: list[tuple[str, UUID, UUID | None]] = []
        self.events: list[tuple[str, Any, UUID]] = []

    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self.retriever_starts.append((query, run_id, parent_run_id))

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append((name, data, run_id))


class ListRetriever(BaseRetriever):
    """A host retriever over a vector store that records the queries it gets (and can be slow)."""

    store: InMemoryVectorStore
    k: int = 3
    delay: float = 0.0
    queries: list[str] = []
    running: int = 0
    max_running: int = 0

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.queries.append(query)
        return self.store.similarity_search(query, k=self.k)

    async def _aget_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        self.queries.append(query)
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        await asyncio.sleep(self.delay)
        self.running -= 1
        return self.store.similarity_search(query, k=self.k)


# -- the vector store path ---------------------------------------------------------------------


def test_question_and_expansions_are_embedded_in_one_batch_and_each_searched_by_vector(
    engine: GravityEngine,
    documents: list[Document],
    make_store: Callable[..., Any],
    counting: Any,
    question: str,
) -> None:
    embeddings = counting(GravityEmbeddings(HashingEmbedder(dim=128)))  # not the engine's embedder
    store = make_store(embeddings, documents)
    embeddings.document_calls.clear()
    expansions = engine.query(question).expansions
    assert len(expansions) >= 3

    GravityRetriever(policy=EVERY_SEARCHED, engine=engine, vector_store=store, k=4).invoke(question)

    queries = [question, *expansions]
    assert embeddings.document_calls == [queries]
    assert embeddings.query_calls == []
    assert store.searched == embeddings.inner.embed_documents(queries)


def test_a_store_sharing_the_engines_embedder_embeds_the_question_once(
    engine: GravityEngine,
    documents: list[Document],
    make_store: Callable[..., Any],
    shared_embeddings: Any,
    question: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = make_store(shared_embeddings, documents)
    shared_embeddings.document_calls.clear()
    expansions = engine.query(question).expansions
    engine_embeds: list[str] = []
    original = engine.embed_query

    def counted(q: str) -> Any:
        engine_embeds.append(q)
        return original(q)

    monkeypatch.setattr(engine, "embed_query", counted)

    docs = GravityRetriever(policy=EVERY_SEARCHED, engine=engine, vector_store=store, k=4).invoke(question)

    assert engine_embeds == []  # the engine took the store's vector of the question
    assert shared_embeddings.query_calls == [question]
    assert shared_embeddings.document_calls == [expansions]
    assert store.searched == GravityEmbeddings(engine.embedder).embed_documents([question, *expansions])
    assert len(docs) == 4


def test_batch_embeddings_off_embeds_each_query_with_embed_query(
    engine: GravityEngine,
    documents: list[Document],
    make_store: Callable[..., Any],
    counting: Any,
    question: str,
) -> None:
    embeddings = counting(GravityEmbeddings(HashingEmbedder(dim=128)))
    store = make_store(embeddings, documents)
    embeddings.document_calls.clear()
    expansions = engine.query(question).expansions

    GravityRetriever(policy=EARLY, engine=engine, vector_store=store, batch_embeddings=False).invoke(question)

    assert embeddings.document_calls == []
    assert embeddings.query_calls == [question, *expansions]


def retrieved_and_expected_merge(
    engine: GravityEngine, store: Any, question: str
) -> tuple[list[Document], list[list[Document]], list[str]]:
    """The retriever's 4 documents under EARLY, checked against the policy's merge of plain searches."""
    docs = GravityRetriever(engine=engine, vector_store=store, k=4, policy=EARLY).invoke(question)
    expansions = engine.query(question).expansions
    per_query = [store.similarity_search(q, k=4) for q in [question, *expansions]]
    merged = EARLY.merge(question, per_query[0], expansions, per_query[1:], document_key, top_n=4)
    assert [d.id for d in docs] == [h.item.id for h in merged]
    return docs, per_query, expansions


def test_by_default_the_question_leads_and_the_anchors_source_turns_join_explained(
    engine: GravityEngine, documents: list[Document], make_store: Callable[..., Any], question: str
) -> None:
    """The shipped policy: the question's own first hits, then a source turn at every second place;
    no expansion among the question's first 25 hits."""
    store = make_store(GravityEmbeddings(engine.embedder), documents)
    docs = GravityRetriever(engine=engine, vector_store=store, k=8).invoke(question)
    own = store.similarity_search(question, k=8)
    lead = DEFAULT_POLICY.source_lead
    assert [d.id for d in docs[: lead + 1]] == [d.id for d in own[: lead + 1]]
    slots = [d.metadata["gravity_slot"] for d in docs]
    assert "expansion" not in slots
    sourced = [d for d in docs if d.metadata["gravity_slot"] == "provenance"]
    assert sourced and slots[lead + 1] == "provenance"
    # Each fetched turn names the anchor whose source it is, and that anchor lists it.
    sources = {f"{s.kind.value}:{s.anchor_id}": s.utterance_ids for s in engine.query(question).sources}
    for doc in sourced:
        (why,) = [f for f in doc.metadata["gravity_found_by"] if f["query"] == "provenance"]
        assert doc.id in sources[why["text"]]
    first = docs[0].metadata["gravity_found_by"][0]
    assert first == {"query": "question", "index": 0, "text": question, "rank": 1}
    assert docs[0].metadata["gravity_score"] >= 1 / 61
    without = GravityRetriever(
        engine=engine, vector_store=store, k=8, policy=replace(DEFAULT_POLICY, source_every=0)
    ).invoke(question)
    assert [d.id for d in without] == [d.id for d in own]


def test_results_are_the_policys_merge_of_the_per_query_results(
    engine: GravityEngine, documents: list[Document], make_store: Callable[..., Any], question: str
) -> None:
    store = make_store(GravityEmbeddings(engine.embedder), documents)
    docs, per_query, expansions = retrieved_and_expected_merge(engine, store, question)
    # The expansions change the answer, at the policy's places only: the question's best hit leads.
    assert docs[0].id == per_query[0][0].id
    added = [d for d in docs if d.metadata["gravity_slot"] == "expansion"]
    assert added and {d.id for d in added}.isdisjoint(d.id for d in per_query[0][:2])
    assert all(
        f["query"] == "expansion" and f["text"] in expansions for f in added[0].metadata["gravity_found_by"]
    )


def test_expansions_are_searched_only_when_the_policy_can_place_them(
    engine: GravityEngine, documents: list[Document], make_store: Callable[..., Any], question: str
) -> None:
    store = make_store(GravityEmbeddings(engine.embedder), documents)
    expansions = engine.query(question).expansions
    policy = replace(EXPANDING_POLICY, source_every=0)  # the question's and the expansions' hits only
    retriever = GravityRetriever(engine=engine, vector_store=store, policy=policy)
    retriever.invoke(question, k=EXPANDING_POLICY.lead)  # every place is the question's: one search
    assert len(store.searched) == 1
    store.searched.clear()
    deeper = retriever.invoke(question, k=EXPANDING_POLICY.lead + 3)
    # The expansions in order, only until their three places are filled.
    searched = len(store.searched) - 1
    assert 1 <= searched <= len(expansions)
    vectors = GravityEmbeddings(engine.embedder).embed_documents([question, *expansions])
    assert store.searched == vectors[: 1 + searched]
    every = [store.similarity_search_by_vector(v, k=EXPANDING_POLICY.lead + 3) for v in vectors]
    merged = policy.merge(question, every[0], expansions, every[1:], document_key, top_n=len(deeper))
    assert [d.page_content for d in deeper] == [h.item.page_content for h in merged]
    assert [d.metadata["gravity_slot"] for d in deeper[: EXPANDING_POLICY.lead]] == [
        "question"
    ] * EXPANDING_POLICY.lead
    assert deeper[EXPANDING_POLICY.lead].metadata["gravity_slot"] == "expansion"
    # The shipped policy places no expansion: one search, however many results are asked for.
    store.searched.clear()
    shipped = GravityRetriever(engine=engine, vector_store=store).invoke(
        question, k=EXPANDING_POLICY.lead + 3
    )
    assert store.searched == vectors[:1]
    assert "expansion" not in {d.metadata["gravity_slot"] for d in shipped}


def test_k_from_the_constructor_and_from_invoke(
    engine: GravityEngine, documents: list[Document], make_store: Callable[..., Any], question: str
) -> None:
    store = make_store(GravityEmbeddings(engine.embedder), documents)
    assert len(GravityRetriever(engine=engine, vector_store=store, k=3).invoke(question)) == 3
    retriever = GravityRetriever(engine=engine, vector_store=store, k=3)
    assert len(retriever.invoke(question, k=1)) == 1
    assert len(retriever.invoke(question, k=7)) == 7
    assert store.fetched[-1] == 7  # each query fetches k documents by default


def test_fetch_k_sets_the_depth_of_each_search(
    engine: GravityEngine, documents: list[Document], make_store: Callable[..., Any], question: str
) -> None:
    store = make_store(GravityEmbeddings(engine.embedder), documents)
    docs = GravityRetriever(engine=engine, vector_store=store, k=2, fetch_k=10).invoke(question)
    assert len(docs) == 2
    assert set(store.fetched) == {10}


def test_fewer_documents_than_k_returns_all_of_them(engine: GravityEngine, question: str) -> None:
    store = InMemoryVectorStore(GravityEmbeddings(engine.embedder))
    store.add_documents(
        [Document(page_content="Maya works at Harbourside", id="a"), Document(page_content="x", id="b")]
    )
    docs = GravityRetriever(engine=engine, vector_store=store, k=5).invoke(question)
    assert sorted(d.id for d in docs if d.id) == ["a", "b"]


def test_search_kwargs_and_invoke_kwargs_reach_the_store(
    engine: GravityEngine, documents: list[Document], make_store: Callable[..., Any], question: str
) -> None:
    store = make_store(GravityEmbeddings(engine.embedder), documents)

    def in_session_2(doc: Document) -> bool:
        return bool(doc.metadata["session"] == "session_2")

    fixed = GravityRetriever(engine=engine, vector_store=store, k=5, search_kwargs={"filter": in_session_2})
    assert {d.metadata["session"] for d in fixed.invoke(question)} == {"session_2"}
    per_call = GravityRetriever(engine=engine, vector_store=store, k=5)
    assert {d.metadata["session"] for d in per_call.invoke(question, filter=in_session_2)} == {"session_2"}
    # A fetch by id could not apply the filter: no source turn is fetched for a filtered search.
    assert all(d.metadata["gravity_slot"] != "provenance" for d in fixed.invoke(question, k=20))


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"k": 0},
        {"fetch_k": 0},
        {"search_kwargs": {"k": 3}},
    ],
)
def test_bad_settings_are_configuration_errors(engine: GravityEngine, arguments: dict[str, Any]) -> None:
    store = InMemoryVectorStore(GravityEmbeddings(engine.embedder))
    host = {} if not arguments else {"vector_store": store}
    with pytest.raises(ConfigurationError):
        GravityRetriever(engine=engine, **host, **arguments)


def test_store_and_retriever_together_or_a_foreign_cache_are_refused(
    engine: GravityEngine, built: Any, embedder: HashingEmbedder
) -> None:
    store = InMemoryVectorStore(GravityEmbeddings(engine.embedder))
    with pytest.raises(ConfigurationError, match="exactly one"):
        GravityRetriever(engine=engine, vector_store=store, retriever=store.as_retriever())
    other = GravityEngine(built.kb, engine.index, embedder)
    with pytest.raises(ConfigurationError, match="another engine"):
        GravityRetriever(engine=engine, vector_store=store, cache=AnswerCache(other))


def test_k_zero_in_invoke_is_a_configuration_error(engine: GravityEngine, question: str) -> None:
    store = InMemoryVectorStore(GravityEmbeddings(engine.embedder))
    with pytest.raises(ConfigurationError):
        GravityRetriever(engine=engine, vector_store=store).invoke(question, k=0)


class TextOnlyStore(InMemoryVectorStore):
    """A store that cannot search by vector and records its text searches."""

    texts: list[str]

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[Document]:
        raise NotImplementedError

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        self.texts.append(query)
        return super().similarity_search(query, k, **kwargs)

    async def asimilarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        self.texts.append(query)
        return await super().asimilarity_search(query, k, **kwargs)


class NoEmbeddingsStore(TextOnlyStore):
    """A store that embeds by itself (no ``embeddings`` to borrow)."""

    @property
    def embeddings(self) -> Embeddings | None:  # type: ignore[override]
        return None


@pytest.mark.parametrize("store_class", [TextOnlyStore, NoEmbeddingsStore])
async def test_stores_without_vector_search_are_searched_by_text(
    engine: GravityEngine, documents: list[Document], question: str, store_class: type[TextOnlyStore]
) -> None:
    store = store_class(GravityEmbeddings(engine.embedder))
    store.texts = []
    store.add_documents(documents)
    retriever = GravityRetriever(policy=EVERY_SEARCHED, engine=engine, vector_store=store, k=4)
    queries = [question, *engine.query(question).expansions]

    assert len(retriever.invoke(question)) == 4
    assert store.texts == queries
    store.texts.clear()
    assert len(await retriever.ainvoke(question)) == 4
    assert Counter(store.texts) == Counter(queries)


# -- the retriever path ------------------------------------------------------------------------


def test_a_host_retriever_gets_every_query_as_a_child_run(
    engine: GravityEngine, documents: list[Document], question: str
) -> None:
    store = InMemoryVectorStore(GravityEmbeddings(engine.embedder))
    store.add_documents(documents)
    host = ListRetriever(store=store, k=3, queries=[])
    recorder = Recorder()

    docs = GravityRetriever(engine=engine, retriever=host, k=5, policy=EXPANDING_POLICY).invoke(
        question, config={"callbacks": [recorder]}
    )

    queries = [question, *engine.query(question).expansions]
    assert Counter(host.queries) == Counter(queries)
    (outer,) = [run for run in recorder.retriever_starts if run[2] is None]
    children = [run for run in recorder.retriever_starts if run[2] is not None]
    assert outer[0] == question
    assert Counter(q for q, _, _ in children) == Counter(queries)
    assert {parent for _, _, parent in children} == {outer[1]}
    assert len(docs) == 5


async def test_async_host_retriever_runs_are_concurrent_and_agree_with_sync(
    engine: GravityEngine, documents: list[Document], question: str
) -> None:
    store = InMemoryVectorStore(GravityEmbeddings(engine.embedder))
    store.add_documents(documents)
    host = ListRetriever(store=store, k=3, queries=[], delay=0.05)
    retriever = GravityRetriever(engine=engine, retriever=host, k=5, policy=EXPANDING_POLICY)
    n_queries = 1 + len(engine.query(question).expansions)

    async_docs = await retriever.ainvoke(question)

    assert host.max_running == n_queries
    assert [d.id for d in async_docs] == [d.id for d in retriever.invoke(question)]


async def test_the_default_policy_neither_embeds_nor_searches_the_expansions(
    engine: GravityEngine,
    documents: list[Document],
    make_store: Callable[..., Any],
    counting: Any,
    shared_embeddings: Any,
    question: str,
) -> None:
    """The shipped policy: GRAVITY still makes the expansions, but only the question is embedded and
    searched, sync and async, at the default k and beyond the policy's lead."""
    assert DEFAULT_POLICY.every == 0 and engine.query(question).expansions
    other = counting(GravityEmbeddings(HashingEmbedder(dim=128)))  # not the engine's embedder
    for embeddings, embedded in ((other, ([[question]], [])), (shared_embeddings, ([], [question]))):
        store = make_store(embeddings, documents)
        retriever = GravityRetriever(engine=engine, vector_store=store)
        for k in (None, 30):  # the default k, and past the lead
            embeddings.document_calls.clear()
            embeddings.query_calls.clear()
            store.searched.clear()
            docs = retriever.invoke(question, k=k)
            assert (embeddings.document_calls, embeddings.query_calls) == embedded
            assert len(store.searched) == 1
            assert "expansion" not in {d.metadata["gravity_slot"] for d in docs}
        embeddings.document_calls.clear()
        embeddings.query_calls.clear()
        store.searched.clear()
        await retriever.ainvoke(question)
        assert (embeddings.document_calls, embeddings.query_calls) == embedded
        assert len(store.searched) == 1
    host = ListRetriever(store=make_store(other, documents), k=3, queries=[])
    retriever = GravityRetriever(engine=engine, retriever=host, k=5)
    retriever.invoke(question)
    await retriever.ainvoke(question)
    assert host.queries == [question, question]


# -- async vector store path ---------------------------------------------------------------------


class SlowStore(InMemoryVectorStore):
    """Async vector search that sleeps, counting how many run at once."""

    running: int = 0
    max_running: int = 0

    async def asimilarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[Document]:
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        await asyncio.sleep(0.05)
        self.running -= 1
        return self.similarity_search_by_vector(embedding, k, **kwargs)


async def test_async_vector_searches_run_concurrently_and_agree_with_sync(
    engine: GravityEngine, documents: list[Document], counting: Any, question: str
) -> None:
    embeddings = counting(GravityEmbeddings(HashingEmbedder(dim=128)))
    store = SlowStore(embeddings)
    store.add_documents(documents)
    embeddings.document_calls.clear()
    retriever = GravityRetriever(policy=EARLY, engine=engine, vector_store=store, k=4)
    queries = [question, *engine.query(question).expansions]

    async_docs = await retriever.ainvoke(question)

    assert store.max_running == len(queries)
    assert embeddings.document_calls == [queries]
    assert [d.id for d in async_docs] == [d.id for d in retriever.invoke(question)]


# -- tracing -----------------------------------------------------------------------------------


@pytest.mark.parametrize("host_kind", ["vector_store", "retriever"])
async def test_selected_anchors_are_emitted_as_a_custom_event(
    engine: GravityEngine, documents: list[Document], question: str, host_kind: str
) -> None:
    store = InMemoryVectorStore(GravityEmbeddings(engine.embedder))
    store.add_documents(documents)
    host = {"vector_store": store} if host_kind == "vector_store" else {"retriever": store.as_retriever()}
    retriever = GravityRetriever(engine=engine, k=3, **host)
    expected = engine.query(question)

    for call in ("sync", "async"):
        recorder = Recorder()
        config = RunnableConfig(callbacks=[recorder])
        if call == "sync":
            retriever.invoke(question, config=config)
        else:
            await retriever.ainvoke(question, config=config)
        (event,) = recorder.events
        name, data, _ = event
        assert name == ANCHORS_EVENT == "gravity_anchors_selected"
        assert data["question"] == question
        assert [(a["kind"], a["id"]) for a in data["anchors"]] == [
            (a.kind.value, a.id) for a in expected.anchors
        ]
        assert [a["score"] for a in data["anchors"]] == pytest.approx(
            [a.score for a in expected.anchors], abs=1e-5
        )
        assert data["expansions"] == expected.expansions
        assert {a["kind"] for a in data["anchors"]} == {"entity", "event", "topic"}


# -- settings and cache ------------------------------------------------------------------------


def test_query_config_is_used_and_the_cache_runs_the_engine_once(
    engine: GravityEngine, documents: list[Document], question: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = InMemoryVectorStore(GravityEmbeddings(engine.embedder))
    store.add_documents(documents)
    seen: list[QueryConfig | None] = []
    original = engine.query

    def counted(q: str, **kwargs: Any) -> Any:
        seen.append(kwargs.get("config"))
        return original(q, **kwargs)

    monkeypatch.setattr(engine, "query", counted)
    no_expansion = QueryConfig(expand=False)
    retriever = GravityRetriever(
        engine=engine, vector_store=store, k=2, config=no_expansion, cache=AnswerCache(engine)
    )
    first = retriever.invoke(question)
    second = retriever.invoke(question)

    assert seen == [no_expansion]
    assert (
        [d.id for d in first]
        == [d.id for d in second]
        == [d.id for d in store.similarity_search(question, k=2)]
    )


# -- Chroma (embedded) -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["ephemeral", "persistent_client"])
def test_works_on_embedded_chroma(
    engine: GravityEngine, documents: list[Document], question: str, mode: str, tmp_path: Any
) -> None:
    import chromadb
    from chromadb.config import Settings
    from langchain_chroma import Chroma

    if mode == "ephemeral":
        # chromadb keeps one in-memory system per process: same settings as gravity_core's index
        client: Any = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    else:
        client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    name = f"turns-{uuid.uuid4().hex[:12]}"
    store = Chroma(collection_name=name, embedding_function=GravityEmbeddings(engine.embedder), client=client)
    try:
        store.add_documents(documents)
        docs, _, _ = retrieved_and_expected_merge(engine, store, question)
        assert all(d.id in {x.id for x in documents} for d in docs)
    finally:
        store.delete_collection()
