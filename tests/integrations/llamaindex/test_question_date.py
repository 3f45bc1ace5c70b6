"""The date a question is asked reaches every LlamaIndex component the same way (#16).

Per query: a :class:`GravityQueryBundle` (LlamaIndex passes the same bundle to the retriever, the
postprocessors and the synthesizer); per component: ``question_date=``; per provider: its
``question_date``. "What did Maya do last month?" asked on 1 February 2024 is about January; the KB's
last day is in June.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.query_engine import RetrieverQueryEngine, TransformQueryEngine
from llama_index.core.schema import QueryBundle, TextNode

from gravity_core.context.policy import EXPANDING_POLICY
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_llamaindex import (
    AnchorProvider,
    GravityEmbedding,
    GravityFusionRetriever,
    GravityNodePostprocessor,
    GravityQueryBundle,
    GravityQueryTransform,
    is_gravity_node,
)

from .conftest import RecordingLLM
from .fakes import ScriptedRetriever

QUESTION = "What did Maya do last month?"
FEBRUARY = date(2024, 2, 1)
APRIL = date(2024, 4, 20)


def expansions(engine: GravityEngine, asked: date | None) -> list[str]:
    return list(engine.query(QUESTION, question_date=asked).expansions)


def anchor_text(engine: GravityEngine, asked: date | None) -> str:
    return engine.query(QUESTION, question_date=asked).text


def searched(host: ScriptedRetriever) -> list[str]:
    return [b.query_str for b in host.bundles[1:]]


def test_the_date_changes_what_the_engine_selects(engine: GravityEngine) -> None:
    assert anchor_text(engine, FEBRUARY) != anchor_text(engine, None)
    assert anchor_text(engine, APRIL) != anchor_text(engine, FEBRUARY)


@pytest.mark.parametrize(
    "value", [FEBRUARY, datetime(2024, 2, 1, 22, 0), "2024-02-01", "2024-02-01T22:00:00+00:00"]
)
def test_a_bundle_takes_a_date_a_datetime_or_an_iso_string(value: Any) -> None:
    bundle = GravityQueryBundle(QUESTION, question_date=value)
    assert bundle.question_date == FEBRUARY
    assert isinstance(bundle, QueryBundle) and bundle.query_str == QUESTION


@pytest.mark.parametrize("bad", ["last Tuesday", "2024-02-30", 20240201])
def test_a_bad_date_is_a_configuration_error_naming_the_argument(engine: GravityEngine, bad: Any) -> None:
    for build in (
        lambda: GravityQueryBundle(QUESTION, question_date=bad),
        lambda: AnchorProvider(engine, question_date=bad),
        lambda: GravityFusionRetriever(ScriptedRetriever(), engine, question_date=bad),
        lambda: GravityNodePostprocessor(engine, question_date=bad),
        lambda: GravityQueryTransform(engine, question_date=bad),
    ):
        with pytest.raises(ConfigurationError, match=r"^question_date must be a date.*got"):
            build()
    with pytest.raises(ConfigurationError, match=r"metadata\['question_date'\] must be a date"):
        GravityQueryTransform(engine).run(QUESTION, metadata={"question_date": bad})


# -- each component ----------------------------------------------------------------------------


async def test_the_fusion_retriever_searches_the_dated_expansions(engine: GravityEngine) -> None:
    host = ScriptedRetriever()
    retriever = GravityFusionRetriever(host, engine, policy=EXPANDING_POLICY)
    retriever.retrieve(GravityQueryBundle(QUESTION, question_date=FEBRUARY))
    assert searched(host) == expansions(engine, FEBRUARY)
    host.bundles.clear()
    await retriever.aretrieve(GravityQueryBundle(QUESTION, question_date="2024-02-01"))
    assert searched(host) == expansions(engine, FEBRUARY)
    host.bundles.clear()
    retriever.retrieve(QUESTION)
    assert searched(host) == expansions(engine, None)


def test_a_components_own_date_applies_unless_the_bundle_has_one(engine: GravityEngine) -> None:
    provider = AnchorProvider(engine)
    host = ScriptedRetriever()
    retriever = GravityFusionRetriever(host, provider, question_date=FEBRUARY, policy=EXPANDING_POLICY)
    postprocessor = GravityNodePostprocessor(provider, question_date="2024-02-01")
    assert retriever.question_date == postprocessor.question_date == FEBRUARY

    retriever.retrieve(QUESTION)
    assert searched(host) == expansions(engine, FEBRUARY)
    host.bundles.clear()
    retriever.retrieve(GravityQueryBundle(QUESTION, question_date=APRIL))
    assert searched(host) == expansions(engine, APRIL)

    node = postprocessor.postprocess_nodes([], query_str=QUESTION)[0]
    assert node.node.get_content() == anchor_text(engine, FEBRUARY)
    node = postprocessor.postprocess_nodes(
        [], query_bundle=GravityQueryBundle(QUESTION, question_date=APRIL)
    )[0]
    assert node.node.get_content() == anchor_text(engine, APRIL)


async def test_the_postprocessor_uses_the_bundles_date(engine: GravityEngine) -> None:
    postprocessor = GravityNodePostprocessor(engine)
    dated = GravityQueryBundle(QUESTION, question_date=FEBRUARY)
    assert postprocessor.postprocess_nodes([], query_bundle=dated)[0].node.get_content() == anchor_text(
        engine, FEBRUARY
    )
    anodes = await postprocessor.apostprocess_nodes([], query_bundle=dated)
    assert anodes[0].node.get_content() == anchor_text(engine, FEBRUARY)
    undated = postprocessor.postprocess_nodes([], query_str=QUESTION)[0]
    assert undated.node.get_content() == anchor_text(engine, None)


@pytest.mark.parametrize("route", ["bundle", "metadata", "component", "provider"])
def test_the_transform_dates_the_question_and_hands_the_date_on(engine: GravityEngine, route: str) -> None:
    provider = AnchorProvider(engine, question_date=FEBRUARY if route == "provider" else None)
    transform = GravityQueryTransform(provider, question_date=FEBRUARY if route == "component" else None)
    query: QueryBundle = (
        GravityQueryBundle(QUESTION, question_date=FEBRUARY) if route == "bundle" else QueryBundle(QUESTION)
    )
    metadata = {"question_date": "2024-02-01"} if route == "metadata" else None
    out = transform.run(query, metadata=metadata)
    assert isinstance(out, GravityQueryBundle)
    assert out.question_date == FEBRUARY
    assert out.custom_embedding_strs == [QUESTION, *expansions(engine, FEBRUARY)]


def test_the_bundles_date_wins_over_the_transforms_metadata(engine: GravityEngine) -> None:
    out = GravityQueryTransform(engine, question_date=APRIL).run(
        GravityQueryBundle(QUESTION, question_date=FEBRUARY), metadata={"question_date": "2024-05-01"}
    )
    assert out.question_date == FEBRUARY


def test_the_provider_remembers_each_date_apart(engine: GravityEngine, engine_calls: list[str]) -> None:
    expected = anchor_text(engine, FEBRUARY)
    engine_calls.clear()
    provider = AnchorProvider(engine)
    undated = provider.get(QUESTION)
    dated = provider.get(QUESTION, question_date="2024-02-01")
    assert provider.get(QUESTION, question_date=FEBRUARY) is dated
    assert provider.get(QUESTION) is undated
    assert provider.cached(QUESTION, question_date=datetime(2024, 2, 1, 7)) is dated
    assert engine_calls == [QUESTION, QUESTION]
    assert dated.text == expected != undated.text


# -- whole query engines -----------------------------------------------------------------------


@pytest.fixture
def index(utterances: list[Utterance], hashing: HashingEmbedder) -> VectorStoreIndex:
    nodes = [TextNode(id_=u.id, text=f"{u.speaker}: {u.text}") for u in utterances]
    return VectorStoreIndex(nodes, embed_model=GravityEmbedding(hashing))


def test_a_dated_bundle_dates_retrieval_and_anchors_in_one_query_engine(
    engine: GravityEngine, index: VectorStoreIndex, engine_calls: list[str]
) -> None:
    provider = AnchorProvider(engine)
    llm = RecordingLLM()
    query_engine = RetrieverQueryEngine.from_args(
        GravityFusionRetriever.from_index(index, provider, similarity_top_k=4),
        llm=llm,
        node_postprocessors=[GravityNodePostprocessor(provider)],
    )
    response = query_engine.query(GravityQueryBundle(QUESTION, question_date=FEBRUARY))
    assert engine_calls == [QUESTION]  # retriever and postprocessor shared the dated answer
    assert is_gravity_node(response.source_nodes[0])
    assert response.source_nodes[0].node.get_content() == anchor_text(engine, FEBRUARY)
    assert anchor_text(engine, FEBRUARY) in llm.prompts[-1]


def test_transform_metadata_dates_a_transform_query_engine(
    engine: GravityEngine, index: VectorStoreIndex
) -> None:
    provider = AnchorProvider(engine)
    inner = RetrieverQueryEngine.from_args(
        GravityFusionRetriever.from_index(index, provider, similarity_top_k=4),
        llm=RecordingLLM(),
        node_postprocessors=[GravityNodePostprocessor(provider)],
    )
    transformed = TransformQueryEngine(
        inner, GravityQueryTransform(provider), transform_metadata={"question_date": "2024-02-01"}
    )
    response = transformed.query(QUESTION)
    # The transform handed its date on: the postprocessor after it resolved the same one.
    assert response.source_nodes[0].node.get_content() == anchor_text(engine, FEBRUARY)
