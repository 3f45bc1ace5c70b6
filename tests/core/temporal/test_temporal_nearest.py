"""Phrases without a year or month and without a tense cue take their nearer occurrence; the LLM
extractor reads the tense of the sentence the phrase came from."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pytest

from gravity_core.extract.llm import LLMExtractor
from gravity_core.schema import KnowledgeBase, Utterance
from gravity_core.temporal import normalize
from gravity_core.testing import FakeChatModel


@pytest.mark.parametrize(
    ("phrase", "said", "start", "end"),
    [
        ("in June", date(2024, 5, 11), date(2024, 6, 1), date(2024, 6, 30)),
        ("in June", date(2024, 8, 11), date(2024, 6, 1), date(2024, 6, 30)),
        ("on the 2nd of April", date(2024, 3, 9), date(2024, 4, 2), date(2024, 4, 2)),
        ("2 April", date(2024, 6, 9), date(2024, 4, 2), date(2024, 4, 2)),
        ("On the 30th", date(2024, 3, 9), date(2024, 3, 30), date(2024, 3, 30)),
        ("on the 3rd", date(2024, 3, 29), date(2024, 4, 3), date(2024, 4, 3)),
        ("on the 20th", date(2024, 3, 29), date(2024, 3, 20), date(2024, 3, 20)),
    ],
)
def test_no_tense_cue_takes_the_nearer_occurrence(phrase: str, said: date, start: date, end: date) -> None:
    result = normalize(phrase, said)
    assert (result.start, result.end) == (start, end)


def test_a_given_direction_still_decides() -> None:
    assert normalize("in June", date(2024, 5, 11), prefer="past").start == date(2023, 6, 1)
    assert normalize("On the 30th", date(2024, 3, 9), prefer="past").start == date(2024, 1, 30)
    assert normalize("in June", date(2024, 8, 11), prefer="future").start == date(2025, 6, 1)


def _event_when(text: str, phrase: str) -> tuple[date | None, date | None]:
    said = datetime(2024, 5, 11, 10, 0, tzinfo=UTC)
    batch = [Utterance(id="D1:1", speaker="Maya", text=text, session="s1", timestamp=said)]
    answer = {
        "entities": [],
        "events": [{"who": ["Maya"], "what": "the trip", "when": phrase, "sources": ["D1:1"]}],
        "topics": [],
    }
    update = LLMExtractor(FakeChatModel([json.dumps(answer)]), fused=True).extract(batch, KnowledgeBase())
    [event] = update.events
    assert event.when is not None
    return event.when.start, event.when.end


def test_the_llm_path_reads_the_tense_of_the_source_sentence() -> None:
    assert _event_when("We went to Lisbon in June, it was lovely.", "in June")[0] == date(2023, 6, 1)
    assert _event_when("We're going to Lisbon in June!", "in June")[0] == date(2024, 6, 1)
    assert _event_when("Lisbon is in June for us.", "in June")[0] == date(2024, 6, 1)  # no cue: nearer
