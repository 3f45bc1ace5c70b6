"""Retrieval by provenance: which source turns the policy fetches, where it places them, and how
each fetched document names the anchor that asked for it."""

from __future__ import annotations

import pytest

from gravity_core.context.policy import ContextPolicy
from gravity_core.context.provenance import SourceTurn, pair_sources
from gravity_core.errors import ConfigurationError
from gravity_core.query.types import AnchorSources
from gravity_core.schema import AnchorKind

EVENT, ENTITY, TOPIC = AnchorKind.EVENT, AnchorKind.ENTITY, AnchorKind.TOPIC


def sources() -> list[AnchorSources]:
    return [
        AnchorSources(ENTITY, "p1", ("u1", "u2"), 0.5, (1.0, 0.4)),
        AnchorSources(EVENT, "e1", ("u3", "u4", "u5"), 0.7),  # no fits: each 1
        AnchorSources(TOPIC, "t1", ("u6",), 0.9, (0.5,)),
        AnchorSources(EVENT, "e2", ("u4", "u7"), 0.5, (1.0, 0.6)),
    ]


def test_source_turns_go_surest_first_capped_per_anchor_each_utterance_once() -> None:
    policy = ContextPolicy(source_kinds=(EVENT, ENTITY), sources_per_anchor=2)
    # score x fit: u3 0.7, u4 0.7 (e1), u1 0.5, u4 0.5 (e2), u7 0.3, u2 0.2; t1 is not fetched
    assert policy.source_turns(sources()) == [
        SourceTurn("u3", "event:e1"),
        SourceTurn("u4", "event:e1"),
        SourceTurn("u1", "entity:p1"),  # as sure as e2's u4, selected before it
        SourceTurn("u7", "event:e2"),  # u4 came with e1 already
        SourceTurn("u2", "entity:p1"),
    ]
    every_kind = [t.utterance_id for t in ContextPolicy(sources_per_anchor=1).source_turns(sources())]
    assert every_kind == ["u3", "u1", "u4", "u6"]  # t1's u6: 0.9 x 0.5
    assert ContextPolicy(sources_per_anchor=0).source_turns(sources()) == []
    assert ContextPolicy(source_every=0).source_turns(sources()) == []
    assert [t.utterance_id for t in ContextPolicy(source_kinds=(TOPIC,)).source_turns(sources())] == ["u6"]


def test_source_turns_take_every_nth_place_after_the_source_lead() -> None:
    policy = ContextPolicy(source_lead=2, source_every=2, every=0)
    sourced = [("event:e1", "s1"), ("event:e1", "q4"), ("event:e2", "s2")]
    hits = policy.merge("q", ["q1", "q2", "q3", "q4", "q5"], [], [], key=str, sourced=sourced)
    # places: q1 q2 | q3 S | q4 S | q5; the question placed q4 before its source place came, so
    # that place goes to the next source turn.
    assert [(h.item, h.slot) for h in hits] == [
        ("q1", "question"),
        ("q2", "question"),
        ("q3", "question"),
        ("s1", "provenance"),
        ("q4", "question"),
        ("s2", "provenance"),
        ("q5", "question"),
    ]


def test_a_document_fetched_by_provenance_names_its_anchor_and_keeps_its_search_ranks() -> None:
    policy = ContextPolicy(source_lead=0, source_every=1, every=0, rrf_c=0)
    hits = policy.merge("q", ["a", "b"], [], [], key=str, sourced=[("event:e1", "b"), ("entity:p1", "c")])
    by_id = {h.item: h for h in hits}
    assert [h.item for h in hits] == ["b", "c", "a"]  # every place is a source turn's first
    assert [(f.query, f.index, f.text, f.rank) for f in by_id["b"].found_by] == [
        ("question", 0, "q", 2),
        ("provenance", 1, "event:e1", 1),
    ]
    assert [(f.query, f.index, f.text) for f in by_id["c"].found_by] == [("provenance", 2, "entity:p1")]
    assert by_id["b"].score == pytest.approx(1 / 2 + 1 / 1)


def test_source_turns_come_before_expansions_and_a_shorter_merge_starts_a_longer_one() -> None:
    policy = ContextPolicy(lead=4, every=1, source_lead=1, source_every=2)
    question = [f"q{i}" for i in range(8)]
    sourced = [("event:e1", "s1"), ("event:e2", "s2")]
    full = [h.item for h in policy.merge("q", question, ["x"], [["x1"]], key=str, sourced=sourced)]
    assert full[:6] == ["q0", "q1", "s1", "q2", "x1", "s2"]
    for n in range(1, len(full) + 1):
        assert [
            h.item for h in policy.merge("q", question, ["x"], [["x1"]], key=str, sourced=sourced, top_n=n)
        ] == full[:n]


def test_places_sources_only_past_the_source_lead() -> None:
    policy = ContextPolicy(source_lead=5, source_every=2)
    assert not policy.places_sources(5)
    assert policy.places_sources(6)
    assert not ContextPolicy(source_every=0).places_sources(50)
    assert not ContextPolicy(sources_per_anchor=0).places_sources(50)


def test_pair_sources_names_each_document_once_in_the_turns_order() -> None:
    turns = [SourceTurn("u3", "event:e1"), SourceTurn("u9", "event:e1"), SourceTurn("u1", "event:e2")]
    chunks = {"round-a": ("u1", "u2"), "round-b": ("u3",), "round-c": ("u5",)}
    paired = pair_sources(turns, list(chunks), lambda c: chunks[c], key=str)
    assert paired == [("event:e1", "round-b"), ("event:e2", "round-a")]
    twice = [SourceTurn("u1", "event:e1"), SourceTurn("u2", "event:e2")]
    assert pair_sources(twice, ["round-a"], lambda c: chunks[c], key=str) == [("event:e1", "round-a")]


def test_bad_provenance_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        ContextPolicy(sources_per_anchor=-1)
    with pytest.raises(ConfigurationError):
        ContextPolicy(source_kinds=(EVENT, EVENT))
