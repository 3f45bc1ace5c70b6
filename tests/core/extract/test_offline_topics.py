"""The offline topic extractor: segmentation, linking to known topics, labels, provenance."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import pytest

from gravity_core.embeddings.base import Embedder, Matrix
from gravity_core.embeddings.hashing import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.extract.offline.keywords import (
    STOP_WORDS,
    DocumentFrequencies,
    content_tokens,
    lemmatize,
    rank_keywords,
)
from gravity_core.extract.offline.topics import TopicExtractor
from gravity_core.schema import ArcSnapshot, KnowledgeBase, TopicAnchor, TopicObservation, Utterance

GARDEN = [
    ("Alison", "My tomatoes in the garden finally turned red and the soil looks rich."),
    ("Bob", "Your garden tomatoes sound great, do you water the garden soil every morning?"),
    ("Alison", "I water the tomato plants and the herbs in the garden every morning before work."),
    ("Bob", "My garden herbs keep dying, the basil plants hate my dry soil."),
    ("Alison", "Basil plants need compost in the soil, I mix compost into my garden beds."),
    ("Bob", "I will try compost in the garden beds for the basil and tomato plants."),
]
GARDEN_LATER = [
    ("Bob", "The compost worked, my basil plants and tomato plants are growing in the garden soil."),
    ("Alison", "Great, my garden tomatoes are huge now and the herbs love the compost."),
    ("Bob", "I planted more tomato seeds in the garden beds with fresh compost and soil."),
    ("Alison", "Water the tomato seeds every morning and keep the garden soil moist."),
]
CAR = [
    ("Bob", "My car engine made a loud noise on the highway so the mechanic checked the engine."),
    ("Alison", "A loud car engine noise can mean the brakes or the transmission, what did the mechanic say?"),
    ("Bob", "The mechanic replaced the brakes and said the car transmission needs repair soon."),
    ("Alison", "Car transmission repair costs a lot, my mechanic charged me for new brakes last year."),
    ("Bob", "I drive the car to the mechanic again next week for the transmission repair."),
    ("Alison", "Ask the mechanic to check the car tires and the engine oil too."),
]
GREETINGS = [("Alison", "Hey Bob!"), ("Bob", "Hi Ali! How are you?")]
GOODBYES = [("Bob", "Thanks!"), ("Alison", "Bye, take care!")]


def _turns(
    lines: Sequence[tuple[str, str]], session: str, *, start: int = 1, day: int = 1
) -> list[Utterance]:
    return [
        Utterance(
            id=f"{session}:{start + i}",
            speaker=speaker,
            text=text,
            session=session,
            timestamp=datetime(2024, 1, day, 10, 0, tzinfo=UTC),
        )
        for i, (speaker, text) in enumerate(lines)
    ]


def _extractor(embedder: Embedder | None = None, **settings: float) -> TopicExtractor:
    # The defaults are tuned for MiniLM; the hashing embedder's same-subject cosines are lower.
    options: dict[str, float] = {"similarity_threshold": 0.3, **settings}
    return TopicExtractor(embedder or HashingEmbedder(), **options)  # type: ignore[arg-type]


def _kb_with_garden_topic(*, keep_utterances: bool = True) -> tuple[KnowledgeBase, TopicAnchor]:
    kb = KnowledgeBase()
    earlier = _turns(GARDEN, "S1")
    if keep_utterances:
        kb.utterances.update({u.id: u for u in earlier})
    topic = TopicAnchor(
        id="topic-garden",
        label="garden / compost",
        keywords=["garden", "compost", "tomatoes", "soil", "basil"],
        participants=["Alison", "Bob"],
        sessions=["S1"],
        arc=[
            ArcSnapshot(
                session="S1",
                date=earlier[0].timestamp,
                summary="Alison: Basil plants need compost in the soil, I mix compost into my garden beds.",
                sources=[u.id for u in earlier],
            )
        ],
        sources=[u.id for u in earlier],
    )
    kb.topics[topic.id] = topic
    return kb, topic


class CountingEmbedder:
    """The hashing embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.texts: list[str] = []

    @property
    def name(self) -> str:
        return "counting"

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.texts.extend(texts)
        return self.inner.embed(texts)


# -- segmentation ------------------------------------------------------------------------------


def test_a_session_with_two_subjects_is_split_at_the_change() -> None:
    batch = _turns(GARDEN + CAR, "S1")

    observations = _extractor().extract(batch, KnowledgeBase())

    assert [o.sources for o in observations] == [
        [u.id for u in batch[:6]],
        [u.id for u in batch[6:]],
    ]
    assert observations[0].label != observations[1].label
    assert all(o.topic_id is None for o in observations)


def test_a_single_subject_session_is_one_observation() -> None:
    batch = _turns(GARDEN + GARDEN_LATER, "S1")

    observations = _extractor().extract(batch, KnowledgeBase())

    assert len(observations) == 1
    assert observations[0].sources == [u.id for u in batch]


def test_greetings_and_thanks_are_not_topic_material() -> None:
    batch = _turns(GREETINGS + GARDEN + GOODBYES, "S1")
    chit_chat = {u.id for u in batch[:2] + batch[-2:]}

    observations = _extractor().extract(batch, KnowledgeBase())

    cited = {i for o in observations for i in o.sources}
    assert cited == {u.id for u in batch[2:-2]}
    assert not cited & chit_chat


def test_a_batch_of_chit_chat_only_yields_nothing() -> None:
    assert _extractor().extract(_turns(GREETINGS + GOODBYES, "S1"), KnowledgeBase()) == []
    assert _extractor().extract([], KnowledgeBase()) == []


def test_a_photo_caption_makes_a_short_turn_topic_material() -> None:
    batch = _turns(GARDEN, "S1")
    photo = Utterance(
        id="S1:99",
        speaker="Alison",
        text="Look!",
        session="S1",
        timestamp=batch[0].timestamp,
        attachments=["a photo of tomato plants in a garden bed with compost"],
    )

    observations = _extractor().extract([*batch, photo], KnowledgeBase())

    assert "S1:99" in observations[-1].sources


# -- linking -------------------------------------------------------------------------------------


def test_a_segment_on_a_known_topic_links_to_it() -> None:
    kb, topic = _kb_with_garden_topic()
    batch = _turns(GARDEN_LATER, "S2", day=8)

    observations = _extractor().extract(batch, kb)

    assert len(observations) == 1
    assert observations[0].topic_id == topic.id
    assert observations[0].label == topic.label
    assert observations[0].session == "S2"


def test_a_known_topic_is_found_from_its_profile_when_its_sources_are_not_in_the_kb() -> None:
    kb, topic = _kb_with_garden_topic(keep_utterances=False)

    observations = _extractor().extract(_turns(GARDEN_LATER, "S2", day=8), kb)

    assert [o.topic_id for o in observations] == [topic.id]


def test_a_new_subject_opens_a_new_topic() -> None:
    kb, topic = _kb_with_garden_topic()
    batch = _turns(GARDEN_LATER + CAR, "S2", day=8)

    observations = _extractor().extract(batch, kb)

    assert [o.topic_id for o in observations] == [topic.id, None]
    car = observations[1]
    assert car.sources == [u.id for u in batch[len(GARDEN_LATER) :]]
    assert car.label.casefold() != topic.label.casefold()


def _add_car_topic(kb: KnowledgeBase) -> TopicAnchor:
    earlier = _turns(CAR, "S0", start=50)
    kb.utterances.update({u.id: u for u in earlier})
    topic = TopicAnchor(
        id="topic-car",
        label="car / mechanic",
        keywords=["car", "mechanic", "engine", "brakes"],
        participants=["Alison", "Bob"],
        sessions=["S0"],
        arc=[
            ArcSnapshot(
                session="S0",
                date=earlier[0].timestamp,
                summary="Bob: the car.",
                sources=[u.id for u in earlier],
            )
        ],
        sources=[u.id for u in earlier],
    )
    kb.topics[topic.id] = topic
    return topic


@pytest.mark.parametrize(("margin", "linked"), [(0.05, True), (1.9, False)])
def test_below_the_threshold_a_segment_joins_only_a_topic_that_clearly_beats_the_others(
    margin: float, linked: bool
) -> None:
    kb, garden = _kb_with_garden_topic()
    _add_car_topic(kb)
    extractor = _extractor(similarity_threshold=1.9, margin_floor=0.0, margin=margin)

    observations = extractor.extract(_turns(GARDEN_LATER, "S2", day=8), kb)

    assert [o.topic_id for o in observations] == [garden.id if linked else None]


def test_below_the_margin_floor_a_standing_out_topic_is_not_joined() -> None:
    kb, _ = _kb_with_garden_topic()
    _add_car_topic(kb)
    extractor = _extractor(similarity_threshold=1.9, margin_floor=1.8, margin=0.0)

    observations = extractor.extract(_turns(GARDEN_LATER, "S2", day=8), kb)

    assert [o.topic_id for o in observations] == [None]


def test_words_shared_with_a_topic_raise_the_link_score() -> None:
    kb, garden = _kb_with_garden_topic()
    batch = _turns(GARDEN_LATER, "S2", day=8)

    def extractor(weight: float) -> TopicExtractor:
        return _extractor(similarity_threshold=0.9, margin_floor=2.0, keyword_weight=weight)

    without_words = extractor(0.0).extract(batch, kb)
    with_words = extractor(1.0).extract(batch, kb)
    unrelated = extractor(1.0).extract(_turns(CAR, "S2", day=8), kb)

    assert [o.topic_id for o in without_words] == [None]
    assert [o.topic_id for o in with_words] == [garden.id]
    assert [o.topic_id for o in unrelated] == [None]


def test_a_subject_resumed_later_in_the_session_is_one_observation() -> None:
    batch = _turns(GARDEN + CAR + GARDEN_LATER, "S1")

    observations = _extractor().extract(batch, KnowledgeBase())

    assert len(observations) == 2
    garden, car = observations
    assert garden.sources == [u.id for u in batch[:6] + batch[12:]]
    assert car.sources == [u.id for u in batch[6:12]]


def test_one_new_subject_in_two_sessions_of_a_batch_shares_its_label() -> None:
    batch = _turns(GARDEN, "S1") + _turns(GARDEN_LATER, "S2", day=8)

    observations = _extractor().extract(batch, KnowledgeBase())

    assert [o.session for o in observations] == ["S1", "S2"]
    assert observations[0].label == observations[1].label
    assert all(o.topic_id is None for o in observations)


def test_a_new_label_equal_to_a_known_label_links_to_that_topic() -> None:
    kb, garden = _kb_with_garden_topic()
    batch = _turns(CAR, "S2", day=8)
    (unlinked,) = _extractor().extract(batch, kb)
    assert unlinked.topic_id is None
    # A known topic labelled like the new one (though about something else): the merge would join
    # them by label, so the extractor names it.
    kb.topics[garden.id] = garden.model_copy(update={"label": unlinked.label.upper()})

    (linked,) = _extractor().extract(batch, kb)

    assert linked.topic_id == garden.id
    assert linked.label == unlinked.label.upper()


def test_an_unchanged_topic_is_not_embedded_again() -> None:
    kb, _ = _kb_with_garden_topic()
    embedder = CountingEmbedder()
    extractor = _extractor(embedder)
    batch = _turns(GARDEN_LATER, "S2", day=8)

    extractor.extract(batch, kb)
    first = len(embedder.texts)
    extractor.extract(batch, kb)

    assert first > 0
    assert len(embedder.texts) == first


# -- labels, keywords, summary, facts ---------------------------------------------------------


def test_labels_and_keywords_leave_out_stop_words_and_speaker_names() -> None:
    lines = [
        ("Alison", "Bob, my garden tomatoes are finally red, Bob!"),
        ("Bob", "Alison, that's great Alison! Your garden soil must be rich, Ali."),
        ("Alison", "Thanks, Bob. The garden compost and the tomato plants did it, Bob."),
        ("Bob", "Alison, I want your garden compost recipe for my basil, Alison!"),
    ]
    batch = _turns(GREETINGS + lines, "S1")

    observations = _extractor().extract(batch, KnowledgeBase())

    names = {"alison", "bob", "ali"}
    for observation in observations:
        words = {w.strip().casefold() for w in observation.label.split("/")}
        assert words and not words & (names | STOP_WORDS)
        assert not {k.casefold() for k in observation.keywords} & (names | STOP_WORDS)
    assert "garden" in observations[0].label


def test_summary_and_facts_are_extractive_and_attributed() -> None:
    batch = _turns(GARDEN, "S1")
    texts: dict[str, set[str]] = {u.speaker: set() for u in batch}
    for u in batch:
        texts[u.speaker].add(u.text)

    (observation,) = _extractor(summary_chars=120).extract(batch, KnowledgeBase())

    assert len(observation.summary) <= 120
    speaker, _, said = observation.summary.partition(": ")
    assert speaker in texts and any(said.rstrip("…")[:30] in t for t in texts[speaker])
    assert 1 <= len(observation.facts) <= 3
    for fact in observation.facts:
        speaker, _, sentence = fact.partition(": ")
        assert any(sentence in t for t in texts[speaker])
        assert not sentence.endswith("?")
    assert len({f.partition(": ")[0] for f in observation.facts}) == 2  # both speakers quoted
    assert observation.participants == ["Alison", "Bob"]


def test_the_summary_quotes_sentences_not_the_greetings_around_them() -> None:
    chatty = [
        (speaker, f"Hey {other}, so good to hear from you! {text} How are you doing?")
        for (speaker, text), other in zip(GARDEN, ["Bob", "Alison"] * 3, strict=True)
    ]
    batch = _turns(chatty, "S1")

    (observation,) = _extractor(summary_chars=200).extract(batch, KnowledgeBase())

    assert "Hey" not in observation.summary and "?" not in observation.summary
    assert any(text in observation.summary for _, text in GARDEN)
    for fact in observation.facts:
        assert fact.partition(": ")[2] not in observation.summary


def test_sources_are_batch_ids_of_the_observation_session_in_order() -> None:
    batch = _turns(GREETINGS + GARDEN + CAR, "S1") + _turns(CAR + GOODBYES, "S2", day=8)
    by_id = {u.id: u for u in batch}
    order = {u.id: i for i, u in enumerate(batch)}

    observations = _extractor().extract(batch, KnowledgeBase())

    cited: list[str] = []
    for observation in observations:
        assert observation.sources
        assert all(i in by_id and by_id[i].session == observation.session for i in observation.sources)
        assert observation.sources == sorted(observation.sources, key=order.__getitem__)
        cited.extend(observation.sources)
    assert len(cited) == len(set(cited))


def test_the_same_input_gives_the_same_output() -> None:
    kb, _ = _kb_with_garden_topic()
    batch = _turns(GREETINGS + GARDEN_LATER + CAR + GOODBYES, "S2", day=8)

    def dump(observations: list[TopicObservation]) -> list[dict[str, object]]:
        return [o.model_dump() for o in observations]

    first = _extractor()
    once = dump(first.extract(batch, kb))

    assert dump(first.extract(batch, kb)) == once
    assert dump(_extractor().extract(batch, kb)) == once


def test_statistics_from_another_conversation_do_not_leak() -> None:
    batch = _turns(GARDEN + CAR, "S1")
    fresh = _extractor().extract(batch, KnowledgeBase())
    reused = _extractor()
    reused.extract(_turns(GARDEN_LATER, "X1"), KnowledgeBase())

    assert reused.extract(batch, KnowledgeBase()) == fresh


@pytest.mark.parametrize(
    "settings",
    [
        {"similarity_threshold": 3.0},
        {"boundary_depth": -0.1},
        {"segment_turns": 0.5},
        {"window": 0},
        {"min_segment_turns": 0},
        {"max_facts": -1},
        {"summary_chars": 10},
        {"margin": -0.1},
        {"margin_floor": 2.5},
    ],
)
def test_bad_settings_are_configuration_errors(settings: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        TopicExtractor(HashingEmbedder(), **settings)  # type: ignore[arg-type]


# -- keywords ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "lemma"),
    [
        ("agencies", "agency"),
        ("kids", "kid"),
        ("movies", "movie"),
        ("classes", "class"),
        ("class", "class"),
        ("boxes", "box"),
        ("children", "child"),
        ("canvas", "canvas"),
        ("art", "art"),
    ],
)
def test_lemmatize_makes_plurals_singular(word: str, lemma: str) -> None:
    assert lemmatize(word) == lemma


def test_content_tokens_drop_stop_words_contractions_and_excluded_names() -> None:
    tokens = content_tokens(
        "Hey Mel! I'm so happy: we've adopted two kids from the LGBTQ+ agencies.", {"mel"}
    )

    assert [t.lemma for t in tokens] == ["adopted", "kid", "lgbtq", "agency"]
    assert tokens[2].surface == "LGBTQ"


def test_rank_keywords_prefers_words_repeated_across_turns_and_rare_in_the_conversation() -> None:
    df = DocumentFrequencies()
    history = ["family dinner tonight", "family trip", "family photos", "pottery class"]
    for i, text in enumerate(history):
        df.add(f"h{i}", [t.lemma for t in content_tokens(text)])
    docs = [
        content_tokens("My family loves the pottery class."),
        content_tokens("Pottery is calming, the family agrees."),
        content_tokens("I bought a kiln."),
    ]

    ranked = rank_keywords(docs, df, 3)

    assert ranked[0][0] == "pottery"
    assert [lemma for lemma, _, _ in ranked].index("family") > 0
    assert np.isclose(df.idf("unknown"), np.log(5) + 1)


def test_an_embedder_returning_the_wrong_number_of_vectors_is_a_configuration_error() -> None:
    class Short(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> Matrix:
            return self.inner.embed(texts)[:-1]

    with pytest.raises(ConfigurationError, match="returned an array"):
        _extractor(Short()).extract(_turns(GARDEN, "S1"), KnowledgeBase())
