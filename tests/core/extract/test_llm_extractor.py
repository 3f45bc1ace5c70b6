"""The LLM extractor on a small invented batch, with hand-written recorded answers."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from gravity_core.errors import ConfigurationError, UnexpectedModelOutput
from gravity_core.extract.base import Extractor
from gravity_core.extract.llm import LLMExtractor
from gravity_core.llm import Message, ResponseCache
from gravity_core.prompts import (
    DEFAULT_MAX_KNOWN_ENTITIES,
    DEFAULT_MAX_KNOWN_TOPICS,
    ENTITIES,
    EVENTS,
    FUSED,
    TOPICS,
    EventExtraction,
    PromptContext,
    default_prompts,
    render_outline,
    render_schema,
)
from gravity_core.schema import (
    AnchorUpdate,
    EntityAnchor,
    EntityObservation,
    EntityType,
    KnowledgeBase,
    TopicAnchor,
    Utterance,
)
from gravity_core.testing import FakeChatModel, RecordedModel

FIXTURES = Path(__file__).parents[2] / "fixtures" / "llm"
SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
EARLIER = datetime(2023, 4, 1, tzinfo=UTC)


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.fixture
def batch() -> list[Utterance]:
    lines = [
        ("Caroline", "Hey Mel! I went to an LGBTQ support group yesterday and it was so powerful."),
        ("Melanie", "That's amazing, Caroline! I finished my lake painting last week."),
        ("Caroline", "I've decided to work as a school counselor now, no more retail for me."),
        ("Melanie", "Good for you! Oscar, my dog, would have cheered too."),
        ("Caroline", "Thanks! My sister Anna is coming to visit from Boston next month."),
    ]
    return [
        Utterance(id=f"S2:{i}", speaker=speaker, text=text, session="S2", timestamp=SAID)
        for i, (speaker, text) in enumerate(lines, 1)
    ]


def _entity(id_: str, name: str, mentions: int, aliases: list[str] | None = None) -> EntityAnchor:
    return EntityAnchor(
        id=id_,
        name=name,
        aliases=aliases or [],
        type=EntityType.PERSON,
        mentions=mentions,
        first_seen=EARLIER,
        last_seen=EARLIER,
    )


@pytest.fixture
def kb() -> KnowledgeBase:
    kb = KnowledgeBase()
    kb.entities["e1"] = _entity("e1", "Caroline", 8)
    kb.entities["e2"] = _entity("e2", "Melanie", 5, ["Mel"])
    kb.topics["t1"] = TopicAnchor(
        id="t1", label="Melanie's painting", keywords=["painting", "art"], sources=["S1:4", "S1:5"]
    )
    return kb


def _recorded() -> RecordedModel:
    return RecordedModel(
        {
            ("EntityExtraction", "[S2:1]"): _fixture("entities_s2.json"),
            ("EventExtraction", "[S2:1]"): _fixture("events_s2.json"),
            ("TopicExtraction", "[S2:1]"): _fixture("topics_s2.json"),
            ("FusedExtraction", "[S2:1]"): _fixture("fused_s2.txt"),
        },
        model_name="rec",
    )


def _by_name(update: AnchorUpdate) -> dict[str, EntityObservation]:
    return {e.name: e for e in update.entities}


# -- module mode ----------------------------------------------------------------------------------


def test_module_mode_makes_one_call_per_module(batch: list[Utterance], kb: KnowledgeBase) -> None:
    model = _recorded()
    extractor = LLMExtractor(model)
    assert isinstance(extractor, Extractor)
    assert extractor.name == "llm:rec:modules"
    extractor.extract(batch, kb)
    assert len(model.calls) == 3
    schemas = [
        next(n for n in ("Entity", "Event", "Topic") if f'"title": "{n}Extraction"' in c[-1]["content"])
        for c in model.calls
    ]
    assert schemas == ["Entity", "Event", "Topic"]


def test_entities_with_exclusive_attributes_and_relations(batch: list[Utterance], kb: KnowledgeBase) -> None:
    update = LLMExtractor(_recorded()).extract(batch, kb)
    entities = _by_name(update)
    assert set(entities) == {"Caroline", "Melanie", "Anna", "Oscar"}  # "Ghost Town" cites no valid id

    caroline = entities["Caroline"]
    assert caroline.type is EntityType.PERSON and caroline.is_speaker
    assert caroline.sources == ["S2:1", "S2:3", "S2:5"]
    attrs = {a.name: a for a in caroline.attributes}
    assert set(attrs) == {"occupation", "community_involvement"}  # the S9:99 hobby is dropped
    assert attrs["occupation"].value == "school counselor"
    assert attrs["occupation"].exclusive and attrs["occupation"].confidence == 0.9
    assert attrs["occupation"].sources == ["S2:3"]
    assert not attrs["community_involvement"].exclusive
    [sister] = caroline.relations
    assert (sister.relation, sister.object, sister.object_type) == ("sister_of", "Anna", EntityType.PERSON)
    assert sister.time is None and sister.sources == ["S2:5"]

    melanie = entities["Melanie"]
    assert melanie.aliases == ["Mel"]
    assert melanie.sources == ["S2:1", "S2:2", "S2:4"]  # "[S2:1]" cleaned, sorted in batch order
    [owns] = melanie.relations
    assert owns.object == "Oscar" and owns.time is not None and owns.time.raw == "since last year"
    assert owns.time.reference == date(2023, 5, 8) and owns.time.resolved  # normalized like event times

    anna = entities["Anna"]
    assert anna.aliases == ["Caroline's sister"] and not anna.is_speaker
    [location] = anna.attributes
    # 'location' is single-valued even though the model said exclusive: false.
    assert (location.name, location.value, location.exclusive) == ("location", "Boston", True)

    assert entities["Oscar"].type is EntityType.OTHER  # "dog" is not an entity type
    assert entities["Oscar"].sources == ["S2:4"]


def test_events_have_normalized_dates_and_valid_sources(batch: list[Utterance], kb: KnowledgeBase) -> None:
    update = LLMExtractor(_recorded()).extract(batch, kb)
    events = {e.what.split()[1]: e for e in update.events}
    assert set(events) == {"went", "finished", "decided"}  # the D1:1 event is dropped

    group = events["went"]
    assert group.who == ["Caroline"]
    assert group.sources == ["S2:1"]  # S2:99 removed
    assert group.when is not None
    assert group.when.raw == "yesterday"
    assert (group.when.start, group.when.end) == (date(2023, 5, 7), date(2023, 5, 7))
    assert group.outcome == "She found it powerful." and group.where is None

    painting = events["finished"]
    assert painting.who == ["Melanie"] and painting.where is None  # "null" string means absent
    assert painting.when is not None and painting.when.raw == "last week"
    assert painting.when.start is not None and painting.when.start < date(2023, 5, 8)

    assert events["decided"].when is None


def test_topics_extend_known_ids_and_reject_unknown_ones(batch: list[Utterance], kb: KnowledgeBase) -> None:
    update = LLMExtractor(_recorded()).extract(batch, kb)
    topics = {t.label: t for t in update.topics}
    assert set(topics) == {"Melanie's painting", "LGBTQ support group", "Career change"}
    assert topics["Melanie's painting"].topic_id == "t1"
    assert topics["LGBTQ support group"].topic_id is None
    assert topics["Career change"].topic_id is None  # "t42" is not in the KB
    support = topics["LGBTQ support group"]
    assert support.session == "S2" and support.sources == ["S2:1"]
    assert support.participants == ["Caroline"]  # filled from the cited speakers
    assert support.keywords == ["support group", "LGBTQ", "community"]
    assert support.facts == ["Caroline attended an LGBTQ support group on 7 May 2023."]


def test_unknown_sources_are_dropped_and_counted(batch: list[Utterance], kb: KnowledgeBase) -> None:
    extractor = LLMExtractor(_recorded())
    update = extractor.extract(batch, kb)
    cited = {s for e in update.entities for s in e.sources}
    cited |= {s for e in update.entities for a in e.attributes for s in a.sources}
    cited |= {s for e in update.entities for r in e.relations for s in r.sources}
    cited |= {s for e in update.events for s in e.sources} | {s for t in update.topics for s in t.sources}
    assert cited <= {u.id for u in batch}
    # Ghost Town, the S9:99 hobby and the D1:1 event.
    assert extractor.dropped_observations == 3
    # S9:99, S7:1, S2:99, D1:1.
    assert extractor.unknown_source_ids == 4
    extractor.extract(batch, kb)
    assert extractor.dropped_observations == 6


# -- fused mode -----------------------------------------------------------------------------------


def test_fused_mode_makes_one_call_with_the_same_result(batch: list[Utterance], kb: KnowledgeBase) -> None:
    modules = LLMExtractor(_recorded()).extract(batch, kb)
    model = _recorded()
    extractor = LLMExtractor(model, fused=True)
    assert extractor.name == "llm:rec:fused"
    fused = extractor.extract(batch, kb)
    assert len(model.calls) == 1
    assert fused.model_dump() == modules.model_dump()


def test_fused_mode_cannot_be_restricted(batch: list[Utterance]) -> None:
    with pytest.raises(ConfigurationError):
        LLMExtractor(FakeChatModel([]), fused=True, modules=("entities",))


def test_unknown_module_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="subset"):
        LLMExtractor(FakeChatModel([]), modules=("entities", "moods"))


def test_single_module(batch: list[Utterance], kb: KnowledgeBase) -> None:
    model = _recorded()
    update = LLMExtractor(model, modules=("events",)).extract(batch, kb)
    assert len(model.calls) == 1
    assert update.entities == [] and update.topics == [] and len(update.events) == 3


def test_topic_spanning_two_sessions_is_split() -> None:
    batch = [
        Utterance(id="A:1", speaker="Jo", text="My garden is blooming.", session="A", timestamp=SAID),
        Utterance(id="B:1", speaker="Sam", text="How is the garden?", session="B", timestamp=SAID),
    ]
    answer = {
        "topics": [
            {"label": "Garden", "summary": "Jo's garden.", "sources": ["A:1", "B:1"], "topic_id": None}
        ]
    }
    update = LLMExtractor(FakeChatModel([json.dumps(answer)]), modules=("topics",)).extract(
        batch, KnowledgeBase()
    )
    assert [(t.session, t.sources, t.participants) for t in update.topics] == [
        ("A", ["A:1"], ["Jo"]),
        ("B", ["B:1"], ["Sam"]),
    ]


def test_time_reference_is_the_first_cited_utterance_in_conversation_order() -> None:
    batch = [
        Utterance(id="A:1", speaker="Jo", text="I moved yesterday.", session="A", timestamp=SAID),
        Utterance(
            id="B:1",
            speaker="Jo",
            text="The move went well.",
            session="B",
            timestamp=datetime(2023, 6, 1, tzinfo=UTC),
        ),
    ]
    answer = {
        "events": [{"who": ["Jo"], "what": "Jo moved.", "when": "yesterday", "sources": ["B:1", "A:1"]}]
    }
    update = LLMExtractor(FakeChatModel([json.dumps(answer)]), modules=("events",)).extract(
        batch, KnowledgeBase()
    )
    [event] = update.events
    assert event.sources == ["A:1", "B:1"]
    assert event.when is not None and event.when.start == date(2023, 5, 7)


# -- prompts --------------------------------------------------------------------------------------


def test_prompts_show_every_utterance_and_known_names(batch: list[Utterance], kb: KnowledgeBase) -> None:
    model = _recorded()
    LLMExtractor(model).extract(batch, kb)
    LLMExtractor(model, fused=True).extract(batch, kb)
    for call in model.calls:
        user = call[-1]["content"]
        # The day once, in the session's header; each line only its id, speaker and text.
        assert user.count("--- session S2 --- 8 May 2023\n") == 1 and "(8 May 2023)" not in user
        for u in batch:
            assert f"\n[{u.id}] {u.speaker}: {u.text}\n" in user
        assert "- Caroline (person)" in user
        assert "- Melanie (person; also called Mel)" in user
        assert user.index("Caroline (person)") < user.index("Melanie (person")  # most mentioned first
    topic_prompts = [c[-1]["content"] for c in model.calls if "TopicExtraction" in c[-1]["content"]]
    topic_prompts += [c[-1]["content"] for c in model.calls if "FusedExtraction" in c[-1]["content"]]
    assert len(topic_prompts) == 2
    for user in topic_prompts:
        assert "- [t1] Melanie's painting (art)" in user  # the keywords the label does not say


@pytest.mark.parametrize("task", list(default_prompts()))
def test_every_prompt_embeds_its_response_schema(task: str, batch: list[Utterance]) -> None:
    library = default_prompts()
    messages = library.build(task, PromptContext(utterances=tuple(batch)))
    assert [m["role"] for m in messages] == ["system", "user"]
    # The fused prompt shows the schema's outline; the others its JSON schema.
    render = render_outline if task == FUSED else render_schema
    assert render(library.response_model(task)) in messages[-1]["content"]
    for u in batch:
        assert f"[{u.id}]" in messages[-1]["content"]


def test_known_lists_are_capped_most_mentioned_first(batch: list[Utterance]) -> None:
    kb = KnowledgeBase()
    for i in range(50):
        kb.entities[f"e{i}"] = _entity(f"e{i}", f"Person{i:02d}", mentions=i)
    for i in range(35):
        kb.topics[f"t{i}"] = TopicAnchor(
            id=f"t{i}", label=f"Topic{i:02d}", sources=[f"x{j}" for j in range(i)]
        )
    context = PromptContext.from_kb(batch, kb)
    assert (len(context.known_entities), len(context.known_topics)) == (40, 20)
    assert (DEFAULT_MAX_KNOWN_ENTITIES, DEFAULT_MAX_KNOWN_TOPICS) == (40, 20)
    assert context.known_entities[0].name == "Person49"
    assert "Person09" not in {e.name for e in context.known_entities}
    assert context.known_topics[0].id == "t34"
    small = PromptContext.from_kb(batch, kb, max_entities=3, max_topics=0)
    assert [e.name for e in small.known_entities] == ["Person49", "Person48", "Person47"]
    assert small.known_topics == ()


def test_prompt_override_is_used_and_checked(batch: list[Utterance], kb: KnowledgeBase) -> None:
    def terse_events(context: PromptContext) -> list[Message]:
        ids = ", ".join(context.utterance_ids)
        return [{"role": "user", "content": f"EVENTS ONLY for {ids}: {render_schema(EventExtraction)}"}]

    base = default_prompts()
    library = base.with_override(EVENTS, terse_events)
    assert base[EVENTS].build is not terse_events  # the original library is unchanged
    model = FakeChatModel(['{"events": []}'])
    LLMExtractor(model, modules=(EVENTS,), prompts=library).extract(batch, kb)
    assert model.calls[0][0]["content"].startswith("EVENTS ONLY for S2:1, S2:2")
    with pytest.raises(ConfigurationError, match="subclass"):
        base.with_override(ENTITIES, terse_events, response_model=EventExtraction)
    with pytest.raises(ConfigurationError, match="unknown prompt task"):
        base.with_override("moods", terse_events)
    assert {ENTITIES, EVENTS, TOPICS} <= set(base)


# -- failures, cache, edges -----------------------------------------------------------------------


def test_invalid_answers_raise_after_the_reasks(batch: list[Utterance], kb: KnowledgeBase) -> None:
    model = FakeChatModel(["nonsense", '{"events": "none"}'])
    with pytest.raises(UnexpectedModelOutput) as info:
        LLMExtractor(model, modules=(EVENTS,), max_attempts=2).extract(batch, kb)
    assert info.value.n_attempts == 2
    assert info.value.last_completion == '{"events": "none"}'


def test_cached_rebuild_makes_no_model_calls(
    batch: list[Utterance], kb: KnowledgeBase, tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path)
    first = LLMExtractor(_recorded(), cache=cache).extract(batch, kb)
    replay_model = FakeChatModel([], model_name="rec")
    second = LLMExtractor(replay_model, cache=cache).extract(batch, kb)
    assert replay_model.calls == []
    assert second.model_dump() == first.model_dump()


def test_empty_batch_makes_no_call(kb: KnowledgeBase) -> None:
    model = FakeChatModel([])
    assert LLMExtractor(model).extract([], kb) == AnchorUpdate()
    assert model.calls == []
