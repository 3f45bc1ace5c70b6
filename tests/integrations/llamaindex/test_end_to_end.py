"""End to end: VectorStoreIndex on Chroma (embedded and server) and in memory, mock LLM, hashing embedding.

The host's memory is the sample conversation, one TextNode per turn (metadata speaker, session,
id). Every search reaching the vector store is recorded, so the tests see that the question and each
GRAVITY expansion ran as its own search, with its own vector.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.query_engine import RetrieverQueryEngine, TransformQueryEngine
from llama_index.core.schema import MetadataMode
from llama_index.core.vector_stores import SimpleVectorStore, VectorStoreQuery, VectorStoreQueryResult
from llama_index.core.vector_stores.types import BasePydanticVectorStore
from llama_index.vector_stores.chroma import ChromaVectorStore

from gravity_core.context.policy import DEFAULT_POLICY, EXPANDING_POLICY, ContextPolicy
from gravity_core.embeddings import HashingEmbedder
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.schema import Utterance
from gravity_llamaindex import (
    AnchorProvider,
    GravityEmbedding,
    GravityFusionRetriever,
    GravityNodePostprocessor,
    GravityQueryTransform,
    is_gravity_node,
    nodes_from_utterances,
)

from .conftest import QUESTION, RecordingLLM, same_vector, vector_of

#: Expansions placed from the second result on, each with its best two hits: the second hits come
#: after every expansion's first, so the merge wants every expansion searched.
EVERY_SEARCHED = ContextPolicy(lead=1, every=2, depth=2)

BACKENDS = [
    "memory",
    "chroma-ephemeral",
    "chroma-persistent",
    pytest.param("chroma-server", marks=pytest.mark.server),
]


@pytest.fixture(params=BACKENDS)
def vector_store(request: pytest.FixtureRequest, tmp_path: Path) -> BasePydanticVectorStore:
    name = f"gravity-{uuid.uuid4().hex[:12]}"
    if request.param == "memory":
        return SimpleVectorStore()
    # chromadb keeps one in-memory system per process and refuses a second EphemeralClient with
    # other settings: use the settings gravity_core's Chroma index uses (telemetry off).
    settings = Settings(anonymized_telemetry=False)
    if request.param == "chroma-ephemeral":
        client: Any = chromadb.EphemeralClient(settings=settings)
    elif request.param == "chroma-persistent":
        client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=settings)
    else:
        host, port = request.getfixturevalue("chroma_server")
        client = chromadb.HttpClient(host=host, port=port, settings=settings)
    return ChromaVectorStore(chroma_collection=client.get_or_create_collection(name))


@pytest.fixture
def searches(
    vector_store: BasePydanticVectorStore, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[VectorStoreQuery]]:
    """Every query the vector store answers (its ``aquery`` goes through ``query`` too)."""
    recorded: list[VectorStoreQuery] = []
    store_class = type(vector_store)
    real = store_class.query

    def spy(self: BasePydanticVectorStore, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        recorded.append(query)
        return real(self, query, **kwargs)

    monkeypatch.setattr(store_class, "query", spy)
    yield recorded


@pytest.fixture
def index(
    vector_store: BasePydanticVectorStore, utterances: list[Utterance], hashing: HashingEmbedder
) -> VectorStoreIndex:
    nodes = nodes_from_utterances(utterances)
    assert {"speaker", "session", "id"} <= set(nodes[0].metadata)
    storage = StorageContext.from_defaults(vector_store=vector_store)
    return VectorStoreIndex(nodes, storage_context=storage, embed_model=GravityEmbedding(hashing))


def _check_searches(
    searches: list[VectorStoreQuery], context: AnchorContext, hashing: HashingEmbedder
) -> None:
    expected = [QUESTION, *context.expansions]
    assert sorted(s.query_str or "" for s in searches) == sorted(expected)  # async order may differ
    for search in searches:
        assert same_vector(search.query_embedding, vector_of(hashing, search.query_str or ""))


def _check_prompt(prompt: str, response: Any, context: AnchorContext) -> None:
    first, *memories = response.source_nodes
    assert is_gravity_node(first) and first.node.get_content() == context.text
    assert memories and not any(is_gravity_node(n) for n in memories)
    assert context.text in prompt
    for node in memories:
        assert node.node.get_content(MetadataMode.LLM) in prompt
        assert prompt.index(context.text) < prompt.index(node.node.get_content(MetadataMode.LLM))
    assert f"Query: {QUESTION}" in prompt
    assert str(response) == prompt  # MockLLM answers with the prompt it received


async def test_each_expansion_is_its_own_search_and_the_prompt_holds_anchors_and_memories(
    index: VectorStoreIndex,
    engine: GravityEngine,
    context: AnchorContext,
    hashing: HashingEmbedder,
    searches: list[VectorStoreQuery],
    engine_calls: list[str],
) -> None:
    provider = AnchorProvider(engine)
    llm = RecordingLLM()
    query_engine = RetrieverQueryEngine.from_args(
        GravityFusionRetriever.from_index(index, provider, similarity_top_k=6, policy=EVERY_SEARCHED),
        llm=llm,
        node_postprocessors=[GravityNodePostprocessor(provider)],
    )

    response = query_engine.query(QUESTION)
    assert len(searches) == 1 + len(context.expansions)
    _check_searches(searches, context, hashing)
    assert len(llm.prompts) == 1
    _check_prompt(llm.prompts[0], response, context)
    assert len(response.source_nodes) == 1 + 6

    searches.clear()
    async_response = await query_engine.aquery(QUESTION)
    assert len(searches) == 1 + len(context.expansions)
    _check_searches(searches, context, hashing)
    _check_prompt(llm.prompts[1], async_response, context)

    assert str(async_response) == str(response)
    assert [(n.node.node_id, n.score) for n in async_response.source_nodes] == [
        (n.node.node_id, n.score) for n in response.source_nodes
    ]
    assert engine_calls == [QUESTION]  # one shared provider: the engine ran once for both


async def test_transform_query_engine_route_gives_the_same_answer(
    index: VectorStoreIndex,
    engine: GravityEngine,
    context: AnchorContext,
    hashing: HashingEmbedder,
    searches: list[VectorStoreQuery],
    engine_calls: list[str],
) -> None:
    provider = AnchorProvider(engine)
    llm = RecordingLLM()
    inner = RetrieverQueryEngine.from_args(
        GravityFusionRetriever.from_index(index, provider, similarity_top_k=6, policy=EVERY_SEARCHED),
        llm=llm,
        node_postprocessors=[GravityNodePostprocessor(provider)],
    )
    query_engine = TransformQueryEngine(inner, GravityQueryTransform(provider))
    response = query_engine.query(QUESTION)
    _check_searches(searches, context, hashing)
    _check_prompt(llm.prompts[0], response, context)
    async_response = await query_engine.aquery(QUESTION)
    assert str(async_response) == str(response)
    assert engine_calls == [QUESTION]


async def test_expansions_the_merge_cannot_place_are_not_searched(
    index: VectorStoreIndex, engine: GravityEngine, context: AnchorContext, searches: list[VectorStoreQuery]
) -> None:
    """Within the expanding policy's lead every place is the question's: retrieve and aretrieve
    search only the question. When each search fetches fewer nodes than are returned, the
    expansions can place theirs: aretrieve searches them all, and retrieve returns the same nodes.
    The shipped policy places no expansion: it searches only the question either way."""
    provider = AnchorProvider(engine)
    retriever = GravityFusionRetriever.from_index(
        index, provider, similarity_top_k=6, policy=EXPANDING_POLICY
    )
    assert EXPANDING_POLICY.lead >= 6 and context.expansions
    nodes = retriever.retrieve(QUESTION)
    assert [s.query_str for s in searches] == [QUESTION]
    searches.clear()
    again = await retriever.aretrieve(QUESTION)
    assert [s.query_str for s in searches] == [QUESTION]
    assert [(n.node.node_id, n.score) for n in nodes] == [(n.node.node_id, n.score) for n in again]
    assert len(nodes) == 6

    short = GravityFusionRetriever.from_index(
        index, provider, similarity_top_k=6, per_query_top_k=2, policy=EXPANDING_POLICY
    )
    searches.clear()
    every = await short.aretrieve(QUESTION)
    assert sorted(s.query_str for s in searches) == sorted([QUESTION, *context.expansions])
    nodes = short.retrieve(QUESTION)  # the same nodes (an added node's score: of the searches run)
    assert [n.node.node_id for n in nodes] == [n.node.node_id for n in every]

    shipped = GravityFusionRetriever.from_index(index, provider, similarity_top_k=6, per_query_top_k=2)
    searches.clear()
    shipped.retrieve(QUESTION)
    await shipped.aretrieve(QUESTION)
    assert [s.query_str for s in searches] == [QUESTION, QUESTION]
    assert DEFAULT_POLICY.every == 0


def test_a_plain_query_engine_with_the_postprocessor_makes_one_search(
    index: VectorStoreIndex, engine: GravityEngine, context: AnchorContext, searches: list[VectorStoreQuery]
) -> None:
    """The postprocessor alone works on any query engine (no expansion searches then)."""
    llm = RecordingLLM()
    query_engine = index.as_query_engine(
        llm=llm, similarity_top_k=3, node_postprocessors=[GravityNodePostprocessor(engine)]
    )
    response = query_engine.query(QUESTION)
    assert len(searches) == 1
    _check_prompt(llm.prompts[0], response, context)
