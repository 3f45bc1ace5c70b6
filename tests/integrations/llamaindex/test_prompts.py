"""The template route: GRAVITY_QA_TEMPLATE and its per-query {gravity_anchors} slot."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.query_engine import TransformQueryEngine

from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.prompts.injection import PRIORITY_INSTRUCTION
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.schema import Utterance
from gravity_llamaindex import (
    GRAVITY_QA_TEMPLATE,
    AnchorProvider,
    GravityEmbedding,
    GravityQueryTransform,
    gravity_qa_template,
    install_gravity_qa_template,
    nodes_from_utterances,
)

from .conftest import QUESTION, RecordingLLM


@pytest.fixture
def index(utterances: list[Utterance], hashing: HashingEmbedder) -> VectorStoreIndex:
    return VectorStoreIndex(nodes_from_utterances(utterances), embed_model=GravityEmbedding(hashing))


def test_template_has_the_three_slots() -> None:
    assert set(GRAVITY_QA_TEMPLATE.template_vars) == {"gravity_anchors", "context_str", "query_str"}
    text = GRAVITY_QA_TEMPLATE.format(gravity_anchors="ANCHORS", context_str="MEMORIES", query_str="Q?")
    assert text.index("MEMORIES") < text.index("ANCHORS") < text.index("Query: Q?")


def test_slot_is_filled_with_the_priority_instruction_and_blocks(
    engine: GravityEngine, context: AnchorContext
) -> None:
    text = gravity_qa_template(engine).format(context_str="MEMORIES", query_str=QUESTION)
    assert context.text in text and text.count(PRIORITY_INSTRUCTION) == 1
    assert "<gravity_anchors>" in text and "MEMORIES" in text
    assert all(block in text for block in context.blocks.as_dict().values() if block)


def test_partial_format_shares_the_provider_instead_of_copying_it(
    engine: GravityEngine, context: AnchorContext
) -> None:
    provider = AnchorProvider(engine)
    partial = gravity_qa_template(provider).partial_format(query_str=QUESTION)
    assert partial.function_mappings["gravity_anchors"].provider is provider  # type: ignore[index,union-attr]
    assert context.text in partial.format(context_str="MEMORIES")


def test_formatting_without_a_question_leaves_the_slot_empty(
    engine: GravityEngine, engine_calls: list[str]
) -> None:
    text = gravity_qa_template(engine).format(context_str="MEMORIES", query_str="")
    assert "<gravity_anchors>" not in text and engine_calls == []


def test_installed_template_reaches_the_llm_with_one_engine_call(
    index: VectorStoreIndex,
    engine: GravityEngine,
    context: AnchorContext,
    engine_calls: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = AnchorProvider(engine)
    gets: list[str] = []
    real = provider.get

    def counting_get(question: str, **kwargs: Any) -> AnchorContext:
        gets.append(question)
        return real(question, **kwargs)

    monkeypatch.setattr(provider, "get", counting_get)
    llm = RecordingLLM()
    query_engine = index.as_query_engine(llm=llm, similarity_top_k=3)
    assert install_gravity_qa_template(query_engine, provider) == ["response_synthesizer:text_qa_template"]
    response = query_engine.query(QUESTION)
    assert len(llm.prompts) == 1
    prompt = llm.prompts[0]
    assert context.text in prompt and f"Query: {QUESTION}" in prompt
    for node in response.source_nodes:
        assert node.node.get_content() in prompt
    assert len(gets) >= 2  # LlamaIndex formats the template more than once per query...
    assert engine_calls == [QUESTION]  # ...but the engine runs once


def test_install_finds_the_template_inside_a_transform_query_engine(
    index: VectorStoreIndex, engine: GravityEngine
) -> None:
    wrapped = TransformQueryEngine(index.as_query_engine(llm=RecordingLLM()), GravityQueryTransform(engine))
    assert install_gravity_qa_template(wrapped, engine) == [
        "query_engine:response_synthesizer:text_qa_template"
    ]
    prompt = wrapped.get_prompts()["query_engine:response_synthesizer:text_qa_template"]
    assert "gravity_anchors" in prompt.template_vars


def test_bad_templates_and_targets_are_configuration_errors(engine: GravityEngine) -> None:
    with pytest.raises(ConfigurationError, match="gravity_anchors"):
        gravity_qa_template(engine, "{context_str} {query_str}")
    with pytest.raises(ConfigurationError, match="no text_qa_template"):
        install_gravity_qa_template(GravityQueryTransform(engine), engine)
