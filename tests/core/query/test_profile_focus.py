"""An entity profile with more attributes than it shows puts first the ones the question names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gravity_core.build.builder import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.storage.store import AnchorStore

LOVES = [
    "hiking",
    "pottery",
    "jazz",
    "chess",
    "gardening",
    "baking",
    "cycling",
    "sailing",
    "knitting",
    "painting",
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> GravityEngine:
    start = datetime(2024, 1, 1, 10, tzinfo=UTC)
    turns = []
    for n, thing in enumerate(LOVES, start=1):
        day = start + timedelta(days=7 * n)
        turns += [
            Utterance(
                id=f"D{n}:1", speaker="Maya", text=f"I really love {thing}.", session=f"S{n}", timestamp=day
            ),
            Utterance(id=f"D{n}:2", speaker="Tom", text="That sounds great!", session=f"S{n}", timestamp=day),
        ]
    folder = tmp_path_factory.mktemp("focus") / "kb"
    embedder = HashingEmbedder(dim=64)
    AnchorBuilder(OfflineExtractor(embedder), embedder, store=AnchorStore(folder)).add(turns)
    return GravityEngine.from_dir(folder, embedder=embedder, follow=False)


def profile(engine: GravityEngine, question: str) -> str:
    [line] = [x for x in engine.query(question).blocks.entities.splitlines() if x.startswith("- Maya")]
    return line


def test_the_liked_things_the_question_names_are_shown_though_older_than_the_six_kept(
    engine: GravityEngine,
) -> None:
    plain = profile(engine, "What does Maya like?")
    assert "pottery" not in plain and "hiking" not in plain  # the six latest
    assert "likes: pottery;" in profile(engine, "Does Maya like pottery?")
    asked = profile(engine, "Does Maya like hiking and pottery?")
    assert "hiking" in asked and "pottery" in asked
    assert asked.count(";") == plain.count(";")  # still six values


def test_fit_anchors_shows_the_same_profile_as_the_query(engine: GravityEngine) -> None:
    context = engine.query(
        "Does Maya like pottery?", config=engine.config.model_copy(update={"token_budget": None})
    )
    text, _ = engine.fit_anchors(context, 700)
    assert "likes: pottery;" in text
