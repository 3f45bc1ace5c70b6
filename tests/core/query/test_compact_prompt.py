"""The compact fused prompt: the schema outline, the batch's rendering, and its size in tokens."""

from __future__ import annotations

import re
import typing
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, Field

from gravity_core.loaders import load_conversation
from gravity_core.prompts import (
    FusedExtraction,
    KnownEntity,
    KnownTopic,
    PromptContext,
    build_fused_messages,
    render_known_topics,
    render_outline,
    render_schema,
    render_utterances,
)
from gravity_core.prompts.entities import ExtractedEntity
from gravity_core.prompts.outline import brief
from gravity_core.schema import EntityType, Utterance
from gravity_core.text.tokens import TokenCounter

SAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sample_conversation.jsonl"
COUNTER = TokenCounter()


def _models(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """``model`` and every model its fields hold (lists and optionals included), by class name."""
    found = {model.__name__: model}
    for field in model.model_fields.values():
        for inner in (field.annotation, *typing.get_args(field.annotation)):
            for candidate in (inner, *typing.get_args(inner)):
                if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                    found |= _models(candidate)
    return found


def _outline_fields(outline: str) -> dict[str, set[str]]:
    """Field names listed under each model header of an outline."""
    fields: dict[str, set[str]] = {}
    current = ""
    for line in outline.splitlines():
        if not line.startswith(" ") and ":" not in line:
            current = line
            fields[current] = set()
        elif line.startswith(" "):
            fields[current].add(line.split(":")[0].strip().rstrip("?"))
    return fields


def test_the_outline_lists_every_field_of_every_model_of_the_answer() -> None:
    outline = render_outline(FusedExtraction)
    models = _models(FusedExtraction)
    assert set(models) == {
        "FusedExtraction",
        "ExtractedEntity",
        "ExtractedAttribute",
        "ExtractedRelation",
        "ExtractedEvent",
        "ExtractedTopic",
    }
    assert _outline_fields(outline) == {name: set(m.model_fields) for name, m in models.items()}
    assert outline.splitlines()[0] == "FusedExtraction"  # what recorded answers are keyed by
    values = " | ".join(f'"{t.value}"' for t in EntityType)
    assert f"\nEntityType: {values}" in outline
    # Optional fields are marked, required ones are not; defaults that say something are shown.
    assert "\n name: string - Canonical name\n" in outline
    assert '\n type?: EntityType = "other"\n' in outline
    assert "\n confidence?: number = 0.7 - Certainty from 0 to 1\n" in outline
    assert "\n when?: string | null - The time phrase exactly as written\n" in outline


def test_a_field_added_to_a_model_shows_up_in_the_outline() -> None:
    class Mood(BaseModel):
        label: str = Field(description="How the speaker feels; one word.")
        intensity: int | None = Field(default=None, description="From 1 to 5.")

    class MoodyEntity(ExtractedEntity):
        mood: list[Mood] = Field(default_factory=list, description="Moods shown (e.g. 'calm').")

    class MoodyExtraction(FusedExtraction):
        entities: list[MoodyEntity] = Field(description="Every entity mentioned.")  # type: ignore[assignment]
        weather: str | None = None

    outline = render_outline(MoodyExtraction)
    fields = _outline_fields(outline)
    assert fields["MoodyExtraction"] == {"entities", "events", "topics", "weather"}
    assert fields["MoodyEntity"] == set(ExtractedEntity.model_fields) | {"mood"}
    assert fields["Mood"] == {"label", "intensity"}
    assert "\n mood?: Mood[] - Moods shown\n" in outline
    assert "\n intensity?: int | null - From 1 to 5\n" in outline
    assert "\n weather?: string | null\n" in outline


def test_a_description_keeps_its_first_clause() -> None:
    assert brief("Canonical name; reuse the exact name of a known entity.") == "Canonical name"
    assert brief("Short, specific value, e.g. 'counselor' or 'Boston'.") == "Short, specific value"
    assert brief("Other names for it (nicknames, 'my mom').") == "Other names for it"
    assert brief("Certainty from 0 to 1: how sure the conversation makes this.") == "Certainty from 0 to 1"
    assert brief("What happened, as a short self-contained sentence.") == (
        "What happened, as a short self-contained sentence"
    )


def test_the_outline_is_a_few_hundred_tokens() -> None:
    outline_tokens = COUNTER.count(render_outline(FusedExtraction))
    assert outline_tokens <= 550
    assert outline_tokens * 3 < COUNTER.count(render_schema(FusedExtraction))


def test_the_fused_prompt_stays_under_its_token_bound() -> None:
    turns = load_conversation(SAMPLE)[:40]  # three sessions
    own = sum(COUNTER.count(f"{u.speaker}: {u.full_text()}") for u in turns)

    def tokens(context: PromptContext) -> int:
        return sum(COUNTER.count(m["content"]) for m in build_fused_messages(context))

    # What every call repeats: system message, instructions, guidelines, outline.
    assert tokens(PromptContext(utterances=())) <= 900
    assert tokens(PromptContext(utterances=tuple(turns))) <= own + 1_250
    known = PromptContext(
        utterances=tuple(turns),
        known_entities=tuple(KnownEntity(f"Person Number{i}", "person", (f"P{i}",)) for i in range(40)),
        known_topics=tuple(
            KnownTopic(f"tp-{i:04d}", f"a topic label number {i}", ("alpha", "beta", "gamma", "delta"))
            for i in range(20)
        ),
    )
    assert tokens(known) <= own + 2_100


def _said(session: int, turn: int, day: int) -> Utterance:
    return Utterance(
        id=f"D{session}:{turn}",
        speaker="Ann" if turn % 2 else "Bo",
        text=f"turn {turn}",
        session=f"session_{session}",
        timestamp=datetime(2023, 5, day, 13, 56, tzinfo=UTC) + timedelta(minutes=turn),
    )


def test_the_batch_shows_each_sessions_day_once() -> None:
    batch = [_said(3, 5, 8), _said(3, 6, 8), _said(3, 7, 9), _said(4, 1, 20), _said(4, 2, 20)]
    assert render_utterances(batch) == (
        "--- session session_3 --- 8 May 2023\n"
        "[D3:5] Ann: turn 5\n"
        "[D3:6] Bo: turn 6\n"
        "[D3:7] (9 May 2023) Ann: turn 7\n"  # said on another day than its session's first line
        "--- session session_4 --- 20 May 2023\n"
        "[D4:1] Ann: turn 1\n"
        "[D4:2] Bo: turn 2"
    )


def test_known_topics_show_only_keywords_the_label_does_not_say() -> None:
    topics = (
        KnownTopic("t1", "Melanie's painting", ("painting", "art", "lake", "canvas", "oil")),
        KnownTopic("t2", "Running", ("running",)),
    )
    assert render_known_topics(topics) == "- [t1] Melanie's painting (art, lake, canvas)\n- [t2] Running"


def test_the_fused_prompt_names_its_task_and_the_batch_ids() -> None:
    batch = [_said(3, 5, 8), _said(4, 1, 20)]
    [system, user] = build_fused_messages(PromptContext(utterances=tuple(batch)))
    assert system["role"] == "system" and user["role"] == "user"
    prompt = user["content"]
    assert render_outline(FusedExtraction) in prompt and '"title"' not in prompt
    assert re.findall(r"^\[([^\]]+)\]", prompt, flags=re.MULTILINE) == ["D3:5", "D4:1"]
    assert 'e.g. "D3:5"' in prompt
