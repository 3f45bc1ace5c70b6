"""GravityFusionRetriever over an index of chunks of several turns (nodes_from_utterances(...,
turns_per_node=n)): the anchors' source turns are fetched as the nodes holding them."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore
from llama_index.vector_stores.chroma import ChromaVectorStore

from gravity_core.context.policy import DEFAULT_POLICY
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.serving.provenance import UTTERANCE_IDS_KEY, held_utterances
from gravity_core.serving.turn_documents import chunk_ids_by_utterance
from gravity_llamaindex import GravityFusionRetriever, nodes_from_utterances
from tests.integrations.llamaindex.test_provenance import (
    LOGGER,
    QUESTION,
    K,
    ids,
    make_index,
    plain,
    provenance,
)

TURNS = 3


def sources_by_anchor(engine: GravityEngine) -> dict[str, set[str]]:
    return {s.label: set(s.utterance_ids) for s in engine.query(QUESTION).sources}


def anchor_of(node: NodeWithScore) -> str:
    (why,) = [f for f in node.node.metadata["gravity_found_by"] if f["query"] == "provenance"]
    return str(why["text"])


def test_a_chunk_node_lists_its_turns_and_shows_the_llm_its_session_id_and_date(
    utterances: list[Utterance],
) -> None:
    chunk = nodes_from_utterances(utterances, turns_per_node=TURNS)[0]
    first = utterances[:TURNS]
    assert chunk.node_id == f"{first[0].id}+{TURNS}"
    assert held_utterances(chunk.node_id, chunk.metadata) == [u.id for u in first]
    shown = chunk.get_content(metadata_mode=MetadataMode.LLM)
    assert f"session: {first[0].session}" in shown and UTTERANCE_IDS_KEY not in shown
    assert "speakers" not in shown
    assert chunk.get_content(metadata_mode=MetadataMode.EMBED) == chunk.text
    # One turn per node is the node per turn it always was.
    single = nodes_from_utterances(utterances)[0]
    assert single.node_id == utterances[0].id and single.excluded_llm_metadata_keys == ["speaker"]


@pytest.mark.parametrize("backend", ["memory", "chroma-reopened"])
def test_the_chunks_holding_the_anchors_source_turns_are_fetched_sync_and_async(
    engine: GravityEngine, utterances: list[Utterance], hashing: HashingEmbedder, backend: str
) -> None:
    index = make_index(backend, nodes_from_utterances(utterances, turns_per_node=TURNS), hashing)
    retriever = GravityFusionRetriever.from_index(index, engine, similarity_top_k=K, turns_per_node=TURNS)
    nodes = retriever.retrieve(QUESTION)
    fetched = provenance(nodes)
    searched = set(ids(plain(index)))
    assert fetched and any(n.node.node_id not in searched for n in fetched), "provenance added no chunk"
    sources = sources_by_anchor(engine)
    for node in fetched:
        assert node.node.node_id.endswith(f"+{TURNS}")
        # The chunk holds a source turn of the anchor it names.
        assert sources[anchor_of(node)] & set(held_utterances(node.node.node_id, node.node.metadata))
    assert ids(asyncio.run(retriever.aretrieve(QUESTION))) == ids(nodes)


def test_the_store_is_asked_for_the_chunks_holding_the_turns(
    engine: GravityEngine,
    utterances: list[Utterance],
    hashing: HashingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = make_index("chroma-reopened", nodes_from_utterances(utterances, turns_per_node=TURNS), hashing)
    asked: list[list[str] | None] = []
    real = ChromaVectorStore.get_nodes

    def spy(
        self: ChromaVectorStore, node_ids: list[str] | None = None, filters: Any = None
    ) -> list[BaseNode]:
        asked.append(node_ids)
        return real(self, node_ids, filters)

    monkeypatch.setattr(ChromaVectorStore, "get_nodes", spy)
    GravityFusionRetriever.from_index(index, engine, similarity_top_k=K, turns_per_node=TURNS).retrieve(
        QUESTION
    )
    chunk_of = chunk_ids_by_utterance(utterances, TURNS)
    turns = DEFAULT_POLICY.source_turns(engine.query(QUESTION).sources)
    assert asked == [list(dict.fromkeys(chunk_of[t.utterance_id] for t in turns))]


def test_a_chunk_index_searched_as_one_turn_per_node_is_warned_about_once(
    engine: GravityEngine,
    utterances: list[Utterance],
    hashing: HashingEmbedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    index = make_index("memory", nodes_from_utterances(utterances, turns_per_node=TURNS), hashing)
    retriever = GravityFusionRetriever.from_index(index, engine, similarity_top_k=K)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        nodes = retriever.retrieve(QUESTION)
        asyncio.run(retriever.aretrieve(QUESTION))
    assert not provenance(nodes) and ids(nodes) == ids(plain(index))
    warned = [r.getMessage() for r in caplog.records if "holds none of the turns" in r.getMessage()]
    assert len(warned) == 1 and UTTERANCE_IDS_KEY in warned[0]


@pytest.mark.parametrize("turns", [0, -1])
def test_turns_per_node_below_one_is_refused(
    engine: GravityEngine, utterances: list[Utterance], hashing: HashingEmbedder, turns: int
) -> None:
    with pytest.raises(ConfigurationError, match="at least 1"):
        nodes_from_utterances(utterances, turns_per_node=turns)
    index = make_index("memory", nodes_from_utterances(utterances[:4]), hashing)
    with pytest.raises(ConfigurationError, match="at least 1"):
        GravityFusionRetriever.from_index(index, engine, turns_per_node=turns)
