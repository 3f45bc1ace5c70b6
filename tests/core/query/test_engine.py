"""GravityEngine end to end on the sample conversation, with the packaged MiniLM embedder."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.cli import main
from gravity_core.embeddings import HashingEmbedder, MiniLMEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import ChromaAnchorIndex, NumpyAnchorIndex
from gravity_core.query.recipes import PRESETS
from gravity_core.schema import AnchorKind
from gravity_core.storage.store import AnchorStore
from tests.spies import EmbedderSpy

SAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sample_conversation.jsonl"
MARCH = "What did Maya do in March 2024?"


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory: pytest.TempPathFactory, minilm: MiniLMEmbedder) -> Path:
    folder = tmp_path_factory.mktemp("kb")
    builder = AnchorBuilder(OfflineExtractor(minilm), minilm, store=AnchorStore(folder))
    builder.add(load_conversation(SAMPLE))
    return folder


@pytest.fixture(scope="module")
def engine(kb_dir: Path, minilm: MiniLMEmbedder) -> GravityEngine:
    return GravityEngine.from_dir(kb_dir, embedder=minilm)


def test_query_gives_three_blocks_and_at_most_nine_expansions(engine: GravityEngine) -> None:
    ctx = engine.query("How is Biscuit settling in since Maya adopted him?")
    assert ctx.blocks.topics and ctx.blocks.entities and ctx.blocks.events
    assert {a.kind for a in ctx.anchors} == set(AnchorKind)
    assert 1 <= len(ctx.expansions) <= 9
    assert len({e.casefold() for e in ctx.expansions}) == len(ctx.expansions)
    assert "biscuit" in {a.id for a in ctx.anchors}
    assert ctx.tokens <= 700 and ctx.tokens == engine.counter.count(ctx.text)
    assert (
        ctx.text.index("<topic_summaries>")
        < ctx.text.index("<entity_profiles>")
        < ctx.text.index("<event_records>")
    )


def test_time_expression_keeps_matching_events_whatever_their_similarity(engine: GravityEngine) -> None:
    strict = QueryConfig(sigma_event=0.99)
    ctx = engine.query(MARCH, config=strict)
    events = [a for a in ctx.anchors if a.kind is AnchorKind.EVENT]
    assert events and all(a.reason == "temporal" for a in events)
    for anchor in events:
        when = engine.kb.events[anchor.id].when
        assert when is not None and when.overlaps(date(2024, 3, 1), date(2024, 3, 31))
    assert min(a.score for a in events) < 0.99
    no_slots = engine.query(MARCH, config=strict.model_copy(update={"temporal_slots": 0}))
    assert not [a for a in no_slots.anchors if a.kind is AnchorKind.EVENT]


def test_sigma_floor_drops_weak_anchors(engine: GravityEngine) -> None:
    loose = engine.query("Tell me about pottery", config=QueryConfig(token_budget=None))
    assert loose.anchors
    floor = min(a.score for a in loose.anchors) + 0.01
    strict = QueryConfig(sigma_entity=floor, sigma_event=floor, sigma_topic=floor, token_budget=None)
    kept = engine.query("Tell me about pottery", config=strict).anchors
    assert kept and all(a.score >= floor for a in kept if a.reason != "temporal")
    assert len(kept) < len(loose.anchors)


@pytest.mark.parametrize(
    ("preset", "kinds"),
    [("+E", {"entity"}), ("+V", {"event"}), ("+T", {"topic"}), ("+ET", {"entity", "topic"})],
)
def test_module_subsets_select_only_their_kinds(engine: GravityEngine, preset: str, kinds: set[str]) -> None:
    ctx = engine.query("What job did Maya get in Bristol?", config=PRESETS[preset])
    assert {a.kind.value for a in ctx.anchors} == kinds
    filled = {name for name, block in ctx.blocks.as_dict().items() if block}
    assert filled == {{"entity": "entities", "event": "events", "topic": "topics"}[k] for k in kinds}


def test_rerank_off_keeps_native_matches_only(engine: GravityEngine) -> None:
    ctx = engine.query("What job did Maya get in Bristol?", config=PRESETS["-rerank"])
    assert ctx.anchors and all(a.reason in {"native", "temporal"} for a in ctx.anchors)
    reranked = engine.query("What job did Maya get in Bristol?")
    assert [a.id for a in ctx.anchors] != [a.id for a in reranked.anchors]


def test_expansion_off_and_summary_baseline(engine: GravityEngine) -> None:
    assert engine.query("Where does Maya work?", config=PRESETS["-expansion"]).expansions == []
    summed = engine.query("Where does Maya work?", config=PRESETS["+Sum"])
    assert summed.blocks.summaries and not (
        summed.blocks.topics or summed.blocks.entities or summed.blocks.events
    )
    assert summed.expansions == [] and summed.anchors == []
    assert "<conversation_summaries>" in summed.text


def test_query_embedding_is_computed_once_or_taken_from_the_host(
    kb_dir: Path, minilm: MiniLMEmbedder
) -> None:
    spy = EmbedderSpy(minilm)
    engine = GravityEngine.from_dir(kb_dir, embedder=spy)
    first = engine.query("Where does Maya work?")
    assert len(spy.calls) == 1
    vector = minilm.embed(["Where does Maya work?"])[0]
    second = engine.query("Where does Maya work?", query_embedding=vector.tolist())
    assert len(spy.calls) == 1
    assert second == first
    with pytest.raises(ConfigurationError, match="dimensions"):
        engine.query("x", query_embedding=[0.1, 0.2])


async def test_async_query_matches_sync(engine: GravityEngine) -> None:
    question = "When did Maya move to Bristol?"
    assert await engine.aquery(question) == engine.query(question)


def test_engine_refuses_other_embedder(kb_dir: Path) -> None:
    with pytest.raises(ConfigurationError, match="minilm"):
        GravityEngine.from_dir(kb_dir, embedder=HashingEmbedder())


QUESTIONS = ["Where does Maya work?", MARCH, "What is Biscuit?", "How is the half marathon training going?"]


def _chroma_engine(kb_dir: Path, index: ChromaAnchorIndex, minilm: MiniLMEmbedder) -> GravityEngine:
    loaded = AnchorStore(kb_dir).load()
    index.sync(loaded.vectors)
    return GravityEngine(loaded.kb, index, minilm)


def _same_answers(a: GravityEngine, b: GravityEngine) -> None:
    for question in QUESTIONS:
        x, y = a.query(question), b.query(question)
        assert [(s.kind, s.id) for s in x.anchors] == [(s.kind, s.id) for s in y.anchors]
        assert np.allclose([s.score for s in x.anchors], [s.score for s in y.anchors], atol=1e-5)
        assert x.expansions == y.expansions and x.text == y.text


def test_chroma_embedded_index_gives_the_same_anchors(
    kb_dir: Path, engine: GravityEngine, minilm: MiniLMEmbedder, tmp_path: Path
) -> None:
    chroma = _chroma_engine(kb_dir, ChromaAnchorIndex.persistent(tmp_path / "chroma", "sample"), minilm)
    assert isinstance(engine.index, NumpyAnchorIndex)
    _same_answers(engine, chroma)


@pytest.mark.server
def test_chroma_server_index_gives_the_same_anchors(
    kb_dir: Path, engine: GravityEngine, minilm: MiniLMEmbedder, chroma_server: tuple[str, int]
) -> None:
    host, port = chroma_server
    chroma = _chroma_engine(kb_dir, ChromaAnchorIndex.server(host, port, "sample-engine"), minilm)
    _same_answers(engine, chroma)


def test_the_json_form_names_each_anchors_kind_as_the_python_api_does(engine: GravityEngine) -> None:
    ctx = engine.query("How is Biscuit settling in since Maya adopted him?")
    data = ctx.to_dict()
    assert [(a["kind"], a["id"]) for a in data["anchors"]] == [(a.kind.value, a.id) for a in ctx.anchors]
    assert all("type" not in a for a in data["anchors"])


def test_cli_query_json(kb_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["query", str(kb_dir), MARCH, "--json"])
        raise SystemExit(0)
    assert done.value.code in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"expansions", "blocks", "anchors", "tokens"}
    assert set(out["blocks"]) == {"topics", "entities", "events"}
    assert all(set(a) >= {"kind", "id", "score"} and "type" not in a for a in out["anchors"])
    assert {a["kind"] for a in out["anchors"]} <= {"entity", "event", "topic"}
    assert any(a["reason"] == "temporal" for a in out["anchors"])
    assert len(out["expansions"]) <= 9


@pytest.mark.server
def test_cli_query_through_a_chroma_server(
    kb_dir: Path, chroma_server: tuple[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    host, port = chroma_server
    outputs = []
    for extra in ([], ["--chroma-server", f"{host}:{port}"]):
        with pytest.raises(SystemExit):
            main(["query", str(kb_dir), MARCH, "--json", *extra])
            raise SystemExit(0)
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0]["anchors"] == outputs[1]["anchors"] and outputs[0]["text"] == outputs[1]["text"]
