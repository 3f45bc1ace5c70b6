"""Vectors kept with the KB: each turn embedded once, ever; expanded queries embedded at build time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from gravity_core.anchors.expansions import entity_expansions, event_expansions, topic_expansions
from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.storage.anchor_vectors import EXPANSION_KIND, EXPANSIONS_PER_ANCHOR, TURN_KIND
from gravity_core.storage.store import AnchorStore
from tests.spies import EmbedderSpy

SAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sample_conversation.jsonl"


def _build(folder: Path, utterances: Sequence[Utterance]) -> tuple[AnchorBuilder, EmbedderSpy]:
    embedder = EmbedderSpy(HashingEmbedder())
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder, store=AnchorStore(folder), batch_size=10)
    builder.add(utterances)
    return builder, embedder


@pytest.fixture(scope="module")
def utterances() -> list[Utterance]:
    return load_conversation(SAMPLE)


def test_an_offline_build_embeds_each_turn_once_in_one_call(
    tmp_path: Path, utterances: list[Utterance]
) -> None:
    builder, embedder = _build(tmp_path, utterances)

    turn_texts = [u.full_text() for u in utterances]
    assert embedder.calls[0] == turn_texts  # all turns up front, before any batch
    counts = embedder.texts()
    assert all(counts[text] == 1 for text in turn_texts)
    assert builder.vectors.get(TURN_KIND).ids == [u.id for u in utterances]


def test_adding_a_session_in_a_new_process_embeds_only_its_turns_and_matches_a_full_build(
    tmp_path: Path, utterances: list[Utterance]
) -> None:
    last = utterances[-1].session
    earlier = [u for u in utterances if u.session != last]
    _build(tmp_path / "incremental", earlier)

    added, embedder = _build(tmp_path / "incremental", utterances)  # a fresh builder loads the KB
    full, _ = _build(tmp_path / "full", utterances)

    new_turns = {u.full_text() for u in utterances if u.session == last}
    old_turns = {u.full_text() for u in earlier}
    embedded = embedder.texts()
    assert new_turns <= embedded.keys()
    assert not old_turns & embedded.keys()
    assert added.kb.to_dict()["topics"] == full.kb.to_dict()["topics"]
    assert added.vectors.get(TURN_KIND).ids == full.vectors.get(TURN_KIND).ids
    assert np.allclose(added.vectors.get(TURN_KIND).matrix, full.vectors.get(TURN_KIND).matrix)


def test_the_first_expansions_of_every_anchor_are_stored_and_served_by_the_engine(
    tmp_path: Path, utterances: list[Utterance]
) -> None:
    builder, _ = _build(tmp_path, utterances)
    kb = builder.kb
    engine = GravityEngine.from_dir(tmp_path, embedder=HashingEmbedder())
    first = [
        *(t for a in kb.entities.values() for t in entity_expansions(a, EXPANSIONS_PER_ANCHOR)),
        *(t for a in kb.events.values() for t in event_expansions(a, EXPANSIONS_PER_ANCHOR)),
        *(t for a in kb.topics.values() for t in topic_expansions(a, EXPANSIONS_PER_ANCHOR)),
    ]

    known = engine.known_expansion_vectors(first)

    assert first and all(v is not None for v in known)
    expected = HashingEmbedder().embed(first)
    assert np.allclose(np.stack([v for v in known if v is not None]), expected, atol=1e-6)
    assert engine.known_expansion_vectors(["a query no anchor makes"]) == [None]


def test_a_kb_saved_without_turn_and_expansion_vectors_still_works_and_gains_them(
    tmp_path: Path, utterances: list[Utterance]
) -> None:
    builder, _ = _build(tmp_path, utterances)
    for kind in (TURN_KIND, EXPANSION_KIND):  # as a KB of an earlier version
        del builder.vectors.kinds[kind]
    AnchorStore(tmp_path).save(builder.kb, builder.vectors)
    engine = GravityEngine.from_dir(tmp_path, embedder=HashingEmbedder())
    question = "Where does Maya work now?"
    assert engine.query(question).blocks.entities  # queries work; expansions are embedded by the host side
    assert all(v is None for v in engine.known_expansion_vectors(engine.query(question).expansions))

    more = [*utterances, utterances[-1].model_copy(update={"id": "extra-1", "text": "One more thing."})]
    builder, embedder = _build(tmp_path, more)

    assert builder.vectors.get(TURN_KIND).ids == [u.id for u in more]
    assert builder.vectors.get(EXPANSION_KIND).ids


def test_an_engine_over_a_builder_answers_before_and_after_the_first_add(
    utterances: list[Utterance],
) -> None:
    embedder = HashingEmbedder()
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder)

    empty = GravityEngine.from_builder(builder).query("Where does Maya work now?")
    assert empty.anchors == [] and empty.expansions == []

    builder.add(utterances)
    context = GravityEngine.from_builder(builder).query("Where does Maya work now?")
    assert context.anchors and context.blocks.entities
    engine = GravityEngine.from_builder(builder)
    assert any(v is not None for v in engine.known_expansion_vectors(context.expansions))
