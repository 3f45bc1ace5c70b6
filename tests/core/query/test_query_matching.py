"""Native matching of questions against anchors: gravity_core.query.matching."""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gravity_core.build.builder import AnchorBuilder
from gravity_core.extract.offline.keywords import content_tokens
from gravity_core.query.config import MatchWeights, QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.matching import AnchorLexicon, Stemmer, stem
from gravity_core.query.matching import ranking as ranking_module
from gravity_core.query.recipes import FULL
from gravity_core.schema import (
    AnchorKind,
    ArcSnapshot,
    Attribute,
    EntityAnchor,
    EntityType,
    EventAnchor,
    Fact,
    KnowledgeBase,
    Relation,
    TimeRef,
    TopicAnchor,
    Utterance,
)
from gravity_core.schema.time import Granularity

T0 = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)


def _attr(name: str, value: str, confidence: float = 0.8) -> Attribute:
    return Attribute(
        name=name, value=value, confidence=confidence, first_seen=T0, last_seen=T0, sources=["D1:1"]
    )


def _entity(eid: str, name: str, etype: EntityType = EntityType.PERSON, **kw: object) -> EntityAnchor:
    return EntityAnchor(id=eid, name=name, type=etype, first_seen=T0, last_seen=T0, **kw)  # type: ignore[arg-type]


def _event(
    eid: str,
    who: list[str],
    what: str,
    day: date | None = None,
    where: str | None = None,
    outcome: str | None = None,
) -> EventAnchor:
    when = TimeRef(raw="then", start=day, end=day, granularity=Granularity.DAY) if day else None
    ids = [w.lower() for w in who]
    return EventAnchor(
        id=eid,
        who=who,
        who_ids=ids,
        what=what,
        when=when,
        where=where,
        outcome=outcome,
        said_at=T0,
        session="s1",
        sources=["D1:1"],
    )


def _topic(tid: str, label: str, keywords: list[str], facts: list[str]) -> TopicAnchor:
    return TopicAnchor(
        id=tid,
        label=label,
        keywords=keywords,
        participants=["Caroline", "Melanie"],
        sessions=["s1"],
        arc=[ArcSnapshot(session="s1", date=T0, summary=label, sources=["D1:1"])],
        key_facts=[Fact(text=f, sources=["D1:1"]) for f in facts],
        sources=["D1:1"],
    )


def make_kb() -> KnowledgeBase:
    pet = Relation(
        relation="pet",
        object="Oscar",
        object_id="oscar",
        confidence=0.8,
        first_seen=T0,
        last_seen=T0,
        sources=["D1:2"],
    )
    entities = [
        _entity(
            "caroline",
            "Caroline",
            aliases=["Caro"],
            is_speaker=True,
            relations=[pet],
            attributes=[_attr("career", "counseling")],
        ),
        _entity(
            "melanie", "Melanie", aliases=["Mel"], is_speaker=True, attributes=[_attr("hobby", "painting")]
        ),
        _entity("oscar", "Oscar", EntityType.PET, attributes=[_attr("species", "guinea pig")]),
        _entity("amy-ellis-nutt", "Amy Ellis Nutt"),
        _entity("pride", "Pride", EntityType.OTHER),
        _entity("marie", "Marie"),
    ]
    events = [
        _event("e1", ["Caroline"], "went to a LGBTQ support group", date(2023, 5, 7)),
        _event("e2", ["Melanie"], "painted that lake sunrise", date(2022, 6, 1)),
        _event(
            "e3",
            ["Melanie"],
            "ran a charity race",
            date(2023, 5, 20),
            outcome="raised money for mental health",
        ),
        _event("e4", ["Caroline"], "researched adoption agencies"),
        _event("e5", ["Melanie"], "took the kids camping", where="the mountains"),
        _event("e6", ["Caroline"], "joined a knitting group"),
        _event("e7", ["Melanie"], "had a group dinner"),
        _event("e8", ["Melanie"], "organised a group hike"),
        _event("e9", ["Melanie"], "started a group chat"),
        _event("e10", ["Melanie"], "received emotional support"),
        _event("e11", ["Melanie"], "watched her cousin get married"),
        _event("e12", ["Caroline"], "went to the pride parade"),
    ]
    topics = [
        _topic("t1", "pottery / clay", ["pottery", "clay", "bowl"], ["Melanie: I made a bowl in my class."]),
        _topic(
            "t2", "camping / nature", ["camping", "nature"], ["Melanie: We roasted marshmallows by the fire."]
        ),
        _topic(
            "t3", "adoption / family", ["adoption", "agency"], ["Caroline: The pottery fair inspired me."]
        ),
    ]
    utterance = Utterance(id="D1:1", speaker="Caroline", text="hi", session="s1", timestamp=T0)
    return KnowledgeBase(
        utterances={utterance.id: utterance},
        entities={e.id: e for e in entities},
        events={e.id: e for e in events},
        topics={t.id: t for t in topics},
    )


@pytest.fixture(scope="module")
def lexicon() -> AnchorLexicon:
    return AnchorLexicon.from_kb(make_kb())


# ------------------------------------------------------------------------------------ entities


@pytest.mark.parametrize(
    "question",
    [
        "What is Caroline's job?",
        "what is caroline doing these days",
        "Caroline\u2019s career?",  # curly apostrophe
        "What about CAROLINE?",
    ],
)
def test_entity_name_is_case_and_possessive_tolerant(lexicon: AnchorLexicon, question: str) -> None:
    found = lexicon.entities(question, 5)
    assert next(iter(found)) == "caroline"
    assert found["caroline"] == pytest.approx(1.0)


def test_alias_matches_slightly_below_the_name(lexicon: AnchorLexicon) -> None:
    found = lexicon.entities("What did Mel paint?", 5)
    assert next(iter(found)) == "melanie"
    assert 0.9 <= found["melanie"] < 1.0


@pytest.mark.parametrize(
    ("question", "expected"),
    [("What did Carolin research?", "caroline"), ("What does Melany's son like?", "melanie")],
)
def test_small_misspellings_of_names_still_match(
    lexicon: AnchorLexicon, question: str, expected: str
) -> None:
    found = lexicon.entities(question, 5)
    assert next(iter(found)) == expected
    assert 0.6 <= found[expected] < 1.0


def test_ordinary_words_of_the_kb_are_not_read_as_misspelled_names(lexicon: AnchorLexicon) -> None:
    # 'married' is close to 'Marie' (difflib ratio 0.83), but the KB uses it as a word.
    assert "marie" not in lexicon.entities("Who got married?", 5)
    assert "marie" in lexicon.entities("Who is Marie?", 5)


def test_multi_word_names_match_whole_or_in_part(lexicon: AnchorLexicon) -> None:
    whole = lexicon.entities("What did Amy Ellis Nutt write?", 5)
    part = lexicon.entities("What did Nutt write?", 5)
    assert whole["amy-ellis-nutt"] == pytest.approx(1.0)
    assert 0.0 < part["amy-ellis-nutt"] < 0.5


def test_relation_holder_of_a_named_entity_is_found_lower(lexicon: AnchorLexicon) -> None:
    found = lexicon.entities("Who is the dog Oscar's owner?", 5)
    assert list(found)[:2] == ["oscar", "caroline"]
    assert found["caroline"] < found["oscar"]


def test_attribute_values_point_at_entities_with_a_low_score(lexicon: AnchorLexicon) -> None:
    found = lexicon.entities("Who works in counseling?", 5)
    assert next(iter(found)) == "caroline"
    assert 0.0 < found["caroline"] <= 0.5


def test_a_lowercase_common_word_name_scores_below_the_written_name(lexicon: AnchorLexicon) -> None:
    lower = lexicon.entities("When was the pride parade?", 5)["pride"]
    named = lexicon.entities("When was Pride?", 5)["pride"]
    assert lower < named == pytest.approx(1.0)


def test_entities_respect_limit_and_order(lexicon: AnchorLexicon) -> None:
    found = lexicon.entities("Did Caroline and Melanie meet Oscar?", 2)
    assert len(found) == 2
    scores = list(found.values())
    assert scores == sorted(scores, reverse=True)
    assert lexicon.entities("Caroline", 0) == {}


def test_unrelated_question_matches_no_entity(lexicon: AnchorLexicon) -> None:
    assert lexicon.entities("What is the weather like?", 5) == {}


# -------------------------------------------------------------------------------------- events


def test_stem_meets_inflections() -> None:
    assert stem("painted") == stem("painting") == stem("paints") == stem("paint")
    assert stem("hiking") == stem("hike") == stem("hikes")
    assert stem("running") == stem("runs")
    assert stem("adoption") == stem("adopted")


def keyword_stems(text: str) -> list[str]:
    """The definition: each content word's lemma stemmed, distinct, in order, three letters or more."""
    out = dict.fromkeys(stem(t.lemma) for t in content_tokens(text))
    return [s for s in out if len(s) >= 3]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "Caroline's",
                "painted",
                "paintings",
                "the",
                "It's",
                "agencies",
                "hiking",
                "’90s",
                "mice",
                "adoption",
                "ran",
                "a",
                "OK",
                "re-done",
                "+1",
                "don't",
                "studied",
                "Studies",
                "a.b",
                "x-",
            ]
        )
        | st.text(alphabet="abcdeiInsgtu'’+-. ", max_size=12),
        max_size=20,
    )
)
def test_the_stemmer_memo_gives_the_stems_of_keyword_stems(words: list[str]) -> None:
    stemmer = Stemmer()
    text = " ".join(words)
    assert stemmer.stems(text) == keyword_stems(text)
    assert stemmer.stems(text) == keyword_stems(text)  # the second time from the memo


def test_event_keywords_use_stems(lexicon: AnchorLexicon) -> None:
    found = lexicon.events("When did Melanie paint a sunrise?", 3)
    assert next(iter(found)) == "e2"
    assert found["e2"] == pytest.approx(1.0)


def test_events_of_named_participants_are_candidates_without_shared_words(lexicon: AnchorLexicon) -> None:
    found = lexicon.events("What has Caroline been up to?", 10)
    assert set(found) == {"e1", "e4", "e6", "e12"}
    assert all(0.0 < s <= 1.0 for s in found.values())


def test_explicit_participants_replace_the_named_ones(lexicon: AnchorLexicon) -> None:
    found = lexicon.events("What has she been up to?", 10, entity_ids=["caroline"])
    assert set(found) == {"e1", "e4", "e6", "e12"}
    assert lexicon.events("What has she been up to?", 10) == {}


def test_where_and_outcome_are_matched(lexicon: AnchorLexicon) -> None:
    assert next(iter(lexicon.events("Who went to the mountains?", 3))) == "e5"
    assert next(iter(lexicon.events("Who raised money?", 3))) == "e3"


def test_rare_words_count_more_than_common_ones(lexicon: AnchorLexicon) -> None:
    # 'group' is in five events, 'support' in two: the rarer word decides.
    found = lexicon.events("Who found support in a group?", 10)
    assert next(iter(found)) == "e1"  # both words
    assert found["e10"] > found["e6"]  # 'support' only beats 'group' only


def test_participant_and_keyword_together_rank_first(lexicon: AnchorLexicon) -> None:
    found = lexicon.events("When did Caroline go to the support group?", 5)
    assert next(iter(found)) == "e1"
    assert found["e1"] > found["e10"]  # e10 has 'support' but is Melanie's


def test_events_limit_and_score_range(lexicon: AnchorLexicon) -> None:
    found = lexicon.events("What did Melanie do with the group?", 3)
    assert len(found) == 3
    assert all(0.0 < s <= 1.0 for s in found.values())
    assert list(found.values()) == sorted(found.values(), reverse=True)


def test_match_event_needs_a_shared_word(lexicon: AnchorLexicon) -> None:
    assert lexicon.match_event("the charity race") == "e3"
    assert lexicon.match_event("the wedding banquet") is None


# -------------------------------------------------------------------------------------- topics


def test_topic_label_and_keywords_beat_key_facts(lexicon: AnchorLexicon) -> None:
    found = lexicon.topics("Did Melanie try pottery?", 5)
    assert list(found) == ["t1", "t3"]  # t3 only mentions pottery in a key fact
    assert found["t1"] > found["t3"] > 0.0


def test_topic_key_fact_words_are_found(lexicon: AnchorLexicon) -> None:
    found = lexicon.topics("Did they roast marshmallows?", 5)
    assert next(iter(found)) == "t2"
    assert found["t2"] < 1.0


def test_no_topic_for_unrelated_words(lexicon: AnchorLexicon) -> None:
    assert lexicon.topics("What is the capital of Peru?", 5) == {}


# ------------------------------------------------------------------------------------- general


def test_lexicon_handles_an_empty_kb() -> None:
    empty = AnchorLexicon.from_kb(KnowledgeBase())
    assert empty.entities("Caroline?", 5) == {}
    assert empty.events("Caroline?", 5) == {}
    assert empty.topics("Caroline?", 5) == {}
    assert empty.latest_day is None


def test_latest_day_is_the_last_utterance_day(lexicon: AnchorLexicon) -> None:
    assert lexicon.latest_day == date(2023, 5, 8)


def test_participants_are_named_entities_with_events(lexicon: AnchorLexicon) -> None:
    assert lexicon.participants("Did Caroline and Oscar see Melanie?") == ["caroline", "melanie"]


def test_participant_only_events_prefer_the_latest() -> None:
    kb = make_kb()
    for i in range(1, 4):
        event = _event(f"late{i}", ["Caroline"], f"unrelated thing {i}", date(2023, 9, i))
        kb.events[event.id] = event
    found = AnchorLexicon.from_kb(kb).events("What has Caroline been up to?", 2)
    assert list(found) == ["late3", "late2"]


@pytest.mark.parametrize("seed", range(12))
def test_the_largest_scores_are_found_above_a_sampled_threshold_or_by_a_full_partial_sort(seed: int) -> None:
    """largest gives the same indices as a partial sort of every key, whatever the keys' spread."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(ranking_module._SAMPLED_MIN, 120_000))
    levels = [rng.random(4), rng.random(300), rng.random(n)][seed % 3]
    scores = rng.choice(levels, n)
    if seed % 4 == 3:  # the best scores all at the end, where a strided sample sees few of them
        scores = np.sort(scores)
    keys = scores + ranking_module.ties(n)  # distinct, as scores plus tie offsets always are
    for limit in (1, 7, 50, 400, 5_000):
        found = ranking_module.largest(keys, limit)
        assert found.size == limit
        assert set(found.tolist()) == set(np.argpartition(-keys, limit - 1)[:limit].tolist())


# ------------------------------------------------------------------------------------- weights


def test_the_weights_are_data_of_the_hashable_query_config() -> None:
    assert QueryConfig().weights == MatchWeights()
    changed = QueryConfig(weights={"holder": 0.7})  # type: ignore[arg-type]
    assert changed.weights == MatchWeights(holder=0.7)
    assert len({QueryConfig(), QueryConfig(), changed, FULL}) == 2  # cache keys
    assert MatchWeights().event_participant == 1.0 - 0.7


@pytest.mark.parametrize(
    "bad",
    [
        {"alias": 1.5},
        {"fuzzy_cutoff": -0.1},
        {"what": 0.0},  # a keyword field of weight 0 would drop its words from the index
        {"decay_days": 0.0},
        {"holder": float("nan")},
        {"temporal_phrase": 0.5},  # above the participant tier
        {"temporal_native": 0.2},  # above the contained tier
    ],
)
def test_weights_that_break_the_scoring_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        MatchWeights(**bad)
    with pytest.raises(ValidationError):
        QueryConfig(weights=bad)  # type: ignore[arg-type]


def test_reweighting_shares_the_tables_and_matches_a_lexicon_built_with_the_weights(
    lexicon: AnchorLexicon,
) -> None:
    weights = MatchWeights(holder=0.3, key_fact=0.9, what=0.5, event_keywords=0.6, fuzzy_cutoff=0.9)
    again = lexicon.reweighted(weights)
    assert lexicon.reweighted(MatchWeights()) is lexicon
    equal = MatchWeights(holder=0.3, key_fact=0.9, what=0.5, event_keywords=0.6, fuzzy_cutoff=0.9)
    assert equal is not weights and lexicon.reweighted(equal) is again
    assert again.timeline is lexicon.timeline
    built = AnchorLexicon.from_kb(make_kb(), weights)
    for question in (
        "Who is the dog Oscar's owner?",
        "Did Melanie try pottery?",
        "When did Melanie paint a sunrise?",
        "What did Carolin research?",
        "Who works in counseling?",
    ):
        assert again.entities(question, 5) == built.entities(question, 5)
        assert again.events(question, 5) == built.events(question, 5)
        assert again.topics(question, 5) == built.topics(question, 5)


def test_each_weight_moves_its_own_score(lexicon: AnchorLexicon) -> None:
    question = "Who is the dog Oscar's owner?"
    holder = lexicon.reweighted(MatchWeights(holder=0.3)).entities(question, 5)
    assert holder["caroline"] == pytest.approx(0.5 * lexicon.entities(question, 5)["caroline"])
    assert holder["oscar"] == lexicon.entities(question, 5)["oscar"]
    # 'Carolin' reads as 'Caroline' at a difflib ratio below 0.95: not a misspelling any more.
    assert "caroline" not in lexicon.reweighted(MatchWeights(fuzzy_cutoff=0.95)).entities(
        "What did Carolin research?", 5
    )
    facts = lexicon.reweighted(MatchWeights(key_fact=1.0)).topics("Did they roast marshmallows?", 5)
    assert max(facts.values()) > max(lexicon.topics("Did they roast marshmallows?", 5).values())


def test_a_query_config_s_weights_reach_the_engine(sample_kb: AnchorBuilder) -> None:
    engine = GravityEngine.from_builder(sample_kb, follow=False)
    native = QueryConfig(rerank=False, expand=False, modules=frozenset({AnchorKind.ENTITY}))
    lowered = native.model_copy(update={"weights": MatchWeights(name=0.8)})
    question = "What does Maya do at work?"
    plain = {a.id: a.score for a in engine.query(question, config=native).anchors}
    scaled = {a.id: a.score for a in engine.query(question, config=lowered).anchors}
    maya = max(plain, key=plain.__getitem__)
    assert plain[maya] == pytest.approx(1.0)
    assert scaled[maya] == pytest.approx(0.8)
    assert engine.lexicon.weights == MatchWeights()  # the served lexicon keeps the defaults
