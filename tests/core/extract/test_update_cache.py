"""Kept answers (``cache/updates``): keyed by the KB's lineage, replayed only onto that very KB."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.build.forget import ForgetRequest
from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.schema import KnowledgeBase, Utterance
from gravity_core.schema.lineage import batch_key
from gravity_core.storage.store import AnchorStore

SAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sample_conversation.jsonl"
EMBEDDER = HashingEmbedder(dim=64)


@pytest.fixture(scope="module")
def sample() -> list[Utterance]:
    return load_conversation(SAMPLE)


def built(
    nlp: Any, turns: list[Utterance], folder: Path | None = None, batch_size: int = 20
) -> AnchorBuilder:
    store = AnchorStore(folder) if folder is not None else None
    extractor = (
        OfflineExtractor.kept_in(store.cache_dir, EMBEDDER, pipeline=nlp)
        if store is not None
        else OfflineExtractor(EMBEDDER, pipeline=nlp)
    )
    builder = AnchorBuilder(extractor, EMBEDDER, batch_size=batch_size, store=store)
    builder.add(turns)
    return builder


def test_the_lineage_follows_the_batches_and_what_they_gave(nlp: Any, sample: list[Utterance]) -> None:
    one, same = built(nlp, sample), built(nlp, sample)
    assert one.kb.build.lineage and one.kb.build.lineage == same.kb.build.lineage
    assert built(nlp, sample, batch_size=3).kb.build.lineage != one.kb.build.lineage
    assert built(nlp, sample[:-1]).kb.build.lineage != one.kb.build.lineage


def test_a_key_names_the_batch_the_extractor_and_the_kb_before_it(sample: list[Utterance]) -> None:
    empty, grown = KnowledgeBase(), KnowledgeBase()
    grown.utterances[sample[0].id] = sample[0]
    grown.build.lineage = "0" * 64
    keys = {
        batch_key(empty, "offline", sample[1:3]),
        batch_key(empty, "offline", sample[1:4]),
        batch_key(empty, "other", sample[1:3]),
        batch_key(grown, "offline", sample[1:3]),
    }
    assert None not in keys and len(keys) == 4
    grown.build.lineage = ""  # holds utterances, lineage unknown
    assert batch_key(grown, "offline", sample[1:3]) is None


def test_unreadable_kept_answers_are_extracted_again(
    nlp: Any, sample: list[Utterance], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    builder = built(nlp, sample, tmp_path / "kb")
    entries = sorted((AnchorStore(tmp_path / "kb").cache_dir / "updates").rglob("*.json"))
    assert entries
    for entry in entries:
        entry.write_text('{"update": {"entities": "not a list"}', encoding="utf-8")
    last = sample[-1].session
    with caplog.at_level(logging.WARNING, logger="gravity_core.extract.update_cache"):
        builder.forget(ForgetRequest(sessions=(last,)))
    assert "unreadable, extracting again" in caplog.text
    reference = built(nlp, [u for u in sample if u.session != last])
    assert builder.kb.to_dict() == reference.kb.to_dict()
