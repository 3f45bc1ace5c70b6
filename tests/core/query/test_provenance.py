"""The selected anchors' sources: what retrieval by provenance fetches."""

from __future__ import annotations

from datetime import UTC, datetime

from gravity_core.build.builder import AnchorBuilder
from gravity_core.query.engine import GravityEngine
from gravity_core.query.provenance import anchor_sources
from gravity_core.query.types import ScoredAnchor
from gravity_core.schema import AnchorKind, Attribute, EntityAnchor, Fact, KnowledgeBase, TopicAnchor


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


def test_an_entity_lists_its_strongest_current_attributes_sources_first() -> None:
    at = datetime(2023, 5, 1, tzinfo=UTC)

    def attribute(value: str, confidence: float, sources: list[str], current: bool = True) -> Attribute:
        return Attribute(
            name="job",
            value=value,
            confidence=confidence,
            current=current,
            first_seen=at,
            last_seen=at,
            sources=sources,
        )

    entity = EntityAnchor(
        id="p1",
        name="Maya",
        first_seen=at,
        last_seen=at,
        sources=["u1", "u2", "u3", "u4", "u5"],
        attributes=[
            attribute("baker", 0.9, ["u4"], current=False),
            attribute("nurse", 0.5, ["u2"]),
            attribute("teacher", 0.8, ["u3", "u2"]),
        ],
    )
    topic = TopicAnchor(id="t1", label="hiking", key_facts=[Fact(text="likes trails", sources=["u5"])])
    kb = KnowledgeBase(entities={"p1": entity}, topics={"t1": topic})
    chosen = [
        ScoredAnchor(AnchorKind.ENTITY, "p1", 0.9),
        ScoredAnchor(AnchorKind.EVENT, "gone", 0.8),  # not in the KB any more: skipped
        ScoredAnchor(AnchorKind.TOPIC, "t1", 0.7),
    ]
    found = anchor_sources(kb, chosen)
    assert [(s.label, s.utterance_ids) for s in found] == [
        ("entity:p1", ("u3", "u2", "u4")),
        ("topic:t1", ("u5",)),
    ]
