"""Batch summaries for the '+Sum' baseline: offline extractive and LLM, merged and embedded."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np

from gravity_core.build.merge import apply_update
from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.llm import LLMExtractor
from gravity_core.extract.offline.summaries import summarize_batch
from gravity_core.schema import AnchorUpdate, KnowledgeBase, Utterance
from gravity_core.storage.anchor_vectors import SUMMARY_KIND, AnchorVectors, summary_vectors
from gravity_core.testing import RecordedModel

T0 = datetime(2024, 5, 2, 19, 0, tzinfo=UTC)
LINES = [
    ("Maya", "Hey! How are you?"),
    ("Jonas", "Good. I finally finished the pottery course at Kiln House and made six bowls."),
    ("Maya", "Amazing. Did you keep any?"),
    ("Jonas", "Two of them. My sister Lena took the rest to Bristol for her new flat."),
    ("Maya", "Nice."),
]


def batch(session: str = "s1") -> list[Utterance]:
    return [
        Utterance(
            id=f"{session}:{i}", speaker=s, text=t, session=session, timestamp=T0 + timedelta(minutes=i)
        )
        for i, (s, t) in enumerate(LINES, start=1)
    ]


def test_offline_summary_keeps_informative_statements_in_order() -> None:
    [summary] = summarize_batch(batch(), max_sentences=2)
    assert summary.session == "s1"
    assert summary.sources == ["s1:2", "s1:4"]
    assert summary.text.startswith("Jonas: I finally finished the pottery course")
    assert "?" not in summary.text and "Nice" not in summary.text


def test_offline_summary_one_per_session() -> None:
    summaries = summarize_batch([*batch("s1"), *batch("s2")])
    assert [s.session for s in summaries] == ["s1", "s2"]


def test_llm_summary_is_asked_once_per_batch_and_attributed() -> None:
    answer = json.dumps(
        {
            "summary": "Jonas finished a pottery course; Lena moved to Bristol.",
            "sources": ["s1:2", "s1:4", "x"],
        }
    )
    model = RecordedModel(
        {"BatchSummary": answer, "FusedExtraction": json.dumps({"entities": [], "events": [], "topics": []})}
    )
    extractor = LLMExtractor(model, fused=True, summaries=True)
    update = extractor.extract(batch(), KnowledgeBase())
    assert len(model.calls) == 2
    [summary] = update.summaries
    assert summary.sources == ["s1:2", "s1:4"] and "Bristol" in summary.text


def test_summaries_merge_and_get_vectors_on_demand() -> None:
    kb = KnowledgeBase()
    utts = batch()
    apply_update(kb, AnchorUpdate(summaries=summarize_batch(utts)), utts)
    [record] = kb.summaries.values()
    assert record.id == "sm-000001" and record.date == utts[1].timestamp
    embedder = HashingEmbedder(dim=32)
    stored = AnchorVectors()
    stored.refresh(kb, embedder)
    assert SUMMARY_KIND not in stored.kinds  # the build does not embed them
    vectors = summary_vectors(kb, embedder)
    assert vectors.ids == ["sm-000001"]
    assert np.allclose(vectors.matrix[0], embedder.embed([record.text])[0])
