"""Offline entity extraction: speakers, proper names, types, relations and attributes."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from importlib import resources

import pytest

from gravity_core.extract.offline.entities import extract_entities
from gravity_core.extract.offline.entity_words import entity_words, parse_entity_words
from gravity_core.extract.offline.parsing import parse_batch
from gravity_core.extract.offline.text import split_sentences
from gravity_core.schema import (
    EntityAnchor,
    EntityObservation,
    EntityType,
    KnowledgeBase,
    Utterance,
)

STAMP = datetime(2023, 5, 8, 14, 0, tzinfo=UTC)


def _batch(*turns: tuple[str, str], attachments: dict[int, list[str]] | None = None) -> list[Utterance]:
    attachments = attachments or {}
    return [
        Utterance(
            id=f"S1:{i}",
            speaker=speaker,
            text=text,
            session="S1",
            timestamp=STAMP,
            attachments=attachments.get(i, []),
        )
        for i, (speaker, text) in enumerate(turns, 1)
    ]


NLP: object = None

# Behaviours of the pattern extractor (offline-v1) that the parse-based one (offline-v2) does not read
# yet: second-person facts, "X is my cousin", "my mom's name is Ines", spouses, residency phrasing,
# job offers, quoted titles, typo aliases. Strict: each fails the run once it passes, so the list
# only shrinks.
NOT_YET = frozenset(
    {
        "test_entity_types_are_guessed_from_context[We adopted a kitten named Pebble.-Pebble-pet]",
        "test_entity_types_are_guessed_from_context[We watched a Star Quest movie.-Star Quest-work]",
        "test_entity_types_are_guessed_from_context[The Zentrix thing was odd.-Zentrix-other]",
        "test_first_person_family_and_social_relations[My husband Raj cooked tonight.-husband-Raj]",
        "test_first_person_family_and_social_relations[My best friend Lena called.-best_friend-Lena]",
        "test_first_person_family_and_social_relations[Marta is my cousin.-cousin-Marta]",
        "test_first_person_family_and_social_relations[My mom's name is Ines.-mother-Ines]",
        "test_pets_get_a_pet_relation_and_a_species",
        "test_a_spouse_implies_a_weak_married_status",
        "test_second_person_facts_go_to_the_other_speaker_with_lower_confidence",
        "test_first_person_attribute_patterns[I work at Brightwave Labs as a designer.-employer-Brightwave Labs-True]",  # noqa: E501
        "test_first_person_attribute_patterns[I really enjoy long walks on the beach, it calms me.-likes-long walks on the beach-False]",  # noqa: E501
        "test_first_person_attribute_patterns[I hate running in the rain.-dislikes-running in the rain-False]",  # noqa: E501
        "test_first_person_attribute_patterns[I got engaged!-relationship_status-engaged-True]",
        "test_first_person_attribute_patterns[I'm learning Spanish.-activity-Spanish-False]",
        "test_first_person_attribute_patterns[I'm studying psychology at college.-studies-psychology at college-False]",  # noqa: E501
        "test_present_perfect_progressive_and_named_patterns[My first week at Tallow Studio went fine.-employer-Tallow Studio]",  # noqa: E501
        "test_present_perfect_progressive_and_named_patterns[First day at Tallow Studio done.-employer-Tallow Studio]",  # noqa: E501
        "test_present_perfect_progressive_and_named_patterns[They offered me the job at Quayside Dental!-employer-Quayside Dental]",  # noqa: E501
        "test_present_perfect_progressive_and_named_patterns[I got the job at Quayside Dental.-employer-Quayside Dental]",  # noqa: E501
        "test_present_perfect_progressive_and_named_patterns[My landlord in Glasgow finally fixed the boiler.-location-Glasgow]",  # noqa: E501
        "test_present_perfect_progressive_and_named_patterns[We moved down to Exeter last month.-location-Exeter]",  # noqa: E501
        "test_present_perfect_progressive_and_named_patterns[I'm now a resident of Tromso.-location-Tromso]",
        "test_planned_moves_and_here_in_give_a_weak_location[I'm moving to Lisbon in the autumn.-Lisbon]",
        "test_planned_moves_and_here_in_give_a_weak_location[The rent here in Oslo is wild for me.-Oslo]",
        "test_a_resident_statement_takes_the_one_place_named_in_the_turn",
        "test_employer_also_gives_a_works_at_relation",
        "test_a_hypothetical_lowers_confidence",
        "test_a_doubled_letter_typo_of_a_speaker_short_name_is_an_alias",
        "test_single_quoted_titles_are_works_without_the_quote",
        "test_a_single_quoted_group_name_is_an_organization",
    }
)


@pytest.fixture(autouse=True)
def _pipeline(nlp: object, request: pytest.FixtureRequest) -> None:
    global NLP
    NLP = nlp
    if request.node.name in NOT_YET:
        request.applymarker(
            pytest.mark.xfail(strict=True, reason="not read by the parse-based extractor yet (#15)")
        )


def _extract(batch: list[Utterance], kb: KnowledgeBase) -> list[EntityObservation]:
    return extract_entities(parse_batch(NLP, batch), kb)


def _run(*turns: tuple[str, str], kb: KnowledgeBase | None = None) -> dict[str, EntityObservation]:
    return {e.name: e for e in _extract(_batch(*turns), kb or KnowledgeBase())}


def _attrs(entity: EntityObservation, name: str) -> list[str]:
    return [a.value for a in entity.attributes if a.name == name]


def _speaker_facts(text: str, speaker: str = "Ann") -> EntityObservation:
    return _run((speaker, text), ("Bob", "Nice."))[speaker]


# --------------------------------------------------------------------------- speakers


def test_every_speaker_is_a_person_with_their_own_utterances_as_sources() -> None:
    found = _run(("Ann", "Hi Bob!"), ("Bob", "Hello there."), ("Ann", "Long day."))
    assert found["Ann"].is_speaker and found["Bob"].is_speaker
    assert found["Ann"].type is EntityType.PERSON and found["Bob"].type is EntityType.PERSON
    assert found["Ann"].sources == ["S1:1", "S1:3"]
    assert found["Bob"].sources == ["S1:2"]


@pytest.mark.parametrize("assistant", ["Assistant", "assistant"])
def test_an_unnamed_assistant_is_not_a_person_but_what_it_mentions_is_kept(assistant: str) -> None:
    found = _run(
        ("User", "My sister Lena moved to Lisbon."),
        (assistant, "I love that! I'd recommend the Gulbenkian Museum to Lena."),
    )
    assert assistant not in found  # neither a speaker profile nor the holder of "likes: that"
    assert found["User"].is_speaker and found["User"].type is EntityType.PERSON
    assert ("sister", "Lena") in {(r.relation, r.object) for r in found["User"].relations}
    assert "S1:2" in found["Lena"].sources


def test_a_named_assistant_is_a_speaker_like_any_other() -> None:
    found = _run(("User", "Hi Nova!"), ("Nova", "Hello, how are you?"))
    assert found["Nova"].is_speaker and found["Nova"].type is EntityType.PERSON


def test_a_word_before_an_addressed_speaker_is_not_part_of_a_name() -> None:
    # The small pipeline reads "Yep John" and "Woah Joanna" as one PERSON when they open a sentence.
    found = _run(
        ("John", "I finally finished the mural."),
        ("Joanna", "Yep John, that sounds amazing!"),
        ("John", "Woah Joanna, thanks so much."),
        ("Joanna", "John Smith, my old teacher, would love it."),
    )
    assert "Yep John" not in found and "Woah Joanna" not in found
    assert "John Smith" in found  # a full name that is not a speaker's stays whole


def test_an_empty_batch_or_empty_text_gives_only_what_is_there() -> None:
    assert extract_entities([], KnowledgeBase()) == []
    found = _run(("Ann", ""), ("Bob", "   "))
    assert sorted(found) == ["Ann", "Bob"]
    assert found["Ann"].attributes == [] and found["Ann"].relations == []


def test_a_mentioned_speaker_name_does_not_become_a_second_entity() -> None:
    found = _run(("Ann", "Thanks, Bob! See you."), ("Bob", "Bye Ann."))
    assert sorted(found) == ["Ann", "Bob"]
    assert found["Bob"].sources == ["S1:2"]


def test_a_short_form_of_a_speaker_name_becomes_an_alias() -> None:
    found = _run(("Ann", "Hey Mel! How are you?"), ("Melanie", "Great, thanks."))
    assert "Mel" not in found
    assert found["Melanie"].aliases == ["Mel"]


# --------------------------------------------------------------------------- proper names


def test_proper_names_mid_sentence_are_found_with_multi_word_names_whole() -> None:
    found = _run(
        ("Ann", "We drove to Lake Tahoe and then read Harry Potter books with Clara."), ("Bob", "Fun.")
    )
    assert {"Lake Tahoe", "Harry Potter", "Clara"} <= set(found)
    assert "Lake" not in found and "Tahoe" not in found


@pytest.mark.parametrize(
    "text",
    [
        "Wow, that is great! Hey, Thanks for that.",
        "Omg yes. LOL that was funny. Yeah, totally.",
        "See you on Monday. It was in March. I am happy.",
        "Congrats on the news! Awesome stuff, Cheers.",
        "Family is everything. Painting is fun. Pets are great.",
    ],
)
def test_interjections_weekdays_months_pronouns_and_common_words_are_not_entities(text: str) -> None:
    found = _run(("Ann", text), ("Bob", "Okay."))
    assert sorted(found) == ["Ann", "Bob"]


def test_a_name_known_in_the_kb_is_recognised_at_sentence_start() -> None:
    kb = KnowledgeBase()
    kb.entities["e1"] = EntityAnchor(
        id="e1",
        name="Pixel",
        type=EntityType.PET,
        first_seen=datetime(2023, 5, 1, tzinfo=UTC),
        last_seen=datetime(2023, 5, 1, tzinfo=UTC),
    )
    found = _run(("Ann", "Pixel ran off today."), ("Bob", "Oh no."), kb=kb)
    assert found["Pixel"].type is EntityType.PET


# --------------------------------------------------------------------------- types


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("My dog Biscuit chewed my shoe.", "Biscuit", EntityType.PET),
        ("We adopted a kitten named Pebble.", "Pebble", EntityType.PET),
        ("Last year we moved to Lisbon for good.", "Lisbon", EntityType.PLACE),
        ("I travelled to Wexford with friends.", "Wexford", EntityType.PLACE),
        ("I work at Brightwave as a designer.", "Brightwave", EntityType.ORGANIZATION),
        ("She got a job at the Orchard Foundation.", "Orchard Foundation", EntityType.ORGANIZATION),
        ("I had lunch with Priya and Tom.", "Tom", EntityType.PERSON),
        ('I just finished "Salt Roads" and loved it.', "Salt Roads", EntityType.WORK),
        ("We watched a Star Quest movie.", "Star Quest", EntityType.WORK),
        ("The Zentrix thing was odd.", "Zentrix", EntityType.OTHER),
    ],
)
def test_entity_types_are_guessed_from_context(text: str, name: str, expected: EntityType) -> None:
    found = _run(("Ann", text), ("Bob", "Cool."))
    assert found[name].type is expected


# --------------------------------------------------------------------------- relations


@pytest.mark.parametrize(
    ("text", "relation", "obj"),
    [
        ("My sister Clara is visiting.", "sister", "Clara"),
        ("I went hiking with my older brother Sam.", "brother", "Sam"),
        ("My husband Raj cooked tonight.", "husband", "Raj"),
        ("My best friend Lena called.", "best_friend", "Lena"),
        ("Our son Theo turned five.", "son", "Theo"),
        ("Dana, my boss, was nice about it.", "boss", "Dana"),
        ("Marta is my cousin.", "cousin", "Marta"),
        ("My mom's name is Ines.", "mother", "Ines"),
    ],
)
def test_first_person_family_and_social_relations(text: str, relation: str, obj: str) -> None:
    found = _run(("Ann", text), ("Bob", "Nice."))
    rels = [(r.relation, r.object, r.object_type, r.confidence) for r in found["Ann"].relations]
    assert (relation, obj, EntityType.PERSON, 0.8) in rels
    assert found[obj].type is EntityType.PERSON


def test_plural_relation_objects_each_get_a_relation() -> None:
    ann = _speaker_facts("My kids Mia and Leo love the beach.")
    assert {(r.relation, r.object) for r in ann.relations} == {("child", "Mia"), ("child", "Leo")}


def test_pets_get_a_pet_relation_and_a_species() -> None:
    found = _run(("Ann", "My dog Rex and my cat Luna are best buddies."), ("Bob", "Cute!"))
    assert {(r.relation, r.object) for r in found["Ann"].relations} == {("pet", "Rex"), ("pet", "Luna")}
    assert found["Rex"].type is EntityType.PET
    assert _attrs(found["Rex"], "species") == ["dog"]
    assert _attrs(found["Luna"], "species") == ["cat"]


def test_a_pet_named_in_a_following_sentence_is_linked() -> None:
    found = _run(("Ann", "I got a puppy last week! Her name's Coco."), ("Bob", "Aww."))
    assert ("pet", "Coco") in {(r.relation, r.object) for r in found["Ann"].relations}
    assert found["Coco"].type is EntityType.PET


def test_a_pet_named_in_the_speakers_next_turn_is_linked_and_no_other_name_is() -> None:
    found = _run(
        ("Maria", "On another note, I just adopted this cute pup from a shelter last week."),
        ("John", "That's great! What's her name?"),
        ("Maria", "Her name is Shadow! She's full of energy."),
        ("John", "We named our boat Nimbus."),  # no pet spoken of: not a pet
    )
    assert ("pet", "Shadow") in {(r.relation, r.object) for r in found["Maria"].relations}
    assert found["Shadow"].type is EntityType.PET and _attrs(found["Shadow"], "species") == ["pup"]
    assert "Nimbus" not in found or found["Nimbus"].type is not EntityType.PET


def test_a_spouse_implies_a_weak_married_status() -> None:
    ann = _speaker_facts("My wife and I went out.")
    status = [a for a in ann.attributes if a.name == "relationship_status"]
    assert [(a.value, a.confidence, a.exclusive) for a in status] == [("married", 0.5, True)]


def test_second_person_facts_go_to_the_other_speaker_with_lower_confidence() -> None:
    found = _run(("Ann", "How was the trip?"), ("Bob", "Your sister Clara is so funny. You work at Orbital."))
    rels = {(r.relation, r.object, r.confidence) for r in found["Ann"].relations}
    assert ("sister", "Clara", 0.5) in rels
    assert [(a.value, a.confidence) for a in found["Ann"].attributes if a.name == "employer"] == [
        ("Orbital", 0.5)
    ]
    assert found["Bob"].relations == []


def test_a_vocative_is_not_a_relation_object() -> None:
    found = _run(("Ann", "I hope so."), ("Bob", "That is a good lesson for your kids, Ann."))
    assert found["Ann"].relations == []
    assert found["Bob"].relations == []


def test_questions_about_the_other_speaker_state_no_fact() -> None:
    found = _run(("Ann", "Do you work at Orbital?"), ("Bob", "No."))
    assert found["Bob"].attributes == []


# --------------------------------------------------------------------------- attributes


@pytest.mark.parametrize(
    ("text", "name", "value", "exclusive"),
    [
        ("I work at Brightwave Labs as a designer.", "employer", "Brightwave Labs", True),
        ("I'm a nurse at the county hospital.", "occupation", "nurse", True),
        ("I work as a graphic designer these days.", "occupation", "graphic designer", True),
        ("I'm a shooting guard for my team.", "occupation", "shooting guard", True),
        ("I live in Denver with my family.", "location", "Denver", True),
        ("We moved to Porto last spring.", "location", "Porto", True),
        ("I'm from Ireland originally.", "origin", "Ireland", True),
        ("I grew up in a small town.", "origin", "small town", True),
        ("I love painting because it relaxes me.", "likes", "painting", False),
        ("I really enjoy long walks on the beach, it calms me.", "likes", "long walks on the beach", False),
        ("I'm really into jazz.", "likes", "jazz", False),
        ("I'm a big fan of board games.", "likes", "board games", False),
        ("I hate running in the rain.", "dislikes", "running in the rain", False),
        ('My favorite book is "Salt Roads".', "favorite_book", "Salt Roads", True),
        ("My favorite food is this amazing lemon tart.", "favorite_food", "amazing lemon tart", True),
        ("I'm 34 years old.", "age", "34", True),
        ("I just turned 30!", "age", "30", True),
        ("I'm happily married.", "relationship_status", "married", True),
        ("I got engaged!", "relationship_status", "engaged", True),
        ("I have three kids.", "kids", "three", True),
        ("I've been painting for 7 years.", "activity", "painting for 7 years", False),
        ("I'm a transgender woman.", "identity", "transgender woman", False),
        ("As a trans woman, I know that feeling.", "identity", "trans woman", False),
        ("I took up pottery last year.", "activity", "pottery", False),
        ("I started surfing five years ago.", "activity", "surfing", False),
        ("I'm learning Spanish.", "activity", "Spanish", False),
        ("I used to go horseback riding with my dad.", "used_to", "go horseback riding with my dad", False),
        ("I'm studying psychology at college.", "studies", "psychology at college", False),
    ],
)
def test_first_person_attribute_patterns(text: str, name: str, value: str, exclusive: bool) -> None:
    ann = _speaker_facts(text)
    matching = [a for a in ann.attributes if a.name == name]
    assert [a.value for a in matching] == [value], ann.attributes
    assert matching[0].exclusive is exclusive
    assert matching[0].confidence == 0.8
    assert matching[0].sources == ["S1:1"]


@pytest.mark.parametrize(
    ("text", "name", "value"),
    [
        ("I've worked at Cedar Point Clinic for six years now.", "employer", "Cedar Point Clinic"),
        ("I've been working at Pinewood Books since the spring.", "employer", "Pinewood Books"),
        ("I'm starting at Orbital Foods next Monday.", "employer", "Orbital Foods"),
        ("I start at Greyfield Academy on the 3rd of May.", "employer", "Greyfield Academy"),
        ("My first week at Tallow Studio went fine.", "employer", "Tallow Studio"),
        ("First day at Tallow Studio done.", "employer", "Tallow Studio"),
        ("They offered me the job at Quayside Dental!", "employer", "Quayside Dental"),
        ("I got the job at Quayside Dental.", "employer", "Quayside Dental"),
        ("I'm working as a librarian these days.", "occupation", "librarian"),
        ("I've worked as a paramedic since college.", "occupation", "paramedic"),
        ("I'm the only data analyst they have left.", "occupation", "data analyst"),
        ("I'm the lead designer on that project.", "occupation", "lead designer"),
        ("I've lived in Utrecht for ten years.", "location", "Utrecht"),
        ("My landlord in Glasgow finally fixed the boiler.", "location", "Glasgow"),
        ("We moved down to Exeter last month.", "location", "Exeter"),
        ("I'm now a resident of Tromso.", "location", "Tromso"),
    ],
)
def test_present_perfect_progressive_and_named_patterns(text: str, name: str, value: str) -> None:
    ann = _speaker_facts(text)
    matching = [a for a in ann.attributes if a.name == name]
    assert [a.value for a in matching] == [value], ann.attributes
    assert matching[0].exclusive is True
    assert matching[0].confidence == 0.8


def test_worked_at_a_place_as_a_job_gives_employer_and_occupation() -> None:
    ann = _speaker_facts("I've worked at Cedar Point Clinic as a pharmacist for years.")
    assert _attrs(ann, "employer") == ["Cedar Point Clinic"]
    assert _attrs(ann, "occupation") == ["pharmacist"]
    assert ("works_at", "Cedar Point Clinic") in [(r.relation, r.object) for r in ann.relations]


@pytest.mark.parametrize(
    ("text", "value"),
    [("I'm moving to Lisbon in the autumn.", "Lisbon"), ("The rent here in Oslo is wild for me.", "Oslo")],
)
def test_planned_moves_and_here_in_give_a_weak_location(text: str, value: str) -> None:
    location = [a for a in _speaker_facts(text).attributes if a.name == "location"]
    assert [(a.value, a.confidence) for a in location] == [(value, 0.5)]


def test_a_resident_statement_takes_the_one_place_named_in_the_turn() -> None:
    ann = _speaker_facts("Hello from Tromso! I'm officially a local.")
    assert _attrs(ann, "location") == ["Tromso"]
    two_places = _speaker_facts("Back from Oslo, off to Bergen! I'm officially a local.")
    assert _attrs(two_places, "location") == []


@pytest.mark.parametrize(
    "text",
    [
        "I start at 9 tomorrow.",
        "I started at the bottom.",
        "My first day at work was fine.",
        "I've lived in a van for a while.",
        "I'm moving to May for the deadline.",
        "My landlord in the end said no.",
        "I'm the only one who knows.",
        "Isn't he your partner in crime?",
    ],
)
def test_near_misses_of_the_new_patterns_give_no_fact(text: str) -> None:
    ann = _speaker_facts(text)
    assert [a for a in ann.attributes if a.name in {"employer", "location", "occupation"}] == []
    assert ann.relations == []


def test_employer_also_gives_a_works_at_relation() -> None:
    ann = _speaker_facts("I work at Brightwave Labs.")
    assert [(r.relation, r.object, r.object_type) for r in ann.relations] == [
        ("works_at", "Brightwave Labs", EntityType.ORGANIZATION)
    ]


@pytest.mark.parametrize(
    "text",
    [
        "I'm a big believer in hard work.",
        "I'm a bit tired today.",
        "I love it!",
        "I love that idea.",
        "I like how you did that.",
        "I work for hours on end.",
        "I'm not sure I'd love that.",
    ],
)
def test_non_facts_give_no_attribute(text: str) -> None:
    ann = _speaker_facts(text)
    assert [a for a in ann.attributes if a.name in {"occupation", "likes", "employer"}] == []


def test_a_hypothetical_lowers_confidence() -> None:
    ann = _speaker_facts("If I work at Brightwave, I'll be happy.")
    assert [(a.value, a.confidence) for a in ann.attributes if a.name == "employer"] == [("Brightwave", 0.5)]


def test_a_shared_photo_caption_becomes_a_weak_attribute() -> None:
    batch = _batch(
        ("Ann", "Look at this!"), ("Bob", "Wow."), attachments={1: ["photo: a photo of a sunset over a lake"]}
    )
    ann = next(e for e in _extract(batch, KnowledgeBase()) if e.name == "Ann")
    assert [(a.name, a.value, a.confidence) for a in ann.attributes] == [
        ("shared_photo", "a sunset over a lake", 0.5)
    ]


def test_a_fact_said_twice_is_one_observation_with_both_sources() -> None:
    found = _run(("Ann", "I live in Denver."), ("Bob", "Nice."), ("Ann", "Yes, I live in Denver."))
    locations = [a for a in found["Ann"].attributes if a.name == "location"]
    assert len(locations) == 1 and locations[0].sources == ["S1:1", "S1:3"]


# --------------------------------------------------------------------------- text helpers


def test_sentences_split_without_breaking_on_abbreviations() -> None:
    sentences = split_sentences("I'm a nurse at St. Mary Hospital. We met Dr. Lee!\nOk bye")
    assert [s.text for s in sentences] == ["I'm a nurse at St. Mary Hospital.", "We met Dr. Lee!", "Ok bye"]
    text = "I'm a nurse at St. Mary Hospital. We met Dr. Lee!\nOk bye"
    assert all(text[s.start : s.end] == s.text for s in sentences)


# --------------------------------------------------------------------------- properties


def _conversation(n: int) -> list[Utterance]:
    lines = [
        ("Ann", "I went to Lisbon with my sister Clara last week and it was lovely!"),
        ("Bob", "Wow! My dog Rex would love that. I work at Brightwave Labs, so no time."),
        ("Ann", "I'm a nurse. I love painting because it calms me."),
        ("Bob", "Your sister Clara sounds fun. I'm really into jazz."),
    ]
    return [
        Utterance(id=f"S1:{i}", speaker=lines[i % 4][0], text=lines[i % 4][1], session="S1", timestamp=STAMP)
        for i in range(n)
    ]


def test_extraction_is_deterministic_and_leaves_the_kb_untouched() -> None:
    batch = _conversation(12)
    kb = KnowledgeBase()
    before = kb.to_dict()
    first = _extract(batch, kb)
    second = _extract(list(batch), kb)
    assert [e.model_dump() for e in first] == [e.model_dump() for e in second]
    assert kb.to_dict() == before


def test_a_large_batch_extracts_quickly() -> None:
    # Speed is watched through --durations; this only proves a big batch goes through whole.
    batch = _conversation(600)
    found = {e.name: e for e in _extract(batch, KnowledgeBase())}
    assert len(found["Ann"].sources) == 300
    assert found["Lisbon"].type is EntityType.PLACE


# --------------------------------------------------------------------------- precision


@pytest.mark.parametrize(
    "text",
    [
        "Thankfully, my brother is fine after the fall.",
        "Honestly, my aunt makes the best soup.",
        "Anyway, my cousin says hi.",
    ],
)
def test_a_sentence_initial_adverb_is_never_a_relation_object(text: str) -> None:
    found = _run(("Ann", text), ("Bob", "Good to hear."))
    assert found["Ann"].relations == []
    assert not {"Thankfully", "Honestly", "Anyway"} & set(found)


def test_a_name_before_my_relation_is_still_a_relation() -> None:
    found = _run(("Ann", "Kelly, my sister, is visiting."), ("Bob", "Fun!"))
    assert [(r.relation, r.object) for r in found["Ann"].relations] == [("sister", "Kelly")]


def test_a_single_letter_is_never_an_entity() -> None:
    found = _run(("Ann", "I need some R&R and a plan B."), ("Bob", "Same here."))
    assert set(found) == {"Ann", "Bob"}


def test_a_doubled_letter_typo_of_a_speaker_short_name_is_an_alias() -> None:
    found = _run(("Ann", "Hi Danielle!"), ("Danielle", "Hey Ann!"), ("Ann", "Thanks, Dann! See you soon."))
    assert "Dann" in found["Danielle"].aliases
    assert "Dann" not in found


def test_a_name_sharing_letters_with_a_speaker_is_not_an_alias() -> None:
    found = _run(("Ann", "Carl came over."), ("Caroline", "Nice!"))
    assert "Carl" in found and "Carl" not in found["Caroline"].aliases


def test_single_quoted_titles_are_works_without_the_quote() -> None:
    found = _run(("Ann", "My latest piece, 'Quiet Harbor', took weeks."), ("Bob", "Wow."))
    assert found["Quiet Harbor"].type is EntityType.WORK
    assert "Quiet Harbor'" not in found


def test_a_single_quoted_group_name_is_an_organization() -> None:
    found = _run(("Ann", "Our club, 'Green Thumbs United', meets on Sundays."), ("Bob", "Cool."))
    assert found["Green Thumbs United"].type is EntityType.ORGANIZATION


def test_attribute_values_keep_their_written_spacing_and_named_owners() -> None:
    ann = _speaker_facts(
        "I loved reading \"Charlotte's Web\" as a kid. I've been running farther to de-stress."
    )
    values = {a.value for a in ann.attributes}
    assert "reading Charlotte's Web" in values
    assert "running to de-stress" in values or "running farther to de-stress" in values
    assert not any(" - " in v or " 's" in v for v in values)


@pytest.mark.parametrize(
    "text",
    [
        "I've been working.",  # a light verb alone says nothing
        "I took my dogs to the park.",  # "take" without "up" is no hobby
        "I took some photos and took care of it.",
        "I'm putting a lot into this.",  # vague objects
        "I've been crossing my fingers.",
        "I'm planning a few.",  # an adjective is no object
    ],
)
def test_statements_that_name_no_activity_give_none(text: str) -> None:
    assert _attrs(_speaker_facts(text), "activity") == []


def test_an_activity_is_whole_phrases_without_a_stranded_preposition() -> None:
    ann = _speaker_facts("Check out the song I've been working on for weeks! I took up pottery.")
    assert _attrs(ann, "activity") == ["pottery"]
    ann = _speaker_facts("I've been searching for my keys for the whole morning.")
    # Six words at most, and never half a phrase ("searching for my keys for the").
    assert _attrs(ann, "activity") == ["searching for my keys"]


# --------------------------------------------------------------------------------- word lists


def test_the_word_lists_are_read_at_the_first_extraction_not_at_import() -> None:
    script = (
        "import gravity_core.extract.offline.entities\n"
        "from gravity_core.extract.offline.entity_words import entity_words\n"
        "assert entity_words.cache_info().currsize == 0\n"
        "words = entity_words()\n"
        "assert words is entity_words()\n"
        "print(words.relations['mum'], *words.place_verbs['move', 'to'], 'nurse' in words.occupations)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["mother", "lives_in", "place", "True"]


def test_the_word_lists_file_must_name_exactly_the_known_lists() -> None:
    text = (
        resources.files("gravity_core.extract.offline")
        .joinpath("data", "entity_words.toml")
        .read_text("utf-8")
    )
    data = tomllib.loads(text)
    assert parse_entity_words(data) == entity_words()
    for broken in (
        {**data, "words": {**data["words"], "pet_words": "dog"}},
        {**data, "words": {k: v for k, v in data["words"].items() if k != "pets"}},
        {k: v for k, v in data.items() if k != "relations"},
        {**data, "place_verbs": {"work at": ["works_at"]}},
    ):
        with pytest.raises(ValueError):
            parse_entity_words(broken)
