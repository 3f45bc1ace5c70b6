"""Model-free query expansion: gravity_core.query.expansion."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gravity_core.anchors.expansions import MAX_WORDS, entity_expansions, event_expansions, topic_expansions
from gravity_core.query import expansion
from gravity_core.query.expansion import ExpansionTexts, expand, round_robin
from gravity_core.query.types import ScoredAnchor
from gravity_core.schema import (
    AnchorKind,
    Attribute,
    EntityAnchor,
    EventAnchor,
    Fact,
    KnowledgeBase,
    Relation,
    TimeRef,
    TopicAnchor,
)
from gravity_core.schema.time import Granularity

T0 = datetime(2023, 5, 8, tzinfo=UTC)
T1 = datetime(2023, 7, 1, tzinfo=UTC)
E, V, T = AnchorKind.ENTITY, AnchorKind.EVENT, AnchorKind.TOPIC


def _attr(name: str, value: str, confidence: float, mentions: int = 1, current: bool = True) -> Attribute:
    return Attribute(
        name=name,
        value=value,
        confidence=confidence,
        mentions=mentions,
        current=current,
        first_seen=T0,
        last_seen=T0,
        sources=["D1:1"],
    )


def caroline() -> EntityAnchor:
    return EntityAnchor(
        id="caroline",
        name="Caroline",
        attributes=[
            _attr("shared_photo", "a dog walking past a wall with a painting of a woman " * 3, 0.5),
            _attr("career", "counseling", 0.9, mentions=3),
            _attr("city", "Leeds", 0.9, mentions=1, current=False),
            _attr("hobby", "painting", 0.9, mentions=1),
        ],
        relations=[
            Relation(
                relation="sister",
                object="Lena",
                confidence=0.9,
                mentions=2,
                first_seen=T0,
                last_seen=T1,
                sources=["D2:1"],
            )
        ],
        first_seen=T0,
        last_seen=T1,
        sources=["D1:1"],
    )


def support_group() -> EventAnchor:
    when = TimeRef(raw="yesterday", start=date(2023, 5, 7), end=date(2023, 5, 7), granularity=Granularity.DAY)
    return EventAnchor(
        id="ev1",
        who=["Caroline"],
        who_ids=["caroline"],
        what="went to a LGBTQ support group",
        when=when,
        where="the community center",
        outcome="felt accepted",
        said_at=T0,
        session="s1",
        sources=["D1:3"],
    )


def painting_topic() -> TopicAnchor:
    return TopicAnchor(
        id="tp1",
        label="lake / painting",
        keywords=["painting", "lake", "sunrise"],
        participants=["Melanie", "Caroline"],
        key_facts=[Fact(text="Melanie: I painted that lake sunrise last year!", sources=["D1:12"])],
        sources=["D1:12"],
    )


def test_entity_expansions_pair_the_name_with_attributes_and_relations_best_first() -> None:
    out = entity_expansions(caroline())
    assert out[:3] == ["Caroline career counseling", "Caroline sister Lena", "Caroline hobby painting"]
    assert out[3].startswith("Caroline shared photo a dog")
    assert not any("Leeds" in x for x in out)  # no longer current
    assert all(len(x.split()) <= MAX_WORDS for x in out)


def test_entity_without_facts_expands_to_its_name() -> None:
    bare = EntityAnchor(id="x", name="Oscar", first_seen=T0, last_seen=T0)
    assert entity_expansions(bare) == ["Oscar"]


def test_event_expansions_join_participants_action_and_date() -> None:
    out = event_expansions(support_group())
    assert out == [
        "Caroline went to a LGBTQ support group 7 May 2023",
        "Caroline went to a LGBTQ support group at the community center",
        "Caroline went to a LGBTQ support group felt accepted",
    ]


def test_mention_dated_event_uses_the_plain_day() -> None:
    event = support_group().model_copy(
        update={
            "when": TimeRef.mentioned_on(date(2023, 5, 8)),
            "where": None,
            "outcome": None,
            "who": ["Caroline", "Melanie"],
        }
    )
    assert event_expansions(event) == ["Caroline and Melanie went to a LGBTQ support group 8 May 2023"]


def test_topic_expansions_give_key_facts_then_participant_keyword_pairs() -> None:
    out = topic_expansions(painting_topic())
    assert out == [
        "Melanie: I painted that lake sunrise last year!",
        "Melanie painting",
        "Caroline painting",
        "Melanie lake",
        "Caroline lake",
    ]


def test_round_robin_takes_turns_topic_entity_event() -> None:
    per = {E: ["e1", "e2"], V: ["v1", "v2"], T: ["t1", "t2"]}
    assert round_robin(per, 5, "q") == ["t1", "e1", "v1", "t2", "e2"]


def test_round_robin_continues_when_a_module_runs_out() -> None:
    per = {E: ["e1"], V: ["v1", "v2", "v3", "v4"], T: []}
    assert round_robin(per, 5, "q") == ["e1", "v1", "v2", "v3", "v4"]
    assert round_robin(per, 9, "q") == ["e1", "v1", "v2", "v3", "v4"]  # all exhausted before the budget


def test_round_robin_drops_duplicates_and_the_question() -> None:
    per = {
        T: ["When did Caroline go?", "Caroline  Painting"],
        E: ["caroline painting", "Caroline sister Lena"],
    }
    out = round_robin(per, 9, "when did  caroline go?")
    assert out == ["Caroline Painting", "Caroline sister Lena"]


def test_round_robin_with_no_budget_is_empty() -> None:
    assert round_robin({E: ["a"]}, 0, "q") == []


@given(
    st.dictionaries(st.sampled_from([E, V, T]), st.lists(st.sampled_from(["a", "A", "b", "c ", "d", "q"]))),
    st.integers(min_value=0, max_value=12),
)
def test_round_robin_properties(per: dict[AnchorKind, list[str]], budget: int) -> None:
    out = round_robin(per, budget, "Q")
    keys = [x.casefold().strip() for x in out]
    available = {x.casefold().strip() for xs in per.values() for x in xs} - {"q"}
    assert len(out) == min(budget, len(available))
    assert len(set(keys)) == len(keys)
    assert "q" not in keys


def _kb() -> KnowledgeBase:
    melanie = EntityAnchor(
        id="melanie", name="Melanie", attributes=[_attr("hobby", "pottery", 0.8)], first_seen=T0, last_seen=T0
    )
    race = support_group().model_copy(
        update={"id": "ev2", "what": "ran a charity race", "who": ["Melanie"], "where": None, "outcome": None}
    )
    return KnowledgeBase(
        entities={"caroline": caroline(), "melanie": melanie},
        events={"ev1": support_group(), "ev2": race},
        topics={"tp1": painting_topic()},
    )


def test_expand_interleaves_anchors_within_a_module_and_modules_round_robin() -> None:
    selected = [
        ScoredAnchor(E, "melanie", 0.5),
        ScoredAnchor(E, "caroline", 0.9),
        ScoredAnchor(V, "ev1", 0.7),
        ScoredAnchor(V, "ev2", 0.6),
        ScoredAnchor(T, "tp1", 0.4),
        ScoredAnchor(E, "ghost", 0.99),  # not in the KB: skipped
    ]
    out = expand(_kb(), selected, 9, "What does Caroline like?")
    assert out == [
        "Melanie: I painted that lake sunrise last year!",
        "Caroline career counseling",  # best-scored entity first
        "Caroline went to a LGBTQ support group 7 May 2023",
        "Melanie painting",
        "Melanie hobby pottery",  # the second entity's first expansion before Caroline's second
        "Melanie ran a charity race 7 May 2023",
        "Caroline painting",
        "Caroline sister Lena",
        "Caroline went to a LGBTQ support group at the community center",
    ]


def test_expand_respects_budget_and_carries_no_provenance() -> None:
    selected = [ScoredAnchor(E, "caroline", 0.9), ScoredAnchor(V, "ev1", 0.7), ScoredAnchor(T, "tp1", 0.4)]
    out = expand(_kb(), selected, 4, "q")
    assert len(out) == 4
    assert not any("D1:" in x or "ev1" in x or "tp1" in x for x in out)
    assert expand(_kb(), selected, 0, "q") == []
    assert expand(_kb(), [], 9, "q") == []


class _CountingKB:
    """A KB that counts how often its anchors are read (``KBReader``)."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.reads = 0
        self.utterances, self.summaries, self.build = kb.utterances, kb.summaries, kb.build

    def _read(self, part: dict[str, Any]) -> dict[str, Any]:
        self.reads += 1
        return part

    @property
    def entities(self) -> dict[str, EntityAnchor]:
        return self._read(self.kb.entities)

    @property
    def events(self) -> dict[str, EventAnchor]:
        return self._read(self.kb.events)

    @property
    def topics(self) -> dict[str, TopicAnchor]:
        return self._read(self.kb.topics)


def test_expansion_memo_reads_each_anchor_once_and_gives_the_same_queries() -> None:
    kb = _CountingKB(_kb())
    memo = ExpansionTexts(kb)
    selected = [ScoredAnchor(E, "caroline", 0.9), ScoredAnchor(V, "ev1", 0.7), ScoredAnchor(T, "tp1", 0.4)]
    first = expand(kb, selected, 9, "q", texts=memo)
    assert kb.reads == 3
    assert expand(kb, selected, 9, "another question", texts=memo) == first
    assert expand(kb, selected[:2], 3, "q", texts=memo) == expand(_kb(), selected[:2], 3, "q")
    assert kb.reads == 3  # the second and third queries read the memo only
    assert memo.of(E, "caroline") == tuple(entity_expansions(caroline()))
    assert memo.of(E, "ghost") == ()


def test_expansion_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(expansion, "_TEXTS_MEMO", 2)
    kb = _CountingKB(_kb())
    memo = ExpansionTexts(kb)
    for anchor_id in ("ev1", "ev2", "ev1"):
        memo.of(V, anchor_id)
    assert kb.reads == 2  # ev1 was still held
    memo.of(E, "caroline")  # a third anchor: the memo starts again
    memo.of(V, "ev1")
    assert kb.reads == 4


def test_expansion_limit_keeps_the_best_ones() -> None:
    assert entity_expansions(caroline(), 2) == ["Caroline career counseling", "Caroline sister Lena"]
    assert event_expansions(support_group(), 1) == ["Caroline went to a LGBTQ support group 7 May 2023"]
    assert topic_expansions(painting_topic(), 0) == []
