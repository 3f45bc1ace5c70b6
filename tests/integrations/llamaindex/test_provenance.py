"""GravityFusionRetriever's retrieval by provenance: the selected anchors' source turns fetched from the
index by id (the vector store's get_nodes, else the docstore), and what it says when it cannot."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.postprocessor import SimilarityPostprocessor
from llama_index.core.schema import BaseNode, NodeWithScore, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    ExactMatchFilter,
    MetadataFilters,
)
from llama_index.vector_stores.chroma import ChromaVectorStore

from gravity_core.context.policy import DEFAULT_POLICY
from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.serving.provenance import UTTERANCE_IDS_KEY
from gravity_core.serving.users import UserKBs
from gravity_llamaindex import (
    AnchorProvider,
    GravityEmbedding,
    GravityFusionRetriever,
    GravityQueryBundle,
    GravityQueryTransform,
    nodes_from_utterances,
)

#: A question whose anchors include events, whose source turns the shipped policy fetches.
QUESTION = "Where does Maya work now, and what happened with Biscuit?"
K = 8
LOGGER = "gravity_core.serving.provenance"


class NoGetNodesChroma(ChromaVectorStore):
    """A vector store keeping the nodes' text but unable to hand them back by id."""

    def get_nodes(self, node_ids: list[str] | None = None, filters: Any = None) -> list[BaseNode]:
        raise NotImplementedError("no get_nodes here")

    async def aget_nodes(self, node_ids: list[str] | None = None, filters: Any = None) -> list[BaseNode]:
        raise NotImplementedError("no get_nodes here")


def chroma(store_class: type[ChromaVectorStore] = ChromaVectorStore) -> ChromaVectorStore:
    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    return store_class(chroma_collection=client.get_or_create_collection(f"prov-{uuid.uuid4().hex[:12]}"))


def make_index(
    backend: str,
    nodes: list[TextNode],
    hashing: HashingEmbedder,
    store: BasePydanticVectorStore | None = None,
) -> VectorStoreIndex:
    """``memory``: SimpleVectorStore (the text in the docstore); ``chroma``: the text in Chroma (and
    the docstore); ``chroma-reopened``: the collection reopened, so only Chroma holds the text."""
    model = GravityEmbedding(hashing)
    if backend == "memory":
        return VectorStoreIndex(nodes, embed_model=model)
    vector_store = store if store is not None else chroma()
    index = VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=vector_store), embed_model=model
    )
    return (
        VectorStoreIndex.from_vector_store(vector_store, embed_model=model)
        if backend == "chroma-reopened"
        else index
    )


def provenance(nodes: list[NodeWithScore]) -> list[NodeWithScore]:
    return [n for n in nodes if n.node.metadata["gravity_slot"] == "provenance"]


def ids(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.node_id for n in nodes]


def plain(index: VectorStoreIndex, question: str = QUESTION) -> list[NodeWithScore]:
    return index.as_retriever(similarity_top_k=K).retrieve(question)


def anchor_sources(engine: GravityEngine) -> dict[str, tuple[str, ...]]:
    """The question's anchors of the kinds the shipped policy fetches from, and their source turns."""
    sources = {
        s.label: tuple(s.utterance_ids)
        for s in engine.query(QUESTION).sources
        if s.kind in DEFAULT_POLICY.source_kinds
    }
    assert any(label.startswith("event:") for label in sources), "the question must have event anchors"
    return sources


def test_by_default_the_question_leads_and_the_anchors_source_turns_join_explained(
    engine: GravityEngine, utterances: list[Utterance], hashing: HashingEmbedder
) -> None:
    """The shipped policy: the question's own first hits, then a source turn at every second place;
    no expansion among the question's first 25 hits."""
    index = make_index("memory", nodes_from_utterances(utterances), hashing)
    nodes = GravityFusionRetriever.from_index(index, engine, similarity_top_k=K).retrieve(QUESTION)
    own = plain(index)
    lead = DEFAULT_POLICY.source_lead
    assert ids(nodes[: lead + 1]) == ids(own[: lead + 1])
    slots = [n.node.metadata["gravity_slot"] for n in nodes]
    assert "expansion" not in slots and slots[lead + 1] == "provenance"
    # Each fetched node names the anchor whose source it is, and that anchor lists it.
    sources = anchor_sources(engine)
    for node in provenance(nodes):
        (why,) = [f for f in node.node.metadata["gravity_found_by"] if f["query"] == "provenance"]
        assert node.node.node_id in sources[why["text"]]
        assert why["rank"] >= 1 and why["index"] >= 1
        # Kept out of the LLM's and the embedder's text, like every GRAVITY key.
        assert "gravity_found_by" in node.node.excluded_llm_metadata_keys
    # The question's places keep the host's scores; a fetched node no search found takes the score
    # of the node placed before it, so a similarity cutoff keeps it when it keeps that node.
    scores = {n.node.node_id: n.score for n in own}
    unsearched = 0
    for at, node in enumerate(nodes):
        if node.node.metadata["gravity_slot"] == "question":
            assert node.score == pytest.approx(scores[node.node.node_id])
        elif node.node.node_id not in scores:
            assert node.score == nodes[at - 1].score
            unsearched += 1
    assert unsearched
    cutoff = nodes[lead + 1].score
    kept = SimilarityPostprocessor(similarity_cutoff=cutoff).postprocess_nodes(nodes)
    assert ids(kept)[: lead + 2] == ids(nodes[: lead + 2])
    without = GravityFusionRetriever.from_index(
        index, engine, similarity_top_k=K, policy=replace(DEFAULT_POLICY, source_every=0)
    ).retrieve(QUESTION)
    assert ids(without) == ids(own)


@pytest.mark.parametrize("backend", ["memory", "chroma", "chroma-reopened"])
def test_source_nodes_come_sync_and_async_alike(
    engine: GravityEngine, utterances: list[Utterance], hashing: HashingEmbedder, backend: str
) -> None:
    index = make_index(backend, nodes_from_utterances(utterances), hashing)
    retriever = GravityFusionRetriever.from_index(index, engine, similarity_top_k=K)
    nodes = retriever.retrieve(QUESTION)
    fetched = provenance(nodes)
    assert fetched and all(n.node.get_content().strip() for n in fetched)
    assert all(n.node.metadata["session"] for n in fetched)  # the host's metadata, as indexed
    anodes = asyncio.run(retriever.aretrieve(QUESTION))
    assert ids(anodes) == ids(nodes)
    assert [n.node.metadata["gravity_slot"] for n in anodes] == [
        n.node.metadata["gravity_slot"] for n in nodes
    ]
    assert [n.score for n in anodes] == [n.score for n in nodes]


def test_a_retriever_given_without_its_index_is_told_once_and_searched_alone(
    engine: GravityEngine,
    utterances: list[Utterance],
    hashing: HashingEmbedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """LlamaIndex's VectorIndexRetriever keeps its index private: there is nothing public to fetch from."""
    index = make_index("memory", nodes_from_utterances(utterances), hashing)
    retriever = GravityFusionRetriever(index.as_retriever(similarity_top_k=K), engine, similarity_top_k=K)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        first = retriever.retrieve(QUESTION)
        asyncio.run(retriever.aretrieve(QUESTION))
    assert not provenance(first) and ids(first) == ids(plain(index))
    told = [r.getMessage() for r in caplog.records if "cannot fetch documents by id" in r.getMessage()]
    assert len(told) == 1 and "VectorIndexRetriever" in told[0] and "from_index" in told[0]


def test_a_store_without_get_nodes_and_an_empty_docstore_is_told_once_and_searched_alone(
    engine: GravityEngine,
    utterances: list[Utterance],
    hashing: HashingEmbedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    index = make_index(
        "chroma-reopened", nodes_from_utterances(utterances), hashing, chroma(NoGetNodesChroma)
    )
    retriever = GravityFusionRetriever.from_index(index, engine, similarity_top_k=K)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        first = retriever.retrieve(QUESTION)
        again = asyncio.run(retriever.aretrieve(QUESTION))
    assert not provenance(first) and ids(first) == ids(plain(index)) == ids(again)
    told = [r.getMessage() for r in caplog.records if "cannot fetch documents by id" in r.getMessage()]
    assert len(told) == 1 and "NoGetNodesChroma" in told[0] and "store_nodes_override" in told[0]
    assert "holds none of the turns" not in caplog.text


def test_a_store_without_get_nodes_is_read_through_the_docstore_that_holds_the_nodes(
    engine: GravityEngine, utterances: list[Utterance], hashing: HashingEmbedder
) -> None:
    store = chroma(NoGetNodesChroma)
    index = VectorStoreIndex(
        nodes_from_utterances(utterances),
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=GravityEmbedding(hashing),
        store_nodes_override=True,
    )
    assert provenance(GravityFusionRetriever.from_index(index, engine, similarity_top_k=K).retrieve(QUESTION))


def test_nodes_indexed_under_other_ids_are_warned_about_once_naming_the_id(
    engine: GravityEngine,
    utterances: list[Utterance],
    hashing: HashingEmbedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    renamed = [
        TextNode(id_=f"node-{n}", text=node.text, metadata=node.metadata)
        for n, node in enumerate(nodes_from_utterances(utterances))
    ]
    index = make_index("memory", renamed, hashing)
    retriever = GravityFusionRetriever.from_index(index, engine, similarity_top_k=K)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        nodes = retriever.retrieve(QUESTION)
        asyncio.run(retriever.aretrieve(QUESTION))
    assert not provenance(nodes) and ids(nodes) == ids(plain(index))
    warned = [r.getMessage() for r in caplog.records if "holds none of the turns" in r.getMessage()]
    assert len(warned) == 1 and UTTERANCE_IDS_KEY in warned[0]
    first_asked = DEFAULT_POLICY.source_turns(engine.query(QUESTION).sources)[0].utterance_id
    assert repr(first_asked) in warned[0]


@pytest.mark.parametrize("backend", ["memory", "chroma"])
def test_a_node_of_several_turns_is_fetched_once_for_them(
    engine: GravityEngine, utterances: list[Utterance], hashing: HashingEmbedder, backend: str
) -> None:
    """One node holds two of the turns asked for (listed under UTTERANCE_IDS_KEY, a list or, for
    Chroma's scalar metadata, a comma-separated string): it is fetched and placed once."""
    turns = DEFAULT_POLICY.source_turns(engine.query(QUESTION).sources)
    first, second = turns[0].utterance_id, turns[1].utterance_id
    by_id = {node.node_id: node for node in nodes_from_utterances(utterances)}
    listed: Any = [first, second] if backend == "memory" else f"{first},{second}"
    chunk = TextNode(
        id_=first,
        text=f"{by_id[first].text}\n{by_id[second].text}",
        metadata={**by_id[first].metadata, UTTERANCE_IDS_KEY: listed},
    )
    others = [node for node_id, node in by_id.items() if node_id not in (first, second)]
    index = make_index(backend, [*others, chunk], hashing)
    nodes = GravityFusionRetriever.from_index(index, engine, similarity_top_k=K).retrieve(QUESTION)
    assert len(set(ids(nodes))) == len(nodes) and first in ids(nodes) and second not in ids(nodes)
    (held,) = [n for n in nodes if n.node.node_id == first]
    found_by = [f for f in held.node.metadata["gravity_found_by"] if f["query"] == "provenance"]
    assert [f["text"] for f in found_by] == [turns[0].anchor]  # once, for the first turn it holds
    assert provenance(nodes)


def test_a_filtered_search_fetches_nothing(
    engine: GravityEngine,
    utterances: list[Utterance],
    hashing: HashingEmbedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A fetch by id could not apply the retriever's filters: no source turn is fetched."""
    index = make_index("memory", nodes_from_utterances(utterances), hashing)
    session = {u.id: u.session for u in utterances}[
        DEFAULT_POLICY.source_turns(engine.query(QUESTION).sources)[0].utterance_id
    ]
    only = MetadataFilters(filters=[ExactMatchFilter(key="session", value=session)])
    retriever = GravityFusionRetriever.from_index(index, engine, similarity_top_k=K, filters=only)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        nodes = retriever.retrieve(QUESTION)
    assert nodes and not provenance(nodes)
    assert {n.node.metadata["session"] for n in nodes} == {session}
    assert "a filtered search cannot fetch documents by id" in caplog.text


def test_the_transforms_expansions_come_with_its_answers_source_turns(
    engine: GravityEngine, utterances: list[Utterance], hashing: HashingEmbedder, engine_calls: list[str]
) -> None:
    """Behind a GravityQueryTransform sharing the provider, the retriever asks GRAVITY nothing more:
    the provider's remembered answer names the source turns."""
    index = make_index("memory", nodes_from_utterances(utterances), hashing)
    provider = AnchorProvider(engine)
    bundle = GravityQueryTransform(provider).run(QUESTION)
    nodes = GravityFusionRetriever.from_index(index, provider, similarity_top_k=K).retrieve(bundle)
    assert engine_calls == [QUESTION]
    assert {n.node.node_id for n in provenance(nodes)} <= {
        u for s in anchor_sources(engine).values() for u in s
    }
    assert provenance(nodes)


def test_per_user_retrieval_fetches_nothing(
    tmp_path: Path,
    nlp: Any,
    utterances: list[Utterance],
    hashing: HashingEmbedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each user's searches keep to the user's nodes; a fetch by id could not."""
    kbs = UserKBs(
        tmp_path / "users",
        embedder=hashing,
        extractor=lambda embedder, store: OfflineExtractor(embedder, pipeline=nlp),
    )
    kbs.add("u1", utterances)
    assert DEFAULT_POLICY.source_turns(
        kbs.engine("u1").query(QUESTION).sources
    )  # there is something to fetch
    nodes = nodes_from_utterances(utterances)
    for node in nodes:
        node.metadata["user_id"] = "u1"
    index = make_index("memory", nodes, hashing)
    retriever = GravityFusionRetriever.from_index(
        index,
        users=kbs,
        user_filters=lambda u: MetadataFilters(filters=[ExactMatchFilter(key="user_id", value=u)]),
        similarity_top_k=K,
    )
    with caplog.at_level(logging.INFO, logger=LOGGER):
        first = retriever.retrieve(GravityQueryBundle(QUESTION, user_id="u1"))
        again = asyncio.run(retriever.aretrieve(GravityQueryBundle(QUESTION, user_id="u1")))
    assert first and not provenance(first) and ids(again) == ids(first)
    told = [r.getMessage() for r in caplog.records if "cannot fetch documents by id" in r.getMessage()]
    assert len(told) == 1 and "a retriever per user" in told[0]


def test_a_store_holding_the_text_is_asked_by_id_not_searched_for_the_turns(
    engine: GravityEngine,
    utterances: list[Utterance],
    hashing: HashingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over Chroma the turns come from the store's get_nodes, one call with the ids asked for."""
    store = chroma()
    index = make_index("chroma-reopened", nodes_from_utterances(utterances), hashing, store)
    asked: list[list[str] | None] = []
    real = ChromaVectorStore.get_nodes

    def spy(
        self: ChromaVectorStore, node_ids: list[str] | None = None, filters: Any = None
    ) -> list[BaseNode]:
        asked.append(node_ids)
        return real(self, node_ids, filters)

    monkeypatch.setattr(ChromaVectorStore, "get_nodes", spy)
    GravityFusionRetriever.from_index(index, engine, similarity_top_k=K).retrieve(QUESTION)
    assert asked == [[t.utterance_id for t in DEFAULT_POLICY.source_turns(engine.query(QUESTION).sources)]]
