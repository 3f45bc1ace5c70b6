"""Temporal questions: gravity_core.query.matching.temporal."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from gravity_core.errors import ConfigurationError
from gravity_core.query.matching import (
    AnchorLexicon,
    TemporalQuery,
    parse_temporal_query,
    temporal_event_matches,
)
from gravity_core.schema import EntityAnchor, EntityType, EventAnchor, KnowledgeBase, TimeRef
from gravity_core.schema.time import Granularity

REF = date(2023, 10, 22)


def _event(
    eid: str, who: str, what: str, start: date, end: date | None = None, *, mention: bool = False
) -> EventAnchor:
    said = datetime(start.year, start.month, start.day, 12, tzinfo=UTC)
    if mention:
        when = TimeRef.mentioned_on(start)
    else:
        when = TimeRef(
            raw="then", start=start, end=end or start, granularity=Granularity.DAY, reference=start
        )
    return EventAnchor(
        id=eid,
        who=[who],
        who_ids=[who.lower()],
        what=what,
        when=when,
        said_at=said,
        session="s1",
        sources=["D1:1"],
    )


def make_kb() -> KnowledgeBase:
    t = datetime(2023, 5, 8, tzinfo=UTC)
    entities = {
        n.lower(): EntityAnchor(
            id=n.lower(), name=n, type=EntityType.PERSON, is_speaker=True, first_seen=t, last_seen=t
        )
        for n in ("Caroline", "Melanie")
    }
    events = [
        _event("c-group", "Caroline", "went to a LGBTQ support group", date(2023, 5, 7)),
        # Wording far from any question about May: only its date can find it.
        _event("c-picnic", "Caroline", "had a lovely afternoon with sandwiches", date(2023, 5, 14)),
        _event("c-talk", "Caroline", "told about her day at the group", date(2023, 5, 25), mention=True),
        _event("c-june", "Caroline", "gave a speech at a school", date(2023, 6, 9)),
        _event("c-group2", "Caroline", "joined a new activist group", date(2023, 7, 18), mention=True),
        _event("c-adopt", "Caroline", "applied to adoption agencies", date(2023, 8, 1)),
        _event("c-2022", "Caroline", "went to a pride festival", date(2022, 6, 1), date(2022, 6, 30)),
        _event("m-may", "Melanie", "bought new running shoes", date(2023, 5, 10)),
        _event("m-race", "Melanie", "ran a charity race", date(2023, 5, 20)),
        _event("m-selfcare", "Melanie", "started carving out me-time", date(2023, 5, 25), mention=True),
        _event("m-camp", "Melanie", "took the kids camping", date(2023, 6, 20)),
        _event("m-2022", "Melanie", "painted a lake sunrise", date(2022, 3, 1), date(2022, 3, 31)),
    ]
    return KnowledgeBase(entities=entities, events={e.id: e for e in events})


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return make_kb()


@pytest.fixture(scope="module")
def lexicon(kb: KnowledgeBase) -> AnchorLexicon:
    return AnchorLexicon.from_kb(kb)


def _match(
    kb: KnowledgeBase, lexicon: AnchorLexicon, question: str, limit: int = 3
) -> list[tuple[str, float]]:
    tq = parse_temporal_query(question, REF)
    return temporal_event_matches(kb, tq, lexicon, lexicon.events(question, 50), limit)


# ------------------------------------------------------------------------------------- parsing


def test_explicit_month_becomes_an_interval() -> None:
    tq = parse_temporal_query("What did Caroline do in May 2023?", REF)
    assert tq.intervals == [(date(2023, 5, 1), date(2023, 5, 31))]
    assert tq.intent is False
    assert tq.relative == []
    assert tq.is_temporal


def test_last_year_is_relative_to_the_reference() -> None:
    assert parse_temporal_query("What did Melanie paint last year?", REF).intervals == [
        (date(2022, 1, 1), date(2022, 12, 31))
    ]
    assert parse_temporal_query("What did Melanie paint last year?", date(2024, 3, 1)).intervals == [
        (date(2023, 1, 1), date(2023, 12, 31))
    ]


@pytest.mark.parametrize(
    "question",
    [
        "When did Caroline go to the support group?",
        "What year did Melanie start painting?",
        "What month is the conference?",
        "How long ago was Caroline's 18th birthday?",
        "How long has Melanie been married?",
        "Since when has she painted?",
        "What did Melanie paint recently?",
        "Was that the first time she ran?",
        "When was the last time they met?",
    ],
)
def test_temporal_question_words_set_intent(question: str) -> None:
    assert parse_temporal_query(question, REF).intent is True


def test_non_temporal_question_has_no_constraint() -> None:
    tq = parse_temporal_query("What is Caroline's favourite book?", REF)
    assert tq == TemporalQuery(reference=REF, question="What is Caroline's favourite book?")
    assert not tq.is_temporal


def test_before_and_after_phrases_are_kept() -> None:
    assert parse_temporal_query("What did Melanie do before the wedding?", REF).relative == [
        ("before", "the wedding")
    ]
    tq = parse_temporal_query("What did Melanie realize after the charity race, and why?", REF)
    assert tq.relative == [("after", "the charity race")]
    assert tq.intent is True


def test_a_date_after_before_is_a_pivot_not_an_interval() -> None:
    tq = parse_temporal_query("What did John do the week before August 3, 2023?", REF)
    assert tq.relative == [("before", "August 3, 2023")]
    assert tq.intervals == []


def test_bare_before_is_no_relation() -> None:
    tq = parse_temporal_query("Had Caroline been there before?", REF)
    assert tq.relative == []
    assert tq.intent is True


def test_reference_must_be_a_date() -> None:
    with pytest.raises(ConfigurationError):
        parse_temporal_query("When?", "2023-05-01")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ matching


def test_date_match_finds_an_event_whose_wording_is_far_from_the_question(
    kb: KnowledgeBase, lexicon: AnchorLexicon
) -> None:
    question = "What did Caroline do in May 2023?"
    native = lexicon.events(question, 50)
    # Native matching cannot tell the picnic from Caroline's other events...
    assert native["c-picnic"] == native["c-adopt"]
    found = temporal_event_matches(kb, parse_temporal_query(question, REF), lexicon, native, 2)
    # ...but its date can: Caroline's phrase-dated May events come first.
    assert {e for e, _ in found} == {"c-group", "c-picnic"}
    assert all(0.0 <= s <= 1.0 for _, s in found)


def test_interval_order_is_participant_then_phrase_date(kb: KnowledgeBase, lexicon: AnchorLexicon) -> None:
    ids = [e for e, _ in _match(kb, lexicon, "What did Caroline do in May 2023?", limit=10)]
    assert ids[:2] in (["c-group", "c-picnic"], ["c-picnic", "c-group"])
    assert ids.index("c-talk") < ids.index("m-may")  # Caroline's mention-dated before Melanie's
    assert ids.index("m-may") < ids.index("m-selfcare")  # phrase date before mention date
    assert "c-june" not in ids and "c-2022" not in ids


def test_native_score_orders_events_of_the_same_rank(kb: KnowledgeBase, lexicon: AnchorLexicon) -> None:
    found = _match(kb, lexicon, "Which group did Caroline join in 2023?", limit=10)
    phrase_dated = [e for e, _ in found if kb.events[e].when.basis != "mention"]  # type: ignore[union-attr]
    assert phrase_dated[0] == "c-group"  # the only phrase-dated one sharing 'group'


def test_last_year_matches_events_of_that_year(kb: KnowledgeBase, lexicon: AnchorLexicon) -> None:
    found = _match(kb, lexicon, "What did Melanie do last year?")
    assert [e for e, _ in found][:1] == ["m-2022"]
    assert {e for e, _ in found} == {"m-2022", "c-2022"}


def test_after_an_event_gives_the_same_participants_next_events(
    kb: KnowledgeBase, lexicon: AnchorLexicon
) -> None:
    found = _match(kb, lexicon, "What did Melanie realize after the charity race?")
    assert [e for e, _ in found][:2] == ["m-selfcare", "m-camp"]
    assert found[0][1] > found[1][1]
    assert all(kb.events[e].who == ["Melanie"] for e, _ in found)


def test_before_an_event_gives_the_closest_earlier_events(kb: KnowledgeBase, lexicon: AnchorLexicon) -> None:
    found = _match(kb, lexicon, "What did Melanie buy before the charity race?", limit=2)
    assert [e for e, _ in found] == ["m-may", "m-2022"]  # closest first; the race itself is the pivot


def test_before_a_date_uses_the_date_as_pivot(kb: KnowledgeBase, lexicon: AnchorLexicon) -> None:
    found = _match(kb, lexicon, "What did Caroline do before August 3, 2023?", limit=2)
    assert [e for e, _ in found] == ["c-adopt", "c-group2"]


def test_intent_without_interval_puts_phrase_dated_candidates_first(
    kb: KnowledgeBase, lexicon: AnchorLexicon
) -> None:
    question = "When did Caroline go to the group?"
    native = lexicon.events(question, 50)
    assert native["c-talk"] > native["c-adopt"]  # 'group' is in c-talk, which is only mention-dated
    found = temporal_event_matches(kb, parse_temporal_query(question, REF), lexicon, native, 10)
    ids = [e for e, _ in found]
    assert ids[0] == "c-group"
    phrase = [e for e in ids if kb.events[e].when.basis == "phrase"]  # type: ignore[union-attr]
    assert ids[: len(phrase)] == phrase  # every phrase-dated candidate before any mention-dated one
    assert ids.index("c-adopt") < ids.index("c-talk")
    assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)


def test_non_temporal_question_matches_nothing(kb: KnowledgeBase, lexicon: AnchorLexicon) -> None:
    assert _match(kb, lexicon, "What did Caroline research about adoption?") == []


def test_limit_is_respected(kb: KnowledgeBase, lexicon: AnchorLexicon) -> None:
    assert len(_match(kb, lexicon, "What happened in 2023?", limit=4)) == 4
    assert _match(kb, lexicon, "What happened in 2023?", limit=0) == []


def test_overlap_index_finds_long_and_straddling_events() -> None:
    kb = make_kb()
    year = _event("c-year", "Caroline", "lived in Sweden", date(2021, 1, 1), date(2021, 12, 31))
    straddle = _event("c-straddle", "Caroline", "a month of travel", date(2021, 4, 20), date(2021, 5, 10))
    kb.events.update({year.id: year, straddle.id: straddle})
    lexicon = AnchorLexicon.from_kb(kb)
    first, last = date(2021, 5, 1).toordinal(), date(2021, 5, 31).toordinal()
    timeline = lexicon.timeline
    for people in (None, timeline.people(["caroline"])):
        found = {timeline.event_ids[p] for p in timeline.overlapping(first, last, people)}
        assert found == {"c-year", "c-straddle"}
    assert timeline.overlapping(first, last, timeline.people(["melanie"])).size == 0
    tq = parse_temporal_query("What did Caroline do in May 2021?", REF)
    assert [e for e, _ in temporal_event_matches(kb, tq, lexicon, {}, 5)] == ["c-straddle", "c-year"]
