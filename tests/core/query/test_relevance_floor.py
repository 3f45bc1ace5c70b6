"""The relevance floor: a question that is not about the conversation gets no anchor and no
expansion, while the benchmark's questions keep theirs (packaged MiniLM, offline KBs of LoCoMo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import default_embedder
from gravity_core.eval.datasets import load_locomo_eval
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine

REPO = Path(__file__).resolve().parents[3]
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
OFF_TOPIC = [
    line.strip()
    for line in (REPO / "tests" / "fixtures" / "off_topic_questions.txt").read_text().splitlines()
]
SAMPLES = ("conv-26", "conv-30")


@pytest.fixture(scope="module")
def engines() -> dict[str, tuple[GravityEngine, list[str]]]:
    embedder = default_embedder()
    made = {}
    for sample in load_locomo_eval(LOCOMO, samples=list(SAMPLES)):
        builder = AnchorBuilder(OfflineExtractor(embedder), embedder)
        builder.add(sample.utterances)
        made[sample.id] = (GravityEngine.from_builder(builder), [q.question for q in sample.questions])
    return made


def test_off_topic_questions_get_no_anchor_and_benchmark_questions_keep_theirs(
    engines: dict[str, tuple[GravityEngine, list[str]]],
) -> None:
    for sample, (engine, questions) in engines.items():
        off = [engine.query(q) for q in OFF_TOPIC]
        leaked = [q for q, c in zip(OFF_TOPIC, off, strict=True) if c.anchors]
        assert len(leaked) <= len(OFF_TOPIC) // 10, (sample, leaked)
        assert all(c.anchors or not c.expansions for c in off)  # no anchor, no expansion
        kept = sum(1 for q in questions if engine.query(q).anchors) / len(questions)
        assert kept >= 0.97, (sample, kept)


def test_an_empty_question_gets_nothing(engines: dict[str, tuple[GravityEngine, list[str]]]) -> None:
    engine, _ = engines[SAMPLES[0]]
    for question in ("", "   "):
        context = engine.query(question)
        assert context.anchors == [] and context.expansions == [] and context.text == ""


def test_the_floor_can_be_set_and_embedders_without_one_are_not_gated(sample_kb: AnchorBuilder) -> None:
    engine = GravityEngine.from_builder(sample_kb)
    question = "Where does Maya work now?"
    assert engine.relevance_floor is None and engine.query(question).anchors
    assert engine.query(question, config=QueryConfig(relevance_floor=0.99)).anchors == []
