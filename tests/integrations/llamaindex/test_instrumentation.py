"""Instrumentation: GravityAnchorsEvent per engine answer, and spans on GRAVITY's methods."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_llamaindex import (
    AnchorProvider,
    GravityAnchorsEvent,
    GravityFusionRetriever,
    GravityNodePostprocessor,
    GravityQueryTransform,
)

from .conftest import QUESTION, EventRecorder
from .fakes import ScriptedRetriever


def _anchor_events(events: list[BaseEvent]) -> list[GravityAnchorsEvent]:
    return [e for e in events if isinstance(e, GravityAnchorsEvent)]


@pytest.fixture
def spans() -> Iterator[SimpleSpanHandler]:
    dispatcher = get_dispatcher("gravity_llamaindex")
    handler = SimpleSpanHandler()
    dispatcher.add_span_handler(handler)
    try:
        yield handler
    finally:
        dispatcher.span_handlers = [h for h in dispatcher.span_handlers if h is not handler]


def test_event_carries_the_selected_anchors(
    engine: GravityEngine, context: AnchorContext, gravity_events: list[BaseEvent]
) -> None:
    AnchorProvider(engine).get(QUESTION)
    (event,) = _anchor_events(gravity_events)
    assert event.query_str == QUESTION
    assert [(a.kind, a.id, a.score, a.reason) for a in event.anchors] == [
        (a.kind.value, a.id, pytest.approx(a.score), a.reason) for a in context.anchors
    ]
    assert event.expansions == context.expansions and event.tokens == context.tokens
    assert event.model_dump()["class_name"] == "GravityAnchorsEvent"


async def test_one_event_per_question_across_a_whole_pipeline(
    engine: GravityEngine, gravity_events: list[BaseEvent]
) -> None:
    provider = AnchorProvider(engine)
    transform = GravityQueryTransform(provider)
    retriever = GravityFusionRetriever(ScriptedRetriever(), provider)
    postprocessor = GravityNodePostprocessor(provider)
    bundle = transform.run(QUESTION)
    postprocessor.postprocess_nodes(retriever.retrieve(bundle), query_bundle=bundle)
    await postprocessor.apostprocess_nodes(await retriever.aretrieve(bundle), query_bundle=bundle)
    assert [e.query_str for e in _anchor_events(gravity_events)] == [QUESTION]
    provider.get("Where does Jonas work?")
    assert [e.query_str for e in _anchor_events(gravity_events)] == [QUESTION, "Where does Jonas work?"]


def test_events_propagate_to_the_root_dispatcher(engine: GravityEngine) -> None:
    root = get_dispatcher()
    recorder = EventRecorder()
    root.add_event_handler(recorder)
    try:
        AnchorProvider(engine).get(QUESTION)
    finally:
        root.event_handlers = [h for h in root.event_handlers if h is not recorder]
    assert len(_anchor_events(recorder.events)) == 1


async def test_public_methods_open_spans(engine: GravityEngine, spans: SimpleSpanHandler) -> None:
    provider = AnchorProvider(engine, cache_size=0)
    retriever = GravityFusionRetriever(ScriptedRetriever(), provider)
    nodes = retriever.retrieve(QUESTION)
    GravityNodePostprocessor(provider).postprocess_nodes(nodes, query_str=QUESTION)
    GravityQueryTransform(provider).run(QUESTION)
    await retriever.aretrieve(QUESTION)
    names = {span.id_.rsplit("-", 5)[0] for span in spans.completed_spans}
    assert {
        "AnchorProvider.get",
        "AnchorProvider.aget",
        "GravityFusionRetriever._retrieve",
        "GravityFusionRetriever._aretrieve",
        "GravityNodePostprocessor._postprocess_nodes",
        "GravityQueryTransform._run",
    } <= names
