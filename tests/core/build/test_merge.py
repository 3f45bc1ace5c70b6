"""Merge rules: reinforcement, state transitions, relations, co-occurrence, event trails, topic arcs."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from gravity_core.build.merge import apply_update
from gravity_core.schema import (
    AnchorUpdate,
    AttributeObservation,
    EntityObservation,
    EntityType,
    EventObservation,
    Granularity,
    KnowledgeBase,
    RelationObservation,
    TimeRef,
    TopicObservation,
    Utterance,
)

T0 = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)


def utt(
    uid: str, days: int, text: str = "...", speaker: str = "Maya", session: str | None = None
) -> Utterance:
    return Utterance(
        id=uid, speaker=speaker, text=text, session=session or f"s{days}", timestamp=T0 + timedelta(days=days)
    )


def person(name: str, sources: list[str], **kwargs: object) -> EntityObservation:
    return EntityObservation(name=name, type=EntityType.PERSON, sources=sources, **kwargs)  # type: ignore[arg-type]


def attr(
    name: str, value: str, source: str, *, exclusive: bool = False, confidence: float = 0.6
) -> AttributeObservation:
    return AttributeObservation(
        name=name, value=value, exclusive=exclusive, confidence=confidence, sources=[source]
    )


def test_same_value_again_reinforces_confidence_and_sources() -> None:
    kb = KnowledgeBase()
    a, b = utt("u1", 0), utt("u2", 5)
    apply_update(
        kb, AnchorUpdate(entities=[person("Maya", ["u1"], attributes=[attr("likes", "pottery", "u1")])]), [a]
    )
    apply_update(
        kb, AnchorUpdate(entities=[person("maya", ["u2"], attributes=[attr("likes", "Pottery.", "u2")])]), [b]
    )
    maya = kb.entities["maya"]
    assert len(kb.entities) == 1
    [likes] = maya.attributes
    assert likes.confidence == pytest.approx(1 - 0.4 * 0.4)
    assert likes.mentions == 2
    assert likes.sources == ["u1", "u2"]
    assert likes.last_seen == b.timestamp
    assert maya.mentions == 2


def test_changed_exclusive_value_is_a_state_transition_not_an_overwrite() -> None:
    kb = KnowledgeBase()
    first, later = utt("u1", 0), utt("u9", 40)
    apply_update(
        kb,
        AnchorUpdate(
            entities=[person("Maya", ["u1"], attributes=[attr("city", "Leeds", "u1", exclusive=True)])]
        ),
        [first],
    )
    apply_update(
        kb,
        AnchorUpdate(
            entities=[person("Maya", ["u9"], attributes=[attr("city", "Bristol", "u9", exclusive=True)])]
        ),
        [later],
    )
    maya = kb.entities["maya"]
    values = {a.value: a.current for a in maya.attributes}
    assert values == {"Leeds": False, "Bristol": True}
    [change] = maya.transitions
    assert (change.attribute, change.old, change.new) == ("city", "Leeds", "Bristol")
    assert change.when == later.timestamp and change.sources == ["u9"]


def test_older_exclusive_value_arriving_late_is_kept_as_history() -> None:
    kb = KnowledgeBase()
    recent, old = utt("u5", 30), utt("u1", 0)
    apply_update(
        kb,
        AnchorUpdate(
            entities=[person("Maya", ["u5"], attributes=[attr("city", "Bristol", "u5", exclusive=True)])]
        ),
        [recent],
    )
    apply_update(
        kb,
        AnchorUpdate(
            entities=[person("Maya", ["u1"], attributes=[attr("city", "Leeds", "u1", exclusive=True)])]
        ),
        [old],
    )
    current = [a.value for a in kb.entities["maya"].current_attributes()]
    assert current == ["Bristol"]
    assert kb.entities["maya"].transitions == []


def test_non_exclusive_values_accumulate() -> None:
    kb = KnowledgeBase()
    a, b = utt("u1", 0), utt("u2", 1)
    apply_update(
        kb, AnchorUpdate(entities=[person("Maya", ["u1"], attributes=[attr("likes", "pottery", "u1")])]), [a]
    )
    apply_update(
        kb, AnchorUpdate(entities=[person("Maya", ["u2"], attributes=[attr("likes", "running", "u2")])]), [b]
    )
    assert sorted(a.value for a in kb.entities["maya"].current_attributes()) == ["pottery", "running"]
    assert kb.entities["maya"].transitions == []


def test_relation_object_becomes_entity_and_is_linked() -> None:
    kb = KnowledgeBase()
    u = utt("u1", 0, "My sister Lena visited")
    rel = RelationObservation(relation="sister", object="Lena", object_type=EntityType.PERSON, sources=["u1"])
    apply_update(kb, AnchorUpdate(entities=[person("Maya", ["u1"], relations=[rel])]), [u])
    [relation] = kb.entities["maya"].relations
    assert relation.object_id == "lena"
    assert kb.entities["lena"].type is EntityType.PERSON
    assert kb.entities["lena"].sources == ["u1"]


def test_co_occurrence_counts_utterances_naming_both() -> None:
    kb = KnowledgeBase()
    batch = [utt("u1", 0), utt("u2", 0, session="s0")]
    update = AnchorUpdate(
        entities=[person("Maya", ["u1", "u2"]), person("Lena", ["u1", "u2"]), person("Tom", ["u2"])]
    )
    apply_update(kb, update, batch)
    assert kb.entities["maya"].co_occurrence == {"lena": 2, "tom": 1}
    assert kb.entities["tom"].co_occurrence == {"maya": 1, "lena": 1}


def test_first_name_resolves_to_unique_full_name() -> None:
    kb = KnowledgeBase()
    apply_update(kb, AnchorUpdate(entities=[person("Lena Fischer", ["u1"])]), [utt("u1", 0)])
    apply_update(kb, AnchorUpdate(entities=[person("Lena", ["u2"])]), [utt("u2", 1)])
    assert list(kb.entities) == ["lena-fischer"]


def test_unknown_source_ids_are_dropped_and_counted() -> None:
    kb = KnowledgeBase()
    update = AnchorUpdate(entities=[person("Maya", ["nope"]), person("Tom", ["u1", "ghost"])])
    result = apply_update(kb, update, [utt("u1", 0)])
    assert result.dropped == 1
    assert list(kb.entities) == ["tom"] and kb.entities["tom"].sources == ["u1"]


def _day(d: date) -> TimeRef:
    return TimeRef(raw="x", start=d, end=d, granularity=Granularity.DAY)


def test_events_trail_in_time_order_per_participant_even_when_added_out_of_order() -> None:
    kb = KnowledgeBase()
    late, early = utt("u2", 10), utt("u1", 0)
    apply_update(
        kb,
        AnchorUpdate(
            entities=[person("Maya", ["u2"])],
            events=[EventObservation(who=["Maya"], what="ran a race", sources=["u2"])],
        ),
        [late],
    )
    apply_update(
        kb,
        AnchorUpdate(
            entities=[person("Maya", ["u1"])],
            events=[
                EventObservation(who=["Maya"], what="signed up", when=_day(date(2024, 2, 20)), sources=["u1"])
            ],
        ),
        [early],
    )
    race, signup = kb.events["ev-000001"], kb.events["ev-000002"]
    trail = {t.trail: t for t in signup.trails}["who:maya"]
    assert (trail.prev, trail.next) == (None, race.id)
    assert {t.trail: t for t in race.trails}["who:maya"].prev == signup.id
    assert race.who_ids == ["maya"] and race.session == "s10"


def test_repeated_event_from_same_utterance_is_not_duplicated() -> None:
    kb = KnowledgeBase()
    ev = EventObservation(who=["Maya"], what="Adopted a dog!", sources=["u1"])
    apply_update(
        kb, AnchorUpdate(events=[ev, ev.model_copy(update={"what": "adopted a dog"})]), [utt("u1", 0)]
    )
    assert len(kb.events) == 1


def test_topic_arc_extends_across_sessions_in_time_order() -> None:
    kb = KnowledgeBase()
    s2, s1 = (
        utt("b1", 20, "Ran 15k today", session="s2"),
        utt("a1", 0, "Signed up for the half marathon", session="s1"),
    )
    t2 = TopicObservation(
        label="Half marathon",
        keywords=["run", "race"],
        session="s2",
        summary="long run",
        facts=["Ran 15k today"],
        sources=["b1"],
    )
    apply_update(kb, AnchorUpdate(topics=[t2]), [s2])
    t1 = TopicObservation(
        label="half MARATHON", keywords=["training"], session="s1", summary="signed up", sources=["a1"]
    )
    apply_update(kb, AnchorUpdate(topics=[t1]), [s1])
    [topic] = kb.topics.values()
    assert topic.sessions == ["s1", "s2"]
    assert [s.summary for s in topic.arc] == ["signed up", "long run"]
    assert topic.keywords == ["run", "race", "training"]
    assert topic.key_facts[0].sources == ["b1"]


def test_a_fact_quoting_its_speaker_cites_the_turn_that_says_it() -> None:
    kb = KnowledgeBase()
    turns = [
        utt("c1", 0, "Hi! We got a new tank last week.", session="s1"),
        utt("c2", 1, "Wow! How many turtles now?", session="s1"),
        utt(
            "c3",
            2,
            "The tank is big enough now for three, so I figured why not! It was a long day.",
            session="s1",
        ),
    ]
    observation = TopicObservation(
        label="Turtles",
        session="s1",
        summary="a bigger tank",
        facts=[
            f"{turns[2].speaker}: The tank is big enough now for three, so I figured why not!",
            f"{turns[0].speaker}: We got a new tank last…",
            "Nobody said this",
        ],
        sources=["c1", "c2", "c3"],
    )
    apply_update(kb, AnchorUpdate(topics=[observation]), turns)
    [topic] = kb.topics.values()
    assert [f.sources for f in topic.key_facts] == [["c3"], ["c1"], ["c1", "c2", "c3"]]


def test_topic_id_links_observation_and_event_gets_topic() -> None:
    kb = KnowledgeBase()
    apply_update(
        kb,
        AnchorUpdate(topics=[TopicObservation(label="dogs", session="s0", summary="x", sources=["u1"])]),
        [utt("u1", 0)],
    )
    ext = TopicObservation(
        label="something else", topic_id="tp-0001", session="s3", summary="y", sources=["u2"]
    )
    ev = EventObservation(who=["Maya"], what="walked Biscuit", sources=["u2"])
    apply_update(kb, AnchorUpdate(topics=[ext], events=[ev]), [utt("u2", 3)])
    assert len(kb.topics) == 1 and kb.topics["tp-0001"].sessions == ["s0", "s3"]
    assert kb.events["ev-000001"].topic_id == "tp-0001"


def test_event_without_time_phrase_is_dated_by_its_mention() -> None:
    kb = KnowledgeBase()
    vague = TimeRef(raw="a while ago")
    update = AnchorUpdate(
        events=[
            EventObservation(who=["Maya"], what="took a pottery class", sources=["u1"]),
            EventObservation(who=["Maya"], what="visited Rome", when=vague, sources=["u1"]),
            EventObservation(who=["Maya"], what="ran", when=_day(date(2024, 2, 29)), sources=["u1"]),
        ]
    )
    apply_update(kb, update, [utt("u1", 0)])
    pottery, rome, ran = kb.events.values()
    assert (pottery.when.start, pottery.when.basis, pottery.when.label()) == (
        date(2024, 3, 1),
        "mention",
        "mentioned 1 March 2024",
    )
    assert (rome.when.raw, rome.when.basis, rome.when.label()) == (
        "a while ago",
        "mention",
        "a while ago, mentioned 1 March 2024",
    )
    assert (ran.when.start, ran.when.basis) == (date(2024, 2, 29), "phrase")
