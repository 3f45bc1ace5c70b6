"""Dialogue units: sentence split and ids, the round rule, parent links, the JSON round trip."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gravity_core.errors import AnchorStoreError
from gravity_core.schema import Utterance
from gravity_core.sgmem import ChunkGranularity, DialogueUnits
from tests.core.sgmem.conftest import conversation, utterance


def units_of(utterances: list[Utterance]) -> DialogueUnits:
    units = DialogueUnits()
    for u in utterances:
        units.add_turn(u)
    return units


def test_sentences_are_split_with_ids_and_attachments_become_sentences() -> None:
    shared = Utterance(
        id="D1:4",
        speaker="Ann",
        text="I went to the lake. It was cold! Did you go?",
        session="s1",
        timestamp=datetime(2024, 3, 1, tzinfo=UTC),
        attachments=["a photo of a frozen lake"],
    )
    units = units_of([shared])
    assert [s.id for s in units.sentences] == ["D1:4#1", "D1:4#2", "D1:4#3", "D1:4#4"]
    assert [s.text for s in units.sentences] == [
        "I went to the lake.",
        "It was cold!",
        "Did you go?",
        "[shared: a photo of a frozen lake]",
    ]
    assert units.turns[0].sentences == [0, 1, 2, 3]
    assert all(s.turn == 0 for s in units.sentences)


def test_rounds_pair_one_speaker_run_with_the_next() -> None:
    units = units_of(
        conversation(
            [
                ("1", "A", "Hi."),
                ("2", "A", "Are you there?"),
                ("3", "B", "Yes."),
                ("4", "B", "Sorry."),
                ("5", "A", "Fine."),
                ("6", "C", "Hello both."),
                ("7", "A", "Hi C."),
            ]
        )
    )
    rounds = [(r.id, [units.turns[t].id for t in r.turns]) for r in units.rounds]
    assert rounds == [("s1/r1", ["1", "2", "3", "4"]), ("s1/r2", ["5", "6"]), ("s1/r3", ["7"])]
    assert units.rounds[2].second is None  # the session ended after A's run


def test_rounds_and_sessions_do_not_cross_sessions() -> None:
    units = units_of(
        conversation([("a1", "A", "One."), ("a2", "B", "Two.")], session="x")
        + conversation([("b1", "B", "Three."), ("b2", "A", "Four.")], session="y")
    )
    assert [s.id for s in units.sessions] == ["x", "y"]
    assert [r.id for r in units.rounds] == ["x/r1", "y/r1"]
    assert units.sessions[1].turns == [2, 3] and units.sessions[1].rounds == [1]


def test_parent_links_are_consistent_on_the_sample(sample: list[Utterance]) -> None:
    units = units_of(sample)
    for n, turn in enumerate(units.turns):
        assert all(units.sentences[s].turn == n for s in turn.sentences)
        assert n in units.rounds[turn.round].turns
        assert n in units.sessions[turn.session].turns
        assert units.rounds[turn.round].session == turn.session
        assert units.sessions[turn.session].id == sample[n].session
    for r in units.rounds:
        speakers = [units.turns[t].speaker for t in r.turns]
        # A run of the first speaker, then a run of the second: at most one change inside a round.
        changes = sum(a != b for a, b in zip(speakers, speakers[1:], strict=False))
        assert changes <= 1 and speakers[0] == r.first
    for granularity in ChunkGranularity:
        mapping = units.sentence_chunks(granularity)
        for s, sentence in enumerate(units.sentences):
            assert mapping[s] == units.chunk_of_turn(sentence.turn, granularity)
            assert sentence.turn in units.chunk_turns(granularity, int(mapping[s]))


def test_adding_a_session_in_two_parts_gives_the_same_rounds(sample: list[Utterance]) -> None:
    whole = units_of(sample)
    split = DialogueUnits()
    for u in sample[:21]:  # stops inside session 2
        split.add_turn(u)
    for u in sample[21:]:
        split.add_turn(u)
    assert split.to_json() == whole.to_json()


def test_json_round_trip_and_broken_links_are_refused(sample: list[Utterance]) -> None:
    units = units_of(sample)
    data = units.to_json()
    again = DialogueUnits.from_json(data)
    assert again.to_json() == data
    assert again.turn_index("session_2:3") == units.turn_index("session_2:3")
    assert again.round_index("session_2/r2") is not None
    data["sentences"][0]["turn"] = 5
    with pytest.raises(AnchorStoreError, match="parent links"):
        DialogueUnits.from_json(data)
    with pytest.raises(AnchorStoreError, match="malformed"):
        DialogueUnits.from_json({"sessions": []})


def test_empty_turn_has_no_sentences() -> None:
    units = units_of([utterance("e1", "A", "   ")])
    assert units.turns[0].sentences == [] and units.sentences == []
