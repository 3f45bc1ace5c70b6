"""Host documents of several turns: turn_chunks, the ids they are written under, and ChunkIds, which
finds those ids again from the KB's own utterances."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.serving import turn_documents
from gravity_core.serving.provenance import UTTERANCE_IDS_KEY, held_utterances
from gravity_core.serving.turn_documents import (
    ChunkIds,
    chunk_ids_by_utterance,
    turn_chunks,
    turn_metadata,
    turn_text,
)

START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def turn(utterance_id: str, session: str, speaker: str, minutes: int, text: str = "hello") -> Utterance:
    return Utterance(
        id=utterance_id,
        speaker=speaker,
        text=f"{text} ({utterance_id})",
        session=session,
        timestamp=START + timedelta(days=int(session[-1]), minutes=minutes),
    )


@pytest.fixture
def interleaved() -> list[Utterance]:
    """Two sessions whose turns are interleaved in the list: a1 b1 a2 a3 b2 a4 a5."""
    return [
        turn("a1", "s1", "Maya", 0),
        turn("b1", "s2", "Jonas", 0),
        turn("a2", "s1", "Jonas", 1),
        turn("a3", "s1", "Maya", 2),
        turn("b2", "s2", "Maya", 1),
        turn("a4", "s1", "Maya", 3),
        turn("a5", "s1", "Jonas", 4),
    ]


def test_each_sessions_turns_are_cut_in_order_and_chunks_come_by_their_first_turn(
    interleaved: list[Utterance],
) -> None:
    chunks = turn_chunks(interleaved, 2)
    assert [c.utterance_ids for c in chunks] == [("a1", "a2"), ("b1", "b2"), ("a3", "a4"), ("a5",)]
    assert [c.id for c in chunks] == ["a1+2", "b1+2", "a3+2", "a5+2"]
    by_id = {u.id: u for u in interleaved}
    for chunk in chunks:
        assert chunk.text == "\n".join(turn_text(by_id[i]) for i in chunk.utterance_ids)
        assert {by_id[i].session for i in chunk.utterance_ids} == {chunk.metadata["session"]}


def test_a_chunks_metadata_is_scalars_listing_the_turns_it_holds(interleaved: list[Utterance]) -> None:
    first = turn_chunks(interleaved, 3)[0]
    assert first.metadata == {
        "session": "s1",
        "date": interleaved[0].day.isoformat(),
        "id": "a1+3",
        "speakers": "Maya,Jonas",
        UTTERANCE_IDS_KEY: "a1,a2,a3",
    }
    assert all(isinstance(value, str) for value in first.metadata.values())
    assert held_utterances(first.id, first.metadata) == ["a1", "a2", "a3"]


def test_one_turn_per_chunk_is_todays_document_per_turn(interleaved: list[Utterance]) -> None:
    chunks = turn_chunks(interleaved, 1)
    assert [c.id for c in chunks] == [u.id for u in interleaved]  # the given order, not by session
    for chunk, utterance in zip(chunks, interleaved, strict=True):
        assert chunk.text == turn_text(utterance)
        assert chunk.metadata == turn_metadata(utterance)
        assert chunk.utterance_ids == (utterance.id,)
        assert held_utterances(chunk.id, chunk.metadata) == [utterance.id]


def test_chunk_ids_stay_as_a_session_grows_so_indexing_it_again_replaces_its_last_chunk(
    sample_utterances: list[Utterance],
) -> None:
    session = [u for u in sample_utterances if u.session == sample_utterances[0].session]
    before = {c.id: c for c in turn_chunks(session[:7], 3)}
    after = {c.id: c for c in turn_chunks(session, 3)}
    assert set(before) <= set(after) and len(after) > len(before)
    assert before[session[6].id + "+3"].utterance_ids == (session[6].id,)
    assert after[session[6].id + "+3"].utterance_ids == tuple(u.id for u in session[6:9])


def test_the_map_of_turns_to_chunks_is_the_chunks_own(sample_utterances: list[Utterance]) -> None:
    for per_chunk in (1, 2, 5):
        chunks = turn_chunks(sample_utterances, per_chunk)
        expected = {u: c.id for c in chunks for u in c.utterance_ids}
        assert chunk_ids_by_utterance(sample_utterances, per_chunk) == expected
        assert len(expected) == len(sample_utterances)
    assert len(turn_chunks(sample_utterances, 5)) < len(sample_utterances)


@pytest.mark.parametrize("per_chunk", [0, -2, True, 2.0])
def test_turns_per_chunk_must_be_a_positive_integer(interleaved: list[Utterance], per_chunk: Any) -> None:
    with pytest.raises(ConfigurationError, match="at least 1"):
        turn_chunks(interleaved, per_chunk)
    with pytest.raises(ConfigurationError, match="at least 1"):
        chunk_ids_by_utterance(interleaved, per_chunk)
    with pytest.raises(ConfigurationError, match="at least 1"):
        ChunkIds(per_chunk)


def test_an_id_with_a_comma_cannot_be_listed_in_a_chunk() -> None:
    turns = [turn("s1,1", "s1", "Maya", 0), turn("s1,2", "s1", "Jonas", 1)]
    assert [c.id for c in turn_chunks(turns, 1)] == ["s1,1", "s1,2"]
    with pytest.raises(InputDataError, match="comma") as raised:
        turn_chunks(turns, 2)
    assert raised.value.record == "s1,1"


def test_chunk_ids_follow_the_kb_the_engine_serves(
    sample_utterances: list[Utterance], nlp: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = [u for u in sample_utterances if u.session == sample_utterances[0].session]
    embedder = HashingEmbedder()
    builder = AnchorBuilder(OfflineExtractor(embedder, pipeline=nlp), embedder)
    builder.add(session[:6])
    engine = GravityEngine.from_builder(builder)
    reads: list[int] = []
    real = turn_documents.chunk_ids_by_utterance

    def spy(utterances: Any, turns_per_chunk: int) -> dict[str, str]:
        reads.append(turns_per_chunk)
        return real(utterances, turns_per_chunk)

    monkeypatch.setattr(turn_documents, "chunk_ids_by_utterance", spy)
    ids = ChunkIds(4)
    first, fifth, sixth, seventh = session[0].id, session[4].id, session[5].id, session[6].id
    # Each chunk once, in the order first needed; an id the KB does not hold is passed through.
    assert ids.document_ids(engine.snapshot, [sixth, first, fifth, seventh]) == [
        f"{fifth}+4",
        f"{first}+4",
        seventh,
    ]
    assert ids.document_ids(engine.snapshot, [first]) == [f"{first}+4"]
    assert reads == [4]  # read once for the KB served
    builder.add(session[6:9])
    assert engine.refresh()
    assert ids.document_ids(engine.snapshot, [seventh, session[8].id]) == [f"{fifth}+4", f"{session[8].id}+4"]
    assert reads == [4, 4]
    # One turn per document: the ids themselves, without reading the KB.
    assert ChunkIds(1).document_ids(engine.snapshot, [seventh, first, seventh]) == [seventh, first]
    assert reads == [4, 4]
