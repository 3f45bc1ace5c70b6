"""One query engine serving many users, the user named per query (``GravityQueryBundle(q, user_id=...)``).

Each user's KB lives in a :class:`UserKBs`; the host's index holds every user's turns as nodes with
metadata ``user_id``. Every user's chat names words no other user's does (``quokka<n>``,
``Wombat<n>``), so a leak shows as another user's mark in the nodes, the anchors, the expansions or
the prompt.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.memory import Memory
from llama_index.core.query_engine import RetrieverQueryEngine, TransformQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores import SimpleVectorStore, VectorStoreQuery, VectorStoreQueryResult
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    ExactMatchFilter,
    FilterCondition,
    MetadataFilter,
    MetadataFilters,
)
from llama_index.vector_stores.chroma import ChromaVectorStore

from gravity_core.context.policy import DEFAULT_POLICY, EXPANDING_POLICY, ContextPolicy
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.serving.users import UserKBs
from gravity_llamaindex import (
    AnchorProvider,
    GravityAnchorsEvent,
    GravityEmbedding,
    GravityFusionRetriever,
    GravityMemoryBlock,
    GravityNodePostprocessor,
    GravityQueryBundle,
    GravityQueryTransform,
    gravity_qa_template,
    is_gravity_node,
)
from gravity_llamaindex.per_user import all_of as _all_of
from gravity_llamaindex.transform import user_id_of
from tests.core.serving.test_users import MARK, marks_of_others, user_chat

from .conftest import RecordingLLM
from .fakes import ScriptedRetriever

QUESTION = "When did Ana adopt a dog?"
HIKE = "Who went hiking with his sister near the ridge?"
BUILT = {"u1": 1, "u2": 2, "u3": 3}  # user id -> the number in their words
NEWCOMER, NEWCOMER_N = "u4", 4  # has turns in the host's index, no KB yet
HOW_TO = r"GravityQueryBundle\(question, user_id=\.\.\.\)"


def own(n: int) -> set[str]:
    return {f"quokka{n}", f"Wombat{n}"}


def by_user(user_id: str) -> MetadataFilters:
    return MetadataFilters(filters=[ExactMatchFilter(key="user_id", value=user_id)])


def host_nodes(user_id: str, utterances: list[Utterance]) -> list[TextNode]:
    return [
        TextNode(
            id_=f"{user_id}/{u.id}",
            text=f"{u.speaker}: {u.text}",
            metadata={"user_id": user_id, "session": u.session},
            excluded_llm_metadata_keys=["user_id", "session"],
            excluded_embed_metadata_keys=["user_id", "session"],
        )
        for u in utterances
    ]


def all_host_nodes() -> list[TextNode]:
    users = {**BUILT, NEWCOMER: NEWCOMER_N}
    return [node for user, n in users.items() for node in host_nodes(user, user_chat(n))]


@pytest.fixture
def kbs(tmp_path: Path, nlp: Any, hashing: HashingEmbedder) -> UserKBs:
    kbs = UserKBs(
        tmp_path / "users",
        embedder=hashing,
        extractor=lambda embedder, store: OfflineExtractor(embedder, pipeline=nlp),
        max_engines=3,
    )
    for user, n in BUILT.items():
        kbs.add(user, user_chat(n))
    return kbs


@pytest.fixture(params=["memory", "chroma"])
def vector_store(request: pytest.FixtureRequest) -> BasePydanticVectorStore:
    if request.param == "memory":
        return SimpleVectorStore()
    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    return ChromaVectorStore(chroma_collection=client.get_or_create_collection(f"users-{uuid.uuid4().hex}"))


@pytest.fixture
def searches(
    vector_store: BasePydanticVectorStore, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[VectorStoreQuery]]:
    """Every query the vector store answers."""
    recorded: list[VectorStoreQuery] = []
    store_class = type(vector_store)
    real = store_class.query

    def spy(self: BasePydanticVectorStore, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        recorded.append(query)
        return real(self, query, **kwargs)

    monkeypatch.setattr(store_class, "query", spy)
    yield recorded


@pytest.fixture
def index(vector_store: BasePydanticVectorStore, hashing: HashingEmbedder) -> VectorStoreIndex:
    return VectorStoreIndex(
        all_host_nodes(),
        storage_context=StorageContext.from_defaults(vector_store=vector_store),
        embed_model=GravityEmbedding(hashing),
    )


@pytest.fixture
def memory_index(hashing: HashingEmbedder) -> VectorStoreIndex:
    """The host's index in memory, for the tests that need no second backend."""
    return VectorStoreIndex(all_host_nodes(), embed_model=GravityEmbedding(hashing))


def fusion(
    index: VectorStoreIndex,
    users: UserKBs | AnchorProvider,
    embed_model: GravityEmbedding | None = None,
    policy: ContextPolicy = DEFAULT_POLICY,
) -> GravityFusionRetriever:
    """``from_index`` with ``user_filters``: each query's searches on the user's ``index.as_retriever``."""
    if isinstance(users, AnchorProvider):
        return GravityFusionRetriever.from_index(
            index,
            users,
            user_filters=by_user,
            similarity_top_k=8,
            per_query_top_k=4,
            embed_model=embed_model,
            policy=policy,
        )
    return GravityFusionRetriever.from_index(
        index,
        users=users,
        user_filters=by_user,
        similarity_top_k=8,
        per_query_top_k=4,
        embed_model=embed_model,
        policy=policy,
    )


def user_retrievers(index: VectorStoreIndex) -> Callable[[str], BaseRetriever]:
    """The constructor's form: a function from the user id to the user's retriever."""
    return lambda user_id: index.as_retriever(similarity_top_k=4, filters=by_user(user_id))


class KeywordRetriever(BaseRetriever):
    """A non-vector host retriever over a fixed list of nodes: ranks them by the words shared with
    the query (no embedding), and records every query it answers."""

    def __init__(self, nodes: list[TextNode], top_k: int = 4) -> None:
        super().__init__()
        self.nodes = nodes
        self.top_k = top_k
        self.bundles: list[QueryBundle] = []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.bundles.append(query_bundle)
        words = set(query_bundle.query_str.lower().split())
        scored = [(len(words & set(n.get_content().lower().split())), n) for n in self.nodes]
        ranked = sorted(scored, key=lambda pair: -pair[0])[: self.top_k]
        return [NodeWithScore(node=node, score=float(score)) for score, node in ranked]


def marks_in(texts: list[str], n: int) -> tuple[set[str], set[str]]:
    """(this user's marks found, other users' marks found)."""
    found = {m for text in texts for m in own(n) if m in text}
    return found, marks_of_others(texts, n)


def found_by_queries(nodes: list[NodeWithScore]) -> list[str]:
    return [str(hit["text"]) for n in nodes for hit in n.node.metadata.get("gravity_found_by", [])]


def anchors_events(events: list[BaseEvent]) -> list[GravityAnchorsEvent]:
    return [e for e in events if isinstance(e, GravityAnchorsEvent)]


# -- the bundle ----------------------------------------------------------------------------------


def test_the_bundle_carries_a_checked_user_id() -> None:
    bundle = GravityQueryBundle(QUESTION, user_id="u1")
    assert user_id_of(bundle) == "u1" and bundle.question_date is None
    assert user_id_of(GravityQueryBundle(QUESTION)) is None
    for bad in ("../x", "a/b", ".", ""):
        with pytest.raises(ConfigurationError, match="user id"):
            GravityQueryBundle(QUESTION, user_id=bad)


# -- the fusion retriever: nodes, expansions and anchors of the query's user only ---------------


def check_retrieved(
    nodes: list[NodeWithScore], user: str, events: list[GravityAnchorsEvent], provider: AnchorProvider
) -> None:
    """The nodes, the expansions searched and the anchors selected are all ``user``'s."""
    n = BUILT[user]
    assert nodes and {node.node.metadata["user_id"] for node in nodes} == {user}
    mine, others = marks_in([node.node.get_content() for node in nodes], n)
    assert mine and not others
    queries = found_by_queries(nodes)
    assert any(q != QUESTION for q in queries), "no expansion reached the host"
    assert marks_of_others(queries, n) == set()
    (event,) = [e for e in events if e.user_id == user]
    assert marks_of_others(event.expansions, n) == set() and event.expansions
    anchors = provider.cached(QUESTION, user_id=user)
    assert anchors is not None
    mine, others = marks_in([anchors.text], n)
    assert mine == own(n) and not others


def test_the_fusion_retriever_searches_and_expands_for_the_querys_user_only(
    kbs: UserKBs,
    index: VectorStoreIndex,
    hashing: HashingEmbedder,
    searches: list[VectorStoreQuery],
    gravity_events: list[BaseEvent],
) -> None:
    for retriever in (
        fusion(index, kbs, policy=EXPANDING_POLICY),  # each user's retriever embeds its queries
        # embedded once, stored vectors reused
        fusion(index, kbs, embed_model=GravityEmbedding(hashing), policy=EXPANDING_POLICY),
        GravityFusionRetriever(
            user_retrievers(index), users=kbs, similarity_top_k=8, policy=EXPANDING_POLICY
        ),
    ):
        gravity_events.clear()
        for user in BUILT:
            searches.clear()
            nodes = retriever.retrieve(GravityQueryBundle(QUESTION, user_id=user))
            check_retrieved(nodes, user, anchors_events(gravity_events), retriever.provider)
            assert len(searches) > 1  # the question and its expansions, each restricted to the user
            assert all(s.filters == by_user(user) for s in searches)


async def test_the_async_fusion_retriever_keeps_concurrent_users_apart(
    kbs: UserKBs,
    index: VectorStoreIndex,
    searches: list[VectorStoreQuery],
    gravity_events: list[BaseEvent],
) -> None:
    retriever = fusion(index, kbs, policy=EXPANDING_POLICY)  # the expansions too keep to their user
    users = list(BUILT) * 2
    results = await asyncio.gather(
        *(retriever.aretrieve(GravityQueryBundle(QUESTION, user_id=u)) for u in users)
    )
    events = anchors_events(gravity_events)
    for user, nodes in zip(users, results, strict=True):
        assert {node.node.metadata["user_id"] for node in nodes} == {user}
        mine, others = marks_in(
            [node.node.get_content() for node in nodes] + found_by_queries(nodes), BUILT[user]
        )
        assert mine and not others
    assert {e.user_id for e in events} == set(BUILT)
    for event in events:
        assert event.user_id is not None
        assert marks_of_others(event.expansions, BUILT[event.user_id]) == set()
    assert {str(s.filters) for s in searches} == {str(by_user(u)) for u in BUILT}


def test_a_non_vector_retriever_per_user_serves_each_user_only_theirs(
    kbs: UserKBs, gravity_events: list[BaseEvent]
) -> None:
    made: dict[str, list[KeywordRetriever]] = {}

    def keyword_retriever(user_id: str) -> BaseRetriever:
        retriever = KeywordRetriever(host_nodes(user_id, user_chat(BUILT[user_id])))
        made.setdefault(user_id, []).append(retriever)
        return retriever

    fused = GravityFusionRetriever(keyword_retriever, users=kbs, similarity_top_k=8, policy=EXPANDING_POLICY)
    for user in BUILT:
        nodes = fused.retrieve(GravityQueryBundle(QUESTION, user_id=user))
        check_retrieved(nodes, user, anchors_events(gravity_events), fused.provider)
        (searched,) = made[user]  # one retriever per query, for every search of the query
        assert len(searched.bundles) > 1 and searched.bundles[0].query_str == QUESTION
        assert all(b.embedding is None for b in searched.bundles)  # no embed model: the bare text
        assert fused.retriever_for(user) is not searched  # a new one per query


async def test_a_non_vector_retriever_per_user_async(kbs: UserKBs) -> None:
    def keyword_retriever(user_id: str) -> BaseRetriever:
        return KeywordRetriever(host_nodes(user_id, user_chat(BUILT[user_id])))

    fused = GravityFusionRetriever(keyword_retriever, users=kbs, similarity_top_k=8, policy=EXPANDING_POLICY)
    users = list(BUILT) * 2
    results = await asyncio.gather(*(fused.aretrieve(GravityQueryBundle(QUESTION, user_id=u)) for u in users))
    for user, nodes in zip(users, results, strict=True):
        assert nodes and {n.node.metadata["user_id"] for n in nodes} == {user}
        mine, others = marks_in([n.node.get_content() for n in nodes] + found_by_queries(nodes), BUILT[user])
        assert mine and not others


def test_the_users_filters_join_the_retrievers_own(
    kbs: UserKBs, index: VectorStoreIndex, searches: list[VectorStoreQuery]
) -> None:
    index.insert_nodes(host_nodes("u2", user_chat(12, session=2)))  # u2's later turns: quokka12
    index.insert_nodes(host_nodes("u3", user_chat(13, session=2)))
    later = MetadataFilters(filters=[MetadataFilter(key="session", value="session_2")])
    retriever = GravityFusionRetriever.from_index(
        index, users=kbs, user_filters=by_user, similarity_top_k=8, filters=later
    )
    nodes = retriever.retrieve(GravityQueryBundle(QUESTION, user_id="u2"))
    assert nodes and {(n.node.metadata["user_id"], n.node.metadata["session"]) for n in nodes} == {
        ("u2", "session_2")
    }
    assert set(MARK.findall(" ".join(n.node.get_content() for n in nodes))) == own(12)
    both = MetadataFilters(filters=[*later.filters, *by_user("u2").filters], condition=FilterCondition.AND)
    assert searches and all(s.filters == both for s in searches)  # flattened: one AND list
    assert later == MetadataFilters(filters=[MetadataFilter(key="session", value="session_2")])  # untouched


def test_filters_that_cannot_be_flattened_are_nested() -> None:
    later = MetadataFilters(filters=[MetadataFilter(key="session", value="session_2")])
    either = MetadataFilters(
        filters=[*by_user("u1").filters, *by_user("u2").filters], condition=FilterCondition.OR
    )
    assert _all_of(later, either) == MetadataFilters(filters=[later, either], condition=FilterCondition.AND)
    assert _all_of(None, either) is either
    assert _all_of(MetadataFilters(filters=[]), either) is either


# -- whole query engines: the prompt holds the asking user's words only -------------------------


def postprocessed_engine(index: VectorStoreIndex, kbs: UserKBs) -> RetrieverQueryEngine:
    return RetrieverQueryEngine.from_args(
        fusion(index, kbs), llm=RecordingLLM(), node_postprocessors=[GravityNodePostprocessor(users=kbs)]
    )


def transformed_engine(index: VectorStoreIndex, kbs: UserKBs) -> TransformQueryEngine:
    # The transform's expansions are searched under a policy that places them.
    inner = RetrieverQueryEngine.from_args(
        fusion(index, kbs, policy=EXPANDING_POLICY),
        llm=RecordingLLM(),
        node_postprocessors=[GravityNodePostprocessor(users=kbs)],
    )
    return TransformQueryEngine(inner, GravityQueryTransform(users=kbs))


def ask(query_engine: Any, user: str, question: str = QUESTION) -> tuple[str, list[NodeWithScore]]:
    """The prompt the LLM got (the recording LLM answers with it) and the source nodes."""
    response = query_engine.query(GravityQueryBundle(question, user_id=user))
    return str(response), list(response.source_nodes)


def check_answer(prompt: str, sources: list[NodeWithScore], user: str) -> None:
    n = BUILT[user]
    mine, others = marks_in([prompt], n)
    assert mine == own(n) and not others
    anchor = sources[0]
    assert is_gravity_node(anchor) and anchor.node.metadata["gravity_user_id"] == user
    assert anchor.node.get_content() in prompt  # the anchors reached the prompt
    assert marks_of_others(found_by_queries(sources[1:]), n) == set()
    assert {s.node.metadata["user_id"] for s in sources[1:]} == {user}


@pytest.mark.parametrize("route", ["postprocessor", "transform"])
def test_each_user_in_turn_gets_a_prompt_of_their_own(
    kbs: UserKBs, index: VectorStoreIndex, route: str
) -> None:
    query_engine = (postprocessed_engine if route == "postprocessor" else transformed_engine)(index, kbs)
    for user in [*BUILT, *BUILT]:
        check_answer(*ask(query_engine, user), user)


def test_the_transform_expands_from_the_querys_user_and_hands_the_user_on(kbs: UserKBs) -> None:
    transform = GravityQueryTransform(users=kbs)
    for user, n in BUILT.items():
        out = transform.run(GravityQueryBundle(QUESTION, user_id=user))
        assert isinstance(out, GravityQueryBundle) and out.user_id == user
        assert out.custom_embedding_strs and len(out.custom_embedding_strs) > 1
        mine, others = marks_in(out.custom_embedding_strs, n)
        assert mine and not others


@pytest.mark.parametrize("route", ["postprocessor", "transform"])
def test_concurrent_queries_of_different_users_from_threads(
    kbs: UserKBs, index: VectorStoreIndex, route: str
) -> None:
    query_engine = (postprocessed_engine if route == "postprocessor" else transformed_engine)(index, kbs)
    jobs = [(user, question) for _ in range(4) for user in BUILT for question in (QUESTION, HIKE)]
    with ThreadPoolExecutor(max_workers=6) as threads:
        answers = list(threads.map(lambda job: ask(query_engine, *job), jobs))
    for (user, question), (prompt, sources) in zip(jobs, answers, strict=True):
        n = BUILT[user]
        mine, others = marks_in([prompt], n)
        assert mine and not others, (user, question)
        assert sources[0].node.metadata["gravity_user_id"] == user


async def test_concurrent_async_queries_of_different_users(kbs: UserKBs, index: VectorStoreIndex) -> None:
    query_engine = postprocessed_engine(index, kbs)
    users = list(BUILT) * 3
    responses = await asyncio.gather(
        *(query_engine.aquery(GravityQueryBundle(QUESTION, user_id=u)) for u in users)
    )
    for user, response in zip(users, responses, strict=True):
        check_answer(str(response), list(response.source_nodes), user)


# -- the cache: the same question from two users --------------------------------------------------


def test_the_same_question_from_two_users_gets_each_their_own_anchors(
    kbs: UserKBs, monkeypatch: pytest.MonkeyPatch, gravity_events: list[BaseEvent]
) -> None:
    calls: list[str] = []
    real = GravityEngine.query

    def spy(self: GravityEngine, question: str, **kwargs: Any) -> Any:
        calls.append(question)
        return real(self, question, **kwargs)

    monkeypatch.setattr(GravityEngine, "query", spy)
    provider = AnchorProvider(users=kbs)
    first = provider.get(QUESTION, user_id="u1")
    second = provider.get(QUESTION, user_id="u2")
    assert "Wombat1" in first.text and "Wombat2" not in first.text
    assert "Wombat2" in second.text and "Wombat1" not in second.text
    assert provider.get(QUESTION, user_id="u1") is first  # each user's answer is cached apart
    assert provider.cached(QUESTION, user_id="u2") is second
    assert provider.cached(QUESTION, user_id="u3") is None
    assert calls == [QUESTION, QUESTION]
    assert [e.user_id for e in anchors_events(gravity_events)] == ["u1", "u2"]
    assert provider.for_user("u1").engine is kbs.engine("u1")

    postprocessor = GravityNodePostprocessor(provider)  # shares the provider and its cache
    one = postprocessor.postprocess_nodes([], query_bundle=GravityQueryBundle(QUESTION, user_id="u1"))[0]
    two = postprocessor.postprocess_nodes([], query_bundle=GravityQueryBundle(QUESTION, user_id="u2"))[0]
    assert one.node.get_content() == first.text and two.node.get_content() == second.text
    assert one.node.node_id != two.node.node_id
    assert calls == [QUESTION, QUESTION]


def test_a_deleted_users_cached_anchors_are_never_served_again(kbs: UserKBs) -> None:
    provider = AnchorProvider(users=kbs)
    assert "Wombat1" in provider.get(QUESTION, user_id="u1").text
    kbs.delete("u1")
    assert provider.get(QUESTION, user_id="u1").text == ""
    kbs.add("u1", user_chat(21))  # the id is reused by someone else
    again = provider.get(QUESTION, user_id="u1").text
    assert set(MARK.findall(again)) == own(21)


def test_the_memory_block_serves_the_named_user(kbs: UserKBs) -> None:
    memory = Memory.from_defaults(
        session_id="chat", memory_blocks=[GravityMemoryBlock(users=kbs, user_id="u1")]
    )
    system = memory.get(input=QUESTION)[0].content or ""
    assert "Wombat1" in system and marks_of_others([system], 1) == set()
    other = memory.get(input=QUESTION, user_id="u3")[0].content or ""
    assert "Wombat3" in other and marks_of_others([other], 3) == set()
    anonymous = Memory.from_defaults(session_id="x", memory_blocks=[GravityMemoryBlock(users=kbs)])
    with pytest.raises(ConfigurationError, match=HOW_TO):
        anonymous.get(input=QUESTION)


# -- refusals ----------------------------------------------------------------------------------


def test_a_query_without_a_user_is_refused_with_the_how_to(
    kbs: UserKBs, memory_index: VectorStoreIndex
) -> None:
    for query in (
        lambda: postprocessed_engine(memory_index, kbs).query(QUESTION),
        lambda: fusion(memory_index, kbs).retrieve(QUESTION),
        lambda: GravityNodePostprocessor(users=kbs).postprocess_nodes([], query_str=QUESTION),
        lambda: GravityQueryTransform(users=kbs).run(QUESTION),
        lambda: AnchorProvider(users=kbs).get(QUESTION),
    ):
        with pytest.raises(ConfigurationError, match=HOW_TO):
            query()


async def test_an_async_query_without_a_user_is_refused(kbs: UserKBs, memory_index: VectorStoreIndex) -> None:
    with pytest.raises(ConfigurationError, match=HOW_TO):
        await fusion(memory_index, kbs).aretrieve(GravityQueryBundle(QUESTION))
    with pytest.raises(ConfigurationError, match=HOW_TO):
        await GravityNodePostprocessor(users=kbs).apostprocess_nodes([], query_str=QUESTION)


def test_bad_user_ids_are_refused(kbs: UserKBs) -> None:
    provider = AnchorProvider(users=kbs)
    for bad in ("../x", "a/b", ".hidden"):
        with pytest.raises(ConfigurationError, match="user id"):
            provider.get(QUESTION, user_id=bad)
        with pytest.raises(ConfigurationError, match="user id"):
            GravityMemoryBlock(users=kbs, user_id=bad)
    assert not (kbs.root.parent / "x").exists()


def test_engine_and_users_together_or_neither_are_refused(
    kbs: UserKBs, engine: GravityEngine, memory_index: VectorStoreIndex
) -> None:
    for build in (
        lambda: AnchorProvider(engine, users=kbs),
        lambda: GravityNodePostprocessor(engine, users=kbs),
        lambda: GravityQueryTransform(engine, users=kbs),
        lambda: GravityFusionRetriever(user_retrievers(memory_index), engine, users=kbs),
        lambda: GravityFusionRetriever.from_index(memory_index, engine, users=kbs, user_filters=by_user),
        lambda: GravityMemoryBlock(engine, users=kbs),
    ):
        with pytest.raises(ConfigurationError, match="not both"):
            build()
    for build in (AnchorProvider, GravityNodePostprocessor, GravityQueryTransform, GravityMemoryBlock):
        with pytest.raises(ConfigurationError, match="engine= .* or users="):
            build()
    with pytest.raises(ConfigurationError, match="users= expects a UserKBs"):
        GravityNodePostprocessor(users="kbs/")  # type: ignore[arg-type]


def test_the_fusion_retriever_refuses_users_it_cannot_keep_apart(
    kbs: UserKBs, engine: GravityEngine, memory_index: VectorStoreIndex
) -> None:
    host = memory_index.as_retriever()
    one_for_all = r"would mix users.*function from the user id.*lambda user_id: index\.as_retriever\("
    for one in (host, ScriptedRetriever()):  # one retriever for every user
        with pytest.raises(ConfigurationError, match=one_for_all):
            GravityFusionRetriever(one, users=kbs)
        with pytest.raises(ConfigurationError, match=one_for_all):
            GravityFusionRetriever(one, AnchorProvider(users=kbs))  # a shared provider of users
    with pytest.raises(ConfigurationError, match="would mix.*pass user_filters="):
        GravityFusionRetriever.from_index(memory_index, users=kbs)
    with pytest.raises(ConfigurationError, match="would mix.*pass user_filters="):
        GravityFusionRetriever.from_index(memory_index, AnchorProvider(users=kbs))
    with pytest.raises(ConfigurationError, match="serves many users: pass users="):
        GravityFusionRetriever(user_retrievers(memory_index), engine)
    with pytest.raises(ConfigurationError, match="pass users="):
        GravityFusionRetriever.from_index(memory_index, engine, user_filters=by_user)
    with pytest.raises(ConfigurationError, match="BaseRetriever"):
        GravityFusionRetriever("not a retriever", users=kbs)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="filters must be MetadataFilters"):
        GravityFusionRetriever.from_index(
            memory_index, users=kbs, user_filters=by_user, filters={"session": "session_2"}
        )
    odd = GravityFusionRetriever(by_user, users=kbs)  # type: ignore[arg-type]  # returns filters
    with pytest.raises(ConfigurationError, match="must return a LlamaIndex BaseRetriever for user 'u1'"):
        odd.retrieve(GravityQueryBundle(QUESTION, user_id="u1"))
    odd = GravityFusionRetriever.from_index(
        memory_index,
        users=kbs,
        user_filters=lambda u: {"user_id": u},  # type: ignore[arg-type,return-value]
    )
    with pytest.raises(ConfigurationError, match="must return MetadataFilters"):
        odd.retrieve(GravityQueryBundle(QUESTION, user_id="u1"))
    with pytest.raises(ConfigurationError, match=r"retriever_for\(user_id\)"):
        _ = odd.retriever
    with pytest.raises(ConfigurationError, match=HOW_TO):
        odd.retriever_for(None)


def test_the_qa_template_refuses_many_users(kbs: UserKBs) -> None:
    with pytest.raises(ConfigurationError, match="cannot tell users apart"):
        gravity_qa_template(AnchorProvider(users=kbs))


def test_one_engine_components_keep_working_and_ignore_the_user(engine: GravityEngine) -> None:
    postprocessor = GravityNodePostprocessor(engine)
    plain = postprocessor.postprocess_nodes([], query_str=QUESTION)
    named = postprocessor.postprocess_nodes([], query_bundle=GravityQueryBundle(QUESTION, user_id="u1"))
    assert [n.node.get_content() for n in plain] == [n.node.get_content() for n in named]
    assert "gravity_user_id" not in (plain[0].node.metadata if plain else {})


# -- users without a KB, and forgetting ---------------------------------------------------------


def test_a_user_without_a_kb_gets_only_their_nodes_and_no_anchors(
    kbs: UserKBs, index: VectorStoreIndex, gravity_events: list[BaseEvent]
) -> None:
    assert NEWCOMER not in kbs.users()
    nodes = fusion(index, kbs).retrieve(GravityQueryBundle(QUESTION, user_id=NEWCOMER))
    assert nodes and {n.node.metadata["user_id"] for n in nodes} == {NEWCOMER}
    assert all(n.node.metadata["gravity_slot"] == "question" for n in nodes)  # no expansion
    prompt, sources = ask(postprocessed_engine(index, kbs), NEWCOMER)
    assert not any(is_gravity_node(s) for s in sources)
    mine, others = marks_in([prompt], NEWCOMER_N)
    assert mine and not others
    assert all(
        not e.anchors and not e.expansions for e in anchors_events(gravity_events) if e.user_id == NEWCOMER
    )
    assert kbs.users() == sorted(BUILT)  # asking built nothing


def test_after_a_forget_the_next_query_holds_none_of_the_forgotten_words(
    kbs: UserKBs, index: VectorStoreIndex
) -> None:
    later = user_chat(11, session=2)  # u1's second session names quokka11 / Wombat11
    kbs.add("u1", later)
    index.insert_nodes(host_nodes("u1", later))
    query_engine = postprocessed_engine(index, kbs)

    before, sources = ask(query_engine, "u1", HIKE)
    assert own(1) <= set(MARK.findall(sources[0].node.get_content()))  # the anchors name session 1

    kbs.forget("u1", sessions=["session_1"])
    index.delete_nodes([f"u1/{u.id}" for u in user_chat(1)])  # the host forgets its copy too
    after, sources = ask(query_engine, "u1", HIKE)  # the same question: no stale cached anchors
    assert set(MARK.findall(after)) == own(11)
    assert is_gravity_node(sources[0]) and set(MARK.findall(sources[0].node.get_content())) == own(11)
    assert not own(1) & set(MARK.findall(" ".join(found_by_queries(sources[1:]))))
