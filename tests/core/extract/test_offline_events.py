"""Offline event extraction: 4W1O records from dated sentences and first-person actions."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from gravity_core.extract.offline.entities import entity_names, extract_entities
from gravity_core.extract.offline.events import extract_events
from gravity_core.extract.offline.parsing import parse_batch
from gravity_core.schema import (
    EntityAnchor,
    EntityType,
    EventObservation,
    Granularity,
    KnowledgeBase,
    Utterance,
)

STAMP = datetime(2023, 5, 8, 14, 0, tzinfo=UTC)  # a Monday


@pytest.fixture(autouse=True)
def _pipeline(nlp: object) -> None:
    global NLP
    NLP = nlp


NLP: object = None


def _events(*texts: str, speaker: str = "Ann", kb: KnowledgeBase | None = None) -> list[EventObservation]:
    batch = [
        Utterance(id=f"S1:{i}", speaker=speaker, text=text, session="S1", timestamp=STAMP)
        for i, text in enumerate(texts, 1)
    ]
    kb = kb or KnowledgeBase()
    turns = parse_batch(NLP, batch)
    people = entity_names(extract_entities(turns, kb), EntityType.PERSON, EntityType.PET)
    return extract_events(turns, kb, people)


def _one(text: str, kb: KnowledgeBase | None = None) -> EventObservation:
    found = _events(text, kb=kb)
    assert len(found) == 1, found
    return found[0]


def test_an_empty_batch_or_empty_text_gives_no_event() -> None:
    assert extract_events([], KnowledgeBase()) == []
    assert _events("", "  ") == []


def test_a_dated_first_person_action_gives_all_five_ws() -> None:
    event = _one("I went to a chess club meetup yesterday and it was so much fun.")
    assert event.who == ["Ann"]
    assert event.what == "went to a chess club meetup"
    assert event.when is not None and event.when.raw == "yesterday"
    assert event.when.start == date(2023, 5, 7) and event.when.granularity is Granularity.DAY
    assert event.outcome == "it was so much fun"
    assert event.sources == ["S1:1"]


def test_the_time_phrase_and_its_preposition_are_cut_from_what() -> None:
    event = _one("On Friday we hiked up Mount Tamal with Lucy.")
    assert event.what == "hiked up Mount Tamal with Lucy"
    assert event.when is not None and event.when.start == date(2023, 5, 5)


def test_an_action_without_a_time_phrase_has_no_when() -> None:
    event = _one("We adopted a puppy from the shelter!")
    assert event.what == "adopted a puppy from the shelter"
    assert event.when is None


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("I just finished my first marathon.", "finished my first marathon"),
        ("I signed up for a pottery class.", "signed up for a pottery class"),
        ("I've finally booked the flights.", "booked the flights"),
        ("I had a long chat with my coach.", "had a long chat with my coach"),
        ("I'm going to a jazz festival this month.", "going to a jazz festival"),
        ("I'm planning to repaint the kitchen next week.", "planning to repaint the kitchen"),
        ("I'll start my new job next week.", "will start my new job"),
        ("Went to Rome with my sister last week.", "Went to Rome with my sister"),
    ],
)
def test_first_person_past_and_planned_actions(text: str, what: str) -> None:
    assert _one(text).what == what


def test_where_is_a_named_place_after_a_preposition() -> None:
    event = _one("Last week I flew to Lisbon for a conference.")
    assert event.where == "Lisbon"
    assert event.when is not None and event.when.start == date(2023, 5, 1)


def test_where_can_be_a_common_place_noun() -> None:
    assert _one("I took my kids to the park yesterday.").where == "the park"


def test_where_can_be_a_place_known_in_the_kb() -> None:
    kb = KnowledgeBase()
    stamp = datetime(2023, 5, 1, tzinfo=UTC)
    kb.entities["p1"] = EntityAnchor(
        id="p1", name="Brookside", type=EntityType.PLACE, first_seen=stamp, last_seen=stamp
    )
    assert _one("I finally visited Brookside with my aunt.", kb=kb).where == "Brookside"


def test_a_named_modifier_is_not_a_place() -> None:
    assert _one("I went to a Harry Potter conference in the spring.").where is None


def test_who_is_the_speaker_plus_people_named_in_the_clause() -> None:
    event = _one("Anthony and I went to a charity quiz last night.")
    assert event.who == ["Ann", "Anthony"]
    assert event.what == "went to a charity quiz"


def test_an_unnamed_partner_stays_in_what() -> None:
    event = _one("My mom and I made dinner together last night!")
    assert event.who == ["Ann"]
    assert event.what == "made dinner together with my mom"


@pytest.mark.parametrize(
    ("text", "outcome"),
    [
        ("I entered the chess final last Saturday and won.", "won"),
        ("I ran the city half marathon on Sunday, and I placed third!", "I placed third"),
        ("I baked a lemon tart with almond flour and it was delicious!", "it was delicious"),
        ("I finished my first marathon. It was brutal but worth it.", "It was brutal but worth it"),
    ],
)
def test_outcome_is_a_short_result_clause(text: str, outcome: str) -> None:
    assert _one(text).outcome == outcome


def test_a_date_in_an_empty_sentence_dates_the_next_action() -> None:
    event = _one("Something great happened last Friday. I ran my first marathon.")
    assert event.what == "ran my first marathon"
    assert event.when is not None and event.when.start == date(2023, 5, 5)


def test_a_dated_sentence_without_first_person_is_still_an_event() -> None:
    event = _one("Last weekend our town held a huge street festival!")
    assert event.what == "our town held a huge street festival"
    assert event.when is not None and event.when.start == date(2023, 5, 6)


@pytest.mark.parametrize(
    "text",
    [
        "Did you go to the concert yesterday?",
        "How was your trip to Lisbon last week?",
        "I would love to visit Japan next year.",
        "I wish I had gone to the party.",
        "If I went there, I'd be happy.",
        "I'd go again tomorrow.",
        "I think it was great.",
        "I loved it!",
        "I'll keep at it!",
        "I'm staying positive.",
        "Thanks! See you tomorrow!",
        "The bowl I made is on the shelf.",
        "Excited to see what's next.",
        "Let's keep chasing our dreams together!",
        "Hey! Got your back - always.",
        "I'm gonna keep writing.",
    ],
)
def test_questions_hypotheticals_states_and_chat_are_not_events(text: str) -> None:
    assert _events(text) == []


def test_a_question_or_congratulation_can_state_an_event_of_the_other_speaker() -> None:
    batch = [
        Utterance(
            id="S1:1",
            speaker="Ann",
            text=(
                "How was your trip to Lisbon last week? Congrats on winning the chess final! "
                "How was your day?"
            ),
            session="S1",
            timestamp=STAMP,
        ),
        Utterance(id="S1:2", speaker="Bob", text="Great, thanks.", session="S1", timestamp=STAMP),
    ]
    turns = parse_batch(NLP, batch)
    found = extract_events(turns, KnowledgeBase())
    assert [(e.who, e.what) for e in found] == [
        (["Bob"], "trip to Lisbon"),
        (["Bob"], "congratulated on winning the chess final"),
    ]
    assert found[0].when is not None and found[0].when.start == date(2023, 5, 1)


def test_an_event_said_twice_in_a_batch_is_kept_once_with_both_sources() -> None:
    found = _events("I adopted a puppy!", "Ha, yes. I adopted a puppy!")
    assert len(found) == 1
    assert found[0].sources == ["S1:1", "S1:2"]


def test_each_sentence_reports_its_own_event() -> None:
    found = _events("I went to the zoo yesterday. Then we baked cookies last night.")
    assert [e.what for e in found] == ["went to the zoo", "baked cookies"]


def test_extraction_is_deterministic_and_leaves_the_kb_untouched() -> None:
    texts = [
        "I went to Lisbon with my sister last week and it was lovely!",
        "Anthony and I went to a charity quiz last night.",
        "I'm going to a jazz festival this month.",
    ] * 4
    kb = KnowledgeBase()
    before = kb.to_dict()
    first = _events(*texts, kb=kb)
    second = _events(*texts, kb=kb)
    assert [e.model_dump() for e in first] == [e.model_dump() for e in second]
    assert kb.to_dict() == before


def test_a_large_batch_extracts_quickly() -> None:
    # Speed is watched through --durations; this only proves a big batch goes through whole.
    texts = [f"I went to the market {n} days ago and it was busy." for n in range(2, 400)]
    found = _events(*texts)
    assert len(found) == len(texts)
    assert all(e.what == "went to the market" for e in found)


# --------------------------------------------------------------------------- clean action clauses


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("I've been learning the cello lately.", "learning the cello"),
        ("I'm hosting a board game night next week.", "hosting a board game night"),
        ("This scarf I knitted last month keeps me warm.", "knitted this scarf"),
        ("Here's a vase I made yesterday.", "made a vase"),
    ],
)
def test_lead_ins_are_dropped_from_what(text: str, what: str) -> None:
    assert _one(text).what == what


def test_a_clause_without_a_participant_action_is_not_an_event() -> None:
    assert _events("It made me think about how far I've come since last year.") == []
    assert _events("That was the best part of last week.") == []


def test_thinking_about_doing_is_a_plan_with_the_plan_as_what() -> None:
    event = _one("We're thinking about going fishing next month.")
    assert event.what == "going fishing"
    assert event.when is not None and event.when.start == date(2023, 6, 1)
    assert _one("I'm considering adopting a kitten.").what == "considering adopting a kitten"


def test_abbreviated_weekdays_date_the_event_and_leave_what() -> None:
    event = _one("I joined a book club last Thurs.")
    assert event.what == "joined a book club"
    assert event.when is not None and event.when.start == date(2023, 5, 4)


def test_a_past_get_passive_is_an_event() -> None:
    event = _one("Last month I got hurt at the gym.")
    assert event.what == "got hurt at the gym"
    assert event.when is not None and event.when.start == date(2023, 4, 1)


def test_a_sentence_starting_with_a_bare_past_participle_is_the_speakers_report() -> None:
    event = _one("Dyed my hair last week - come see!")
    assert event.who == ["Ann"]
    assert event.what.startswith("Dyed my hair")
    assert event.when is not None and event.when.start == date(2023, 5, 1)


def test_an_adverbial_clause_dates_its_main_clause() -> None:
    found = _events("While volunteering yesterday, I met this amazing woman, Jean.")
    met = [e for e in found if "met" in e.what]
    assert len(met) == 1, met
    assert met[0].when is not None and met[0].when.start == date(2023, 5, 7)


def _whats_of(*turns: tuple[str, str, str]) -> list[str]:
    """Events' ``what`` of (speaker, session, text) turns, one batch."""
    batch = [
        Utterance(id=f"{session}:{i}", speaker=speaker, text=text, session=session, timestamp=STAMP)
        for i, (speaker, session, text) in enumerate(turns, 1)
    ]
    return [e.what for e in extract_events(parse_batch(NLP, batch), KnowledgeBase())]


def test_an_object_pronoun_names_the_noun_said_before_it_in_the_turn() -> None:
    whats = _whats_of(("Ann", "S1", "Look at this photo I took at the lake. I printed it last week."))
    # "the lake" is nearer, but a place is not what one prints.
    assert "printed it (this photo)" in whats


def test_an_object_pronoun_names_nothing_from_another_turn_or_its_own_clause() -> None:
    whats = _whats_of(
        ("Bob", "S1", "What happened to your old guitar?"), ("Ann", "S1", "I sold it to a friend yesterday.")
    )
    assert whats == ["sold it to a friend"]  # the turn before is the other speaker's question
    whats = _whats_of(("Ann", "S1", "A friend made it for my birthday last week."))
    assert whats == ["A friend made it for my birthday"]  # not its own subject
    whats = _whats_of(("Ann", "S1", "I restored a car last year, but I sold it to a collector yesterday."))
    assert "sold it (car) to a collector" in whats
    # A relative "that" is no object pronoun; "hit it off" and "give it a try" name nothing.
    whats = _whats_of(("Ann", "S1", "We met a nice couple at the park yesterday and hit it off."))
    assert "hit it off" in whats


def test_them_names_a_plural_noun_and_making_it_somewhere_names_nothing() -> None:
    whats = _whats_of(("Ann", "S1", "I got a new tent and new boots. I wore them on the hike yesterday."))
    assert "wore them (new boots) on the hike" in whats
    whats = _whats_of(("Ann", "S1", "We climbed the mountain. We made it to the top yesterday!"))
    assert "made it to the top" in whats
