"""The selected anchors' sources: what retrieval by provenance fetches."""

from __future__ import annotations

from datetime import UTC, datetime

from gravity_core.build.builder import AnchorBuilder
from gravity_core.query.engine import GravityEngine
from gravity_core.query.matching.keywords import Stemmer
from gravity_core.query.provenance import (
    EVENT_SOURCE_CREDIT,
    SPECIFIC_ANCHOR_SOURCES,
    SPECIFIC_SOURCE_FIT,
    SourceRanker,
)
from gravity_core.query.types import ScoredAnchor
from gravity_core.schema import (
    AnchorKind,
    EntityAnchor,
    EventAnchor,
    Fact,
    KnowledgeBase,
    TopicAnchor,
    Utterance,
)


def test_a_query_lists_the_sources_of_every_selected_anchor(sample_kb: AnchorBuilder) -> None:
    engine = GravityEngine.from_builder(sample_kb)
    context = engine.query("When did Maya go hiking?")
    assert context.sources, "the sample KB answers this question with anchors"
    kb = engine.kb
    for found in context.sources:
        if found.kind is AnchorKind.EVENT:
            assert found.utterance_ids == tuple(dict.fromkeys(kb.events[found.anchor_id].sources))
        assert set(found.utterance_ids) <= set(kb.utterances)
    assert {(s.kind, s.anchor_id) for s in context.sources} >= {(a.kind, a.id) for a in context.anchors}
    tight = engine.query(
        "When did Maya go hiking?", config=engine.config.model_copy(update={"token_budget": 60})
    )
    # The budget trims the anchor text, not the selection whose sources are fetched.
    assert len(tight.anchors) < len(context.anchors)
    assert tight.sources == context.sources
    assert context.to_dict()["sources"][0]["utterance_ids"] == list(context.sources[0].utterance_ids)


def test_an_entity_lists_its_mentions_about_the_question_most_shared_keywords_first() -> None:
    at = datetime(2023, 5, 1, tzinfo=UTC)

    def said(uid: str, text: str) -> Utterance:
        return Utterance(id=uid, speaker="Maya", text=text, session="s1", timestamp=at)

    turns = [
        said("u1", "Maya loves her dog."),
        said("u2", "Maya started a new job at the hospital."),
        said("u3", "Maya's hospital has night shifts."),
        said("u4", "Maya went hiking."),
        said("u5", "The new hospital job pays well, Maya says."),
    ]
    # Maya speaks often: her profile rests on more utterances than a specific anchor does.
    chatter = [said(f"c{n}", "Maya says hello.") for n in range(SPECIFIC_ANCHOR_SOURCES)]
    turns += chatter
    entity = EntityAnchor(
        id="p1",
        name="Maya",
        first_seen=at,
        last_seen=at,
        sources=["u1", "u2", "u3", "u4", "u5", *(u.id for u in chatter)],
    )
    topic = TopicAnchor(
        id="t1",
        label="hiking",
        participants=["Maya"],
        key_facts=[Fact(text="likes trails", sources=["u4", "u5", "u1"])],
    )
    kb = KnowledgeBase(utterances={u.id: u for u in turns}, entities={"p1": entity}, topics={"t1": topic})
    ranker = SourceRanker(kb)
    chosen = [
        ScoredAnchor(AnchorKind.ENTITY, "p1", 0.9),
        ScoredAnchor(AnchorKind.EVENT, "gone", 0.8),  # not in the KB any more: skipped
        ScoredAnchor(AnchorKind.TOPIC, "t1", 0.7),
    ]
    stemmer = Stemmer()
    focus = frozenset(stemmer.stems("Where is Maya's new hospital job?"))
    found = ranker.sources(chosen, focus)
    # 'Maya' is the entity's own name (and the topic's participant): it does not make a mention
    # about the question. u2 and u5 share 'hospital' and 'job', u3 only 'hospital'; u1, u4 and the
    # chatter nothing. The topic rests on three utterances: all of them, u5 first.
    assert [(s.label, s.utterance_ids) for s in found] == [
        ("entity:p1", ("u2", "u5", "u3")),
        ("topic:t1", ("u5", "u4", "u1")),
    ]
    # Each source's fit is the share of the question's keywords (the names aside) it holds; a
    # specific anchor's is never below SPECIFIC_SOURCE_FIT.
    asked = focus - frozenset(stemmer.stems("Maya"))
    for source in found:
        least = SPECIFIC_SOURCE_FIT if source.kind is AnchorKind.TOPIC else 0.0
        for position, uid in enumerate(source.utterance_ids):
            held = asked & frozenset(stemmer.stems(kb.utterances[uid].text))
            assert source.fit(position) == max(len(held) / len(asked), least)
    assert found[0].fit(0) > found[0].fit(2) > 0
    assert found[1].fit(0) > found[1].fit(1) == found[1].fit(2) == SPECIFIC_SOURCE_FIT
    assert ranker.sources(chosen, frozenset())[0].utterance_ids == ()


def test_a_specific_profile_brings_every_source_and_a_broad_one_only_those_about_the_question() -> None:
    at = datetime(2023, 5, 1, tzinfo=UTC)
    turns = [
        Utterance(id=f"u{n}", speaker="Maya", text=text, session="s1", timestamp=at)
        for n, text in enumerate(
            ["My sister Lea adopted a puppy.", "Lea works nights.", "Lea ran a marathon."]
        )
    ]
    turns += [
        Utterance(id=f"c{n}", speaker="Maya", text="Lea called.", session="s1", timestamp=at)
        for n in range(SPECIFIC_ANCHOR_SOURCES - len(turns) + 1)
    ]

    def lea(sources: list[str]) -> KnowledgeBase:
        entity = EntityAnchor(id="p2", name="Lea", first_seen=at, last_seen=at, sources=sources)
        return KnowledgeBase(utterances={u.id: u for u in turns}, entities={"p2": entity})

    focus = frozenset(Stemmer().stems("What pet does Lea have?"))  # 'pet' is in none of them
    chosen = [ScoredAnchor(AnchorKind.ENTITY, "p2", 0.7)]
    specific = [u.id for u in turns[:SPECIFIC_ANCHOR_SOURCES]]
    (found,) = SourceRanker(lea(specific)).sources(chosen, focus)
    assert found.utterance_ids == tuple(specific)  # the puppy is among them, in other words
    assert {found.fit(n) for n in range(len(specific))} == {SPECIFIC_SOURCE_FIT}
    (broad,) = SourceRanker(lea([u.id for u in turns])).sources(chosen, focus)
    assert broad.utterance_ids == ()


def test_an_events_sources_are_half_sure_before_their_words_are_read() -> None:
    at = datetime(2023, 5, 1, tzinfo=UTC)
    turns = [
        Utterance(
            id="u1", speaker="Maya", text="I got a new job at the hospital!", session="s1", timestamp=at
        ),
        Utterance(id="u2", speaker="Maya", text="It starts on Monday.", session="s1", timestamp=at),
    ]
    event = EventAnchor(
        id="e1",
        who=["Maya"],
        what="started a job at the hospital",
        said_at=at,
        session="s1",
        sources=["u1", "u2"],
    )
    kb = KnowledgeBase(utterances={u.id: u for u in turns}, events={"e1": event})
    focus = frozenset(Stemmer().stems("Where does Maya have a new job?"))
    (found,) = SourceRanker(kb).sources([ScoredAnchor(AnchorKind.EVENT, "e1", 0.6)], focus)
    assert found.utterance_ids == ("u1", "u2")  # an event's sources keep their order
    # u1 holds every keyword of the question but the name Maya; u2 none of them.
    assert (found.fit(0), found.fit(1)) == (1.0, EVENT_SOURCE_CREDIT)
