"""One retriever and one chain serving many users, the user named per call.

A :class:`UserKBs` holds a KB per user, and one vector store holds every user's turns (metadata
``user_id``). Each user's chat names words no other user's does (``Wombat<n>``, ``quokka<n>``), so a
document, an expansion or an anchor block of another user shows up as another user's mark.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import chromadb
import pytest
from chromadb.config import Settings
from langchain_chroma import Chroma
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import AIMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore

from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.prompts.injection import PRIORITY_INSTRUCTION
from gravity_core.schema import Utterance
from gravity_core.serving.users import UserKBs
from gravity_langchain import (
    ANCHORS_EVENT,
    AnswerCache,
    BatchedSearch,
    ChromaBatchedSearch,
    GravityEmbeddings,
    GravityRetriever,
    UserAnswerCaches,
    build_gravity_chain,
    gravity_anchors_runnable,
)
from tests.core.serving.test_users import MARK, marks_of_others, user_chat
from tests.integrations.langchain.conftest import EARLY

QUESTION = "When did Ana adopt a dog?"
USERS = (1, 2, 3)
NEWCOMER = 9  # documents in the store, no KB
HOW = r"names none: pass config=\{'configurable': \{'user_id': '...'\}\}"


def user(n: int) -> str:
    return f"u{n}"


def own_filter(user_id: str) -> dict[str, Any]:
    """InMemoryVectorStore's filter keeping to one user's documents."""
    return {"filter": lambda doc: doc.metadata.get("user_id") == user_id}


def turns(n: int, chat: Sequence[Utterance]) -> list[Document]:
    return [
        Document(
            page_content=f"{u.speaker}: {u.text}",
            id=f"{user(n)}/{u.id}",
            metadata={"user_id": user(n), "session": u.session},
        )
        for u in chat
    ]


def offline(nlp: Any) -> Any:
    return lambda embedder, store: OfflineExtractor(embedder, pipeline=nlp)


class SearchSpy(InMemoryVectorStore):
    """InMemoryVectorStore recording the keyword arguments of every search (its async ones call these)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.searches: list[dict[str, Any]] = []

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[Document]:
        self.searches.append(kwargs)
        return super().similarity_search_by_vector(embedding, k, **kwargs)

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        self.searches.append(kwargs)
        return super().similarity_search(query, k, **kwargs)


class Events(BaseCallbackHandler):
    """Keeps the payload of every anchors event."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name == ANCHORS_EVENT:
            self.seen.append(data)


def echo(prompt: PromptValue) -> AIMessage:
    """A 'model' answering with its whole prompt, so the chain returns what it was shown."""
    return AIMessage("\n".join(str(m.content) for m in prompt.to_messages()))


def configured(n: int, **more: Any) -> RunnableConfig:
    return {"configurable": {"user_id": user(n)}, **more}  # type: ignore[typeddict-item]


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kbs(tmp_path_factory: pytest.TempPathFactory, nlp: Any) -> UserKBs:
    users = UserKBs(
        tmp_path_factory.mktemp("users"), embedder=HashingEmbedder(), extractor=offline(nlp), max_engines=2
    )
    for n in USERS:
        users.add(user(n), user_chat(n))
    return users


@pytest.fixture
def store(kbs: UserKBs) -> SearchSpy:
    spy = SearchSpy(GravityEmbeddings(kbs.embedder))
    for n in (*USERS, NEWCOMER):
        spy.add_documents(turns(n, user_chat(n)))
    return spy


@pytest.fixture
def retriever(kbs: UserKBs, store: SearchSpy) -> GravityRetriever:
    return GravityRetriever(users=kbs, vector_store=store, user_filter=own_filter, k=4, policy=EARLY)


def assert_only_theirs(n: int, docs: Sequence[Document], event: Mapping[str, Any], kbs: UserKBs) -> None:
    """``docs`` and the anchors event hold user ``n``'s memories only, and some of them."""
    assert docs and {d.metadata["user_id"] for d in docs} == {user(n)}
    assert marks_of_others([d.page_content for d in docs], n) == set()
    expected = kbs.query(user(n), QUESTION)
    assert event["user_id"] == user(n)
    assert event["expansions"] == list(expected.expansions)
    assert [a["id"] for a in event["anchors"]] == [a.id for a in expected.anchors]
    shown = json.dumps(event) + json.dumps([d.metadata.get("gravity_found_by") for d in docs])
    assert f"Wombat{n}" in shown and marks_of_others([shown], n) == set()


# -- the retriever -----------------------------------------------------------------------------


@pytest.mark.parametrize("route", ["keyword", "configurable"])
def test_the_retriever_gives_each_user_their_documents_and_anchors_only(
    kbs: UserKBs, store: SearchSpy, retriever: GravityRetriever, route: str
) -> None:
    for n in USERS:
        events = Events()
        store.searches.clear()
        if route == "keyword":
            docs = retriever.invoke(QUESTION, config={"callbacks": [events]}, user_id=user(n))
        else:
            docs = retriever.invoke(QUESTION, config=configured(n, callbacks=[events]))
        (event,) = events.seen
        assert_only_theirs(n, docs, event, kbs)
        # The question's search and every expansion's, each limited to the user.
        assert 1 < len(store.searches) <= 1 + len(event["expansions"])
        assert all("filter" in search for search in store.searches)


@pytest.mark.parametrize("route", ["keyword", "configurable"])
async def test_async_calls_keep_to_the_user_too(
    kbs: UserKBs, store: SearchSpy, retriever: GravityRetriever, route: str
) -> None:
    for n in USERS:
        events = Events()
        store.searches.clear()
        if route == "keyword":
            docs = await retriever.ainvoke(QUESTION, config={"callbacks": [events]}, user_id=user(n))
        else:
            docs = await retriever.ainvoke(QUESTION, config=configured(n, callbacks=[events]))
        (event,) = events.seen
        assert_only_theirs(n, docs, event, kbs)
        assert len(store.searches) == 1 + len(event["expansions"]) and all(
            "filter" in s for s in store.searches
        )


def test_the_keyword_user_id_wins_over_the_configured_one(kbs: UserKBs, retriever: GravityRetriever) -> None:
    events = Events()
    docs = retriever.invoke(QUESTION, config=configured(2, callbacks=[events]), user_id=user(1))
    assert_only_theirs(1, docs, events.seen[0], kbs)


def test_batch_with_a_config_per_input(kbs: UserKBs, retriever: GravityRetriever) -> None:
    results = retriever.batch([QUESTION] * 6, config=[configured(USERS[i % 3]) for i in range(6)])
    for i, docs in enumerate(results):
        assert {d.metadata["user_id"] for d in docs} == {user(USERS[i % 3])}


def test_a_store_retriever_gets_the_user_filter(kbs: UserKBs, store: SearchSpy) -> None:
    host = store.as_retriever(search_kwargs={"k": 4})
    shared = GravityRetriever(users=kbs, retriever=host, user_filter=own_filter, k=4, policy=EARLY)
    for n in USERS:
        events = Events()
        store.searches.clear()
        docs = shared.invoke(QUESTION, config={"callbacks": [events]}, user_id=user(n))
        assert_only_theirs(n, docs, events.seen[0], kbs)
        assert len(store.searches) > 1 and all("filter" in s for s in store.searches)


class RecordingBatch(BatchedSearch):
    """A batched search over the in-memory store that records the search arguments it is given."""

    def __init__(self, store: InMemoryVectorStore) -> None:
        self.store = store
        self.given: list[dict[str, Any]] = []

    def accepts(self, search: Mapping[str, Any]) -> bool:
        return set(search) <= {"filter"}

    def search(
        self, vectors: Sequence[Sequence[float]], k: int, search: Mapping[str, Any]
    ) -> list[list[Document]]:
        self.given.append(dict(search))
        return [self.store.similarity_search_by_vector(list(v), k, **search) for v in vectors]


async def test_the_batched_search_gets_the_user_filter(kbs: UserKBs, store: SearchSpy) -> None:
    batched = RecordingBatch(store)
    shared = GravityRetriever(
        users=kbs, vector_store=store, user_filter=own_filter, k=4, policy=EARLY, batched_search=batched
    )
    for n in USERS:
        events = Events()
        docs = shared.invoke(QUESTION, config={"callbacks": [events]}, user_id=user(n))
        adocs = await shared.ainvoke(QUESTION, config={"callbacks": [events]}, user_id=user(n))
        assert docs == adocs
        assert_only_theirs(n, docs, events.seen[0], kbs)
    assert len(batched.given) == 2 * len(USERS) and all("filter" in s for s in batched.given)


@pytest.fixture
def chroma(kbs: UserKBs) -> Iterator[tuple[Chroma, Any]]:
    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    name = f"users-{uuid.uuid4().hex[:12]}"
    host = Chroma(collection_name=name, embedding_function=GravityEmbeddings(kbs.embedder), client=client)
    for n in (*USERS, NEWCOMER):
        host.add_documents(turns(n, user_chat(n)))
    yield host, client.get_collection(name)
    host.delete_collection()


@pytest.mark.parametrize("batched", [False, True])
def test_one_chroma_collection_for_every_user(
    kbs: UserKBs, chroma: tuple[Chroma, Any], batched: bool
) -> None:
    host, collection = chroma
    shared = GravityRetriever(
        users=kbs,
        vector_store=host,
        user_filter=lambda u: {"filter": {"user_id": u}},
        k=4,
        policy=EARLY,
        batched_search=ChromaBatchedSearch(collection) if batched else None,
    )
    for n in USERS:
        events = Events()
        docs = shared.invoke(QUESTION, config={"callbacks": [events]}, user_id=user(n))
        assert_only_theirs(n, docs, events.seen[0], kbs)


def test_a_shared_cache_is_kept_per_user(kbs: UserKBs, store: SearchSpy) -> None:
    caches = UserAnswerCaches(kbs)
    shared = GravityRetriever(
        users=kbs, vector_store=store, user_filter=own_filter, cache=caches, policy=EARLY
    )
    for n in (*USERS, *USERS):
        events = Events()
        docs = shared.invoke(QUESTION, config={"callbacks": [events]}, user_id=user(n))
        assert_only_theirs(n, docs, events.seen[0], kbs)
    kept = caches.for_user(user(3))
    assert kept.engine is kbs.engine(user(3)) and len(kept) == 1


def test_a_user_without_a_kb_gets_their_documents_and_no_anchors(
    retriever: GravityRetriever, store: SearchSpy
) -> None:
    events = Events()
    docs = retriever.invoke(QUESTION, config={"callbacks": [events]}, user_id=user(NEWCOMER))
    assert docs and {d.metadata["user_id"] for d in docs} == {user(NEWCOMER)}
    assert events.seen == [
        {"question": QUESTION, "anchors": [], "expansions": [], "tokens": 0, "user_id": user(NEWCOMER)}
    ]
    assert len(store.searches) == 1 and "filter" in store.searches[0]


# -- refused -----------------------------------------------------------------------------------


async def test_a_call_without_a_user_is_refused_saying_how(
    retriever: GravityRetriever, store: SearchSpy
) -> None:
    with pytest.raises(ConfigurationError, match=HOW):
        retriever.invoke(QUESTION)
    with pytest.raises(ConfigurationError, match=HOW):
        await retriever.ainvoke(QUESTION, config={"configurable": {"question_date": "2024-03-20"}})
    assert store.searches == []


@pytest.mark.parametrize("bad", ["../x", "a/b", "", ".."])
def test_a_bad_user_id_is_refused(retriever: GravityRetriever, store: SearchSpy, bad: str) -> None:
    with pytest.raises(ConfigurationError, match="cannot name a folder"):
        retriever.invoke(QUESTION, user_id=bad)
    with pytest.raises(ConfigurationError, match="cannot name a folder"):
        retriever.invoke(QUESTION, config={"configurable": {"user_id": bad}})
    assert store.searches == []


def test_engine_and_users_together_or_neither_are_refused(kbs: UserKBs, store: SearchSpy) -> None:
    engine = kbs.engine(user(1))
    with pytest.raises(ConfigurationError, match=r"exactly one of engine= .* or users="):
        GravityRetriever(engine=engine, users=kbs, vector_store=store, user_filter=own_filter)
    with pytest.raises(ConfigurationError, match=r"exactly one of engine= .* or users="):
        GravityRetriever(vector_store=store)
    with pytest.raises(ConfigurationError, match="exactly one of engine .* or users="):
        build_gravity_chain(engine, store, RunnableLambda(echo), users=kbs, user_filter=own_filter)
    with pytest.raises(ConfigurationError, match="exactly one of engine .* or users="):
        build_gravity_chain(None, store, RunnableLambda(echo))


def test_users_without_a_user_filter_are_refused(kbs: UserKBs, store: SearchSpy) -> None:
    with pytest.raises(ConfigurationError, match=r"needs user_filter=: the store holds every user's"):
        GravityRetriever(users=kbs, vector_store=store)
    with pytest.raises(ConfigurationError, match="needs user_filter="):
        build_gravity_chain(None, store, RunnableLambda(echo), users=kbs)


def test_a_user_filter_that_limits_nothing_is_refused(kbs: UserKBs, store: SearchSpy) -> None:
    shared = GravityRetriever(users=kbs, vector_store=store, user_filter=lambda u: {})
    with pytest.raises(ConfigurationError, match="user_filter must return"):
        shared.invoke(QUESTION, user_id=user(1))
    assert store.searches == []


def test_a_filter_of_the_call_cannot_replace_the_users(kbs: UserKBs, store: SearchSpy) -> None:
    shared = GravityRetriever(users=kbs, vector_store=store, user_filter=own_filter)
    with pytest.raises(ConfigurationError, match="filter is set by user_filter"):
        shared.invoke(QUESTION, user_id=user(1), filter=lambda doc: True)
    with_kwargs = GravityRetriever(
        users=kbs, vector_store=store, user_filter=own_filter, search_kwargs={"filter": lambda doc: True}
    )
    with pytest.raises(ConfigurationError, match="filter is set by user_filter"):
        with_kwargs.invoke(QUESTION, user_id=user(1))
    host = store.as_retriever(search_kwargs={"filter": lambda doc: True})
    with pytest.raises(ConfigurationError, match="filter is set by user_filter"):
        GravityRetriever(users=kbs, retriever=host, user_filter=own_filter).invoke(QUESTION, user_id=user(1))
    assert store.searches == []


class Plain(BaseRetriever):
    """A host retriever taking no keyword arguments: it would drop the user's filter."""

    store: InMemoryVectorStore

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.store.similarity_search(query)


def test_what_cannot_keep_to_one_user_is_refused(kbs: UserKBs, store: SearchSpy) -> None:
    with pytest.raises(ConfigurationError, match="Plain may not apply user_filter"):
        GravityRetriever(users=kbs, retriever=Plain(store=store), user_filter=own_filter)
    with pytest.raises(ConfigurationError, match="UserAnswerCaches"):
        GravityRetriever(
            users=kbs,
            vector_store=store,
            user_filter=own_filter,
            cache=AnswerCache(kbs.engine(user(1))),
        )
    with pytest.raises(ConfigurationError, match="UserAnswerCaches"):
        other = UserKBs(kbs.root, embedder=kbs.embedder)
        GravityRetriever(users=kbs, vector_store=store, user_filter=own_filter, cache=UserAnswerCaches(other))
    engine = kbs.engine(user(1))
    with pytest.raises(ConfigurationError, match="user_filter= goes with users="):
        GravityRetriever(engine=engine, vector_store=store, user_filter=own_filter)
    with pytest.raises(ConfigurationError, match="this one serves one engine"):
        GravityRetriever(engine=engine, vector_store=store).invoke(QUESTION, user_id=user(1))


def test_a_single_engine_retriever_ignores_a_configured_user(kbs: UserKBs, store: SearchSpy) -> None:
    # A chain's configurable reaches every runnable: a one-KB retriever in it is not the user's business.
    single = GravityRetriever(engine=kbs.engine(user(1)), vector_store=store, k=12)
    docs = single.invoke(QUESTION, config=configured(2))
    assert {d.metadata["user_id"] for d in docs} > {user(1)}  # no filter: every user's documents
    assert store.searches and all("filter" not in s for s in store.searches)


# -- the chain ---------------------------------------------------------------------------------


def chain_of(kbs: UserKBs, store: InMemoryVectorStore, **options: Any) -> Any:
    settings: dict[str, Any] = {"k": 4, "policy": EARLY, **options}
    return build_gravity_chain(
        None, store, RunnableLambda(echo), users=kbs, user_filter=own_filter, **settings
    )


def assert_prompt_of(n: int, shown: str, kbs: UserKBs, *, exact_anchors: bool = True) -> None:
    assert marks_of_others([shown], n) == set()
    assert f"Wombat{n}" in shown and f"quokka{n}" in shown
    if exact_anchors:
        assert kbs.query(user(n), QUESTION).text in shown
    assert PRIORITY_INSTRUCTION in shown


@pytest.mark.parametrize("token_budget", [None, 3000])
async def test_the_chain_shows_each_user_only_their_memories(
    kbs: UserKBs, store: SearchSpy, token_budget: int | None
) -> None:
    chain = chain_of(kbs, store, token_budget=token_budget)
    for n in USERS:
        shown = chain.invoke({"question": QUESTION}, config=configured(n))
        assert_prompt_of(n, shown, kbs, exact_anchors=token_budget is None)
        assert await chain.ainvoke({"question": QUESTION}, config=configured(n)) == shown
    assert store.searches and all("filter" in s for s in store.searches)


async def test_the_chain_serves_several_users_at_once(kbs: UserKBs, store: SearchSpy) -> None:
    chain = chain_of(kbs, store)
    order = [USERS[i % 3] for i in range(12)]  # more users than the LRU keeps engines (max_engines=2)
    configs = [configured(n) for n in order]
    for shown, n in zip(chain.batch([{"question": QUESTION}] * 12, config=configs), order, strict=True):
        assert_prompt_of(n, shown, kbs)
    for shown, n in zip(await chain.abatch([QUESTION] * 12, config=configs), order, strict=True):
        assert_prompt_of(n, shown, kbs)


def test_the_chain_gives_a_user_without_a_kb_their_documents_and_no_anchors(
    kbs: UserKBs, store: SearchSpy
) -> None:
    shown = chain_of(kbs, store).invoke({"question": QUESTION}, config=configured(NEWCOMER))
    assert f"Wombat{NEWCOMER}" in shown and marks_of_others([shown], NEWCOMER) == set()
    assert PRIORITY_INSTRUCTION not in shown and "<gravity_anchors>" not in shown


async def test_the_chain_and_the_anchors_runnable_refuse_a_call_without_a_good_user(
    kbs: UserKBs, store: SearchSpy
) -> None:
    chain = chain_of(kbs, store)
    with pytest.raises(ConfigurationError, match=HOW):
        chain.invoke({"question": QUESTION})
    with pytest.raises(ConfigurationError, match=HOW):
        await chain.ainvoke(QUESTION)
    with pytest.raises(ConfigurationError, match="cannot name a folder"):
        chain.invoke(QUESTION, config={"configurable": {"user_id": "../x"}})
    assert store.searches == []
    anchors = gravity_anchors_runnable(kbs)
    with pytest.raises(ConfigurationError, match=HOW):
        anchors.invoke(QUESTION)
    with pytest.raises(ConfigurationError, match="cannot name a folder"):
        anchors.invoke(QUESTION, config={"configurable": {"user_id": "../x"}})


async def test_the_anchors_runnable_takes_the_user_from_the_config(kbs: UserKBs) -> None:
    for source in (kbs, UserAnswerCaches(kbs)):
        anchors = gravity_anchors_runnable(source)
        for n in USERS:
            expected = kbs.query(user(n), QUESTION).text
            assert f"Wombat{n}" in expected
            assert anchors.invoke({"question": QUESTION}, config=configured(n)) == expected
            assert await anchors.ainvoke(QUESTION, config=configured(n)) == expected
        assert anchors.invoke(QUESTION, config=configured(NEWCOMER)) == ""


def test_after_forgetting_a_session_the_prompt_holds_none_of_it(tmp_path: Path, nlp: Any) -> None:
    kbs = UserKBs(tmp_path / "users", embedder=HashingEmbedder(), extractor=offline(nlp))
    kept = user_chat(5, session=2)  # the same user's second session, with other marks
    kbs.add("ana", [*user_chat(4), *kept])
    kbs.add("ben", user_chat(6))
    store = InMemoryVectorStore(GravityEmbeddings(kbs.embedder))
    for n, chat in ((4, user_chat(4)), (5, kept), (6, user_chat(6))):
        owner = "ben" if n == 6 else "ana"
        store.add_documents(
            [d.model_copy(update={"metadata": {**d.metadata, "user_id": owner}}) for d in turns(n, chat)]
        )
    chain = chain_of(kbs, store, k=8)
    ana: RunnableConfig = {"configurable": {"user_id": "ana"}}
    before = chain.invoke(QUESTION, config=ana)
    assert {"Wombat4", "Wombat5"} <= set(MARK.findall(before)) and "Wombat6" not in before

    kbs.forget("ana", sessions=["session_1"])  # GRAVITY's part; the host deletes its own documents:
    store.delete([d.id for d in turns(4, user_chat(4)) if d.id is not None])

    after = chain.invoke(QUESTION, config=ana)
    assert "Wombat5" in after and PRIORITY_INSTRUCTION in after
    assert not {"Wombat4", "quokka4", "Wombat6", "quokka6"} & set(MARK.findall(after))
    assert "Wombat6" in chain.invoke(QUESTION, config={"configurable": {"user_id": "ben"}})
