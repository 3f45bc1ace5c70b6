"""The data model: utterance timestamps, time intervals, KB dict round trip."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from pydantic import ValidationError

from gravity_core.schema import Granularity, KnowledgeBase, TimeRef, Utterance


def test_plain_date_becomes_midnight_utc_and_naive_datetime_is_refused() -> None:
    u = Utterance(id="a", speaker="Maya", text="hi", session="s1", timestamp="2024-03-01")
    assert u.timestamp == datetime(2024, 3, 1, tzinfo=UTC) and u.day == date(2024, 3, 1)
    with pytest.raises(ValidationError, match="timezone-aware"):
        Utterance(id="a", speaker="Maya", text="hi", session="s1", timestamp=datetime(2024, 3, 1, 9))


def test_utterance_requires_ids_and_forbids_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        Utterance(id="", speaker="Maya", text="hi", session="s1", timestamp="2024-03-01")
    with pytest.raises(ValidationError):
        Utterance(id="a", speaker="Maya", text="hi", session="s1", timestamp="2024-03-01", mood="happy")  # type: ignore[call-arg]


def test_attachments_are_readable_text() -> None:
    u = Utterance(
        id="a",
        speaker="Maya",
        text="Look!",
        session="s1",
        timestamp="2024-03-01",
        attachments=["photo: a dog"],
    )
    assert u.full_text() == "Look! [shared: photo: a dog]"


def test_time_interval_must_be_ordered_and_complete() -> None:
    with pytest.raises(ValidationError, match="after end"):
        TimeRef(raw="x", start=date(2024, 3, 2), end=date(2024, 3, 1))
    with pytest.raises(ValidationError, match="together"):
        TimeRef(raw="x", start=date(2024, 3, 2))


@pytest.mark.parametrize(
    ("ref", "label"),
    [
        (
            TimeRef(
                raw="yesterday", start=date(2023, 5, 7), end=date(2023, 5, 7), granularity=Granularity.DAY
            ),
            "7 May 2023",
        ),
        (
            TimeRef(
                raw="in May", start=date(2023, 5, 1), end=date(2023, 5, 31), granularity=Granularity.MONTH
            ),
            "May 2023",
        ),
        (
            TimeRef(
                raw="last year", start=date(2022, 1, 1), end=date(2022, 12, 31), granularity=Granularity.YEAR
            ),
            "2022",
        ),
        (TimeRef(raw="a while ago"), "a while ago"),
        (TimeRef.mentioned_on(date(2023, 5, 8)), "mentioned 8 May 2023"),
    ],
)
def test_labels(ref: TimeRef, label: str) -> None:
    assert ref.label() == label


def test_overlap_is_inclusive() -> None:
    may = TimeRef(raw="in May", start=date(2023, 5, 1), end=date(2023, 5, 31), granularity=Granularity.MONTH)
    assert may.overlaps(date(2023, 5, 31), date(2023, 6, 3))
    assert not may.overlaps(date(2023, 6, 1), date(2023, 6, 3))
    assert not TimeRef(raw="someday").overlaps(date(2023, 1, 1), date(2024, 1, 1))


def test_empty_kb_round_trips() -> None:
    kb = KnowledgeBase()
    assert KnowledgeBase.from_dict(kb.to_dict()) == kb
