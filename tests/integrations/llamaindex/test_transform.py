"""GravityQueryTransform: expansions attached to the bundle, query_str untouched, and the averaging trap."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.query_engine import TransformQueryEngine
from llama_index.core.schema import QueryBundle
from llama_index.core.vector_stores import SimpleVectorStore, VectorStoreQuery, VectorStoreQueryResult

from gravity_core.embeddings import HashingEmbedder
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.schema import Utterance
from gravity_llamaindex import GravityEmbedding, GravityQueryTransform, nodes_from_utterances

from .conftest import QUESTION, RecordingLLM, vector_of


def test_transform_attaches_question_then_expansions_and_keeps_query_str(
    engine: GravityEngine, context: AnchorContext
) -> None:
    bundle = GravityQueryTransform(engine).run(QUESTION)
    assert bundle.query_str == QUESTION
    assert bundle.custom_embedding_strs == [QUESTION, *context.expansions]
    assert bundle.embedding is None


def test_transform_keeps_the_embedding_image_and_earlier_strings(
    engine: GravityEngine, context: AnchorContext
) -> None:
    given = QueryBundle(
        QUESTION,
        image_path="photo.png",
        custom_embedding_strs=["a hypothetical answer", context.expansions[0].upper()],
        embedding=[0.1, 0.2],
    )
    bundle = GravityQueryTransform(engine)(given)
    assert (
        bundle.query_str == QUESTION and bundle.image_path == "photo.png" and bundle.embedding == [0.1, 0.2]
    )
    # earlier strings first; an expansion equal to one of them (ignoring case) is not repeated
    assert bundle.custom_embedding_strs == [
        "a hypothetical answer",
        context.expansions[0].upper(),
        *context.expansions[1:],
    ]


def test_transform_has_no_prompts(engine: GravityEngine) -> None:
    transform = GravityQueryTransform(engine)
    assert transform.get_prompts() == {}
    transform.update_prompts({})


def test_a_plain_vector_retriever_averages_the_expansions_into_one_search(
    engine: GravityEngine,
    context: AnchorContext,
    hashing: HashingEmbedder,
    utterances: list[Utterance],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the transform's docstring warns about: one centroid search, not one search per query."""
    searches: list[VectorStoreQuery] = []
    real = SimpleVectorStore.query

    def spy(self: SimpleVectorStore, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        searches.append(query)
        return real(self, query, **kwargs)

    monkeypatch.setattr(SimpleVectorStore, "query", spy)
    index = VectorStoreIndex(nodes_from_utterances(utterances), embed_model=GravityEmbedding(hashing))
    query_engine = TransformQueryEngine(
        index.as_query_engine(llm=RecordingLLM()), GravityQueryTransform(engine)
    )
    query_engine.query(QUESTION)
    assert len(searches) == 1
    strs = [QUESTION, *context.expansions]
    centroid = np.mean([vector_of(hashing, s) for s in strs], axis=0)
    assert searches[0].query_embedding is not None
    assert np.allclose(searches[0].query_embedding, centroid, atol=1e-6)
    assert "AVERAGES" in (GravityQueryTransform.__doc__ or "").upper()
