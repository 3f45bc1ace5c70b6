"""Temporal normalization: relative time phrases grounded in the session date."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.loaders import load_conversation
from gravity_core.schema import Granularity, TimeRef
from gravity_core.temporal import TimeMention, find_time_expressions, normalize, parse_timestamp

D, W, M, S, Y, R = (
    Granularity.DAY,
    Granularity.WEEK,
    Granularity.MONTH,
    Granularity.SEASON,
    Granularity.YEAR,
    Granularity.RANGE,
)
LOCOMO = date(2023, 5, 8)  # a Monday: LoCoMo conv-26 session 1, "1:56 pm on 8 May, 2023"


def d(text: str) -> date:
    return date.fromisoformat(text)


CASES: list[tuple[str, date, str, str, Granularity]] = [
    # LoCoMo examples
    ("yesterday", LOCOMO, "2023-05-07", "2023-05-07", D),
    ("last year", LOCOMO, "2022-01-01", "2022-12-31", Y),
    # days around the reference
    ("today", LOCOMO, "2023-05-08", "2023-05-08", D),
    ("tonight", LOCOMO, "2023-05-08", "2023-05-08", D),
    ("this morning", LOCOMO, "2023-05-08", "2023-05-08", D),
    ("this evening", LOCOMO, "2023-05-08", "2023-05-08", D),
    ("last night", LOCOMO, "2023-05-07", "2023-05-07", D),
    ("the day before yesterday", LOCOMO, "2023-05-06", "2023-05-06", D),
    ("tomorrow", LOCOMO, "2023-05-09", "2023-05-09", D),
    ("tomorrow morning", LOCOMO, "2023-05-09", "2023-05-09", D),
    # counted offsets, digits and words, vague counts as ranges
    ("three days ago", LOCOMO, "2023-05-05", "2023-05-05", D),
    ("2 days ago", LOCOMO, "2023-05-06", "2023-05-06", D),
    ("two weeks ago", LOCOMO, "2023-04-24", "2023-04-30", W),
    ("three months ago", LOCOMO, "2023-02-01", "2023-02-28", M),
    ("a year ago", LOCOMO, "2022-01-01", "2022-12-31", Y),
    ("five years ago", LOCOMO, "2018-01-01", "2018-12-31", Y),
    ("a couple of days ago", LOCOMO, "2023-05-05", "2023-05-06", R),
    ("a few weeks ago", LOCOMO, "2023-04-10", "2023-04-30", R),
    ("a day or two ago", LOCOMO, "2023-05-06", "2023-05-07", R),
    ("two weekends ago", LOCOMO, "2023-04-29", "2023-04-30", R),
    ("in two weeks", LOCOMO, "2023-05-22", "2023-05-28", W),
    ("the past two weeks", LOCOMO, "2023-04-24", "2023-05-08", R),
    ("the next few days", LOCOMO, "2023-05-08", "2023-05-12", R),
    # calendar weeks (Monday-Sunday), weekends, months, years
    ("last week", LOCOMO, "2023-05-01", "2023-05-07", W),
    ("this week", LOCOMO, "2023-05-08", "2023-05-14", W),
    ("next week", LOCOMO, "2023-05-15", "2023-05-21", W),
    ("last weekend", LOCOMO, "2023-05-06", "2023-05-07", R),
    ("this weekend", LOCOMO, "2023-05-13", "2023-05-14", R),
    ("next weekend", LOCOMO, "2023-05-20", "2023-05-21", R),
    ("last weekend", date(2023, 5, 13), "2023-05-06", "2023-05-07", R),  # said on a Saturday
    ("over the weekend", date(2023, 5, 13), "2023-05-13", "2023-05-14", R),
    ("last month", LOCOMO, "2023-04-01", "2023-04-30", M),
    ("this month", LOCOMO, "2023-05-01", "2023-05-31", M),
    ("next month", date(2023, 1, 31), "2023-02-01", "2023-02-28", M),
    ("next year", LOCOMO, "2024-01-01", "2024-12-31", Y),
    ("the week before last", LOCOMO, "2023-04-24", "2023-04-30", W),
    # weekdays
    ("last Friday", LOCOMO, "2023-05-05", "2023-05-05", D),
    ("last Monday", LOCOMO, "2023-05-01", "2023-05-01", D),  # strictly before the reference
    ("Last Fri", LOCOMO, "2023-05-05", "2023-05-05", D),
    ("this Friday", LOCOMO, "2023-05-12", "2023-05-12", D),
    ("next Friday", LOCOMO, "2023-05-19", "2023-05-19", D),  # Friday of next week
    ("this coming Friday", LOCOMO, "2023-05-12", "2023-05-12", D),
    ("on Friday", LOCOMO, "2023-05-05", "2023-05-05", D),
    ("Monday", LOCOMO, "2023-05-08", "2023-05-08", D),  # past or today
    ("Saturday night", LOCOMO, "2023-05-06", "2023-05-06", D),
    # months
    ("in May", LOCOMO, "2023-05-01", "2023-05-31", M),
    ("in June", LOCOMO, "2023-06-01", "2023-06-30", M),  # no tense cue: the nearer June (next month)
    ("in March", LOCOMO, "2023-03-01", "2023-03-31", M),  # ... here the one two months back
    ("last May", LOCOMO, "2022-05-01", "2022-05-31", M),
    ("last May", date(2023, 8, 10), "2023-05-01", "2023-05-31", M),
    ("this May", LOCOMO, "2023-05-01", "2023-05-31", M),
    ("next May", LOCOMO, "2024-05-01", "2024-05-31", M),
    ("May 2023", LOCOMO, "2023-05-01", "2023-05-31", M),
    ("October, 2023", LOCOMO, "2023-10-01", "2023-10-31", M),
    ("early May", LOCOMO, "2023-05-01", "2023-05-10", R),
    ("mid-May", LOCOMO, "2023-05-11", "2023-05-21", R),
    ("the last week of June", LOCOMO, "2023-06-24", "2023-06-30", R),  # the nearer June
    ("first weekend of August 2023", LOCOMO, "2023-08-05", "2023-08-06", R),
    # explicit dates
    ("8 May 2023", LOCOMO, "2023-05-08", "2023-05-08", D),
    ("May 8th", LOCOMO, "2023-05-08", "2023-05-08", D),
    ("May 8, 2023", LOCOMO, "2023-05-08", "2023-05-08", D),
    ("the 8th of May", LOCOMO, "2023-05-08", "2023-05-08", D),
    ("Tuesday, 9 May 2023", LOCOMO, "2023-05-09", "2023-05-09", D),
    ("24 April, 2023", LOCOMO, "2023-04-24", "2023-04-24", D),
    ("2023-05-08", LOCOMO, "2023-05-08", "2023-05-08", D),
    ("5/8/2023", LOCOMO, "2023-05-08", "2023-05-08", D),
    ("May 20th", LOCOMO, "2023-05-20", "2023-05-20", D),  # no year, no tense cue: the nearer one
    ("on the 3rd", LOCOMO, "2023-05-03", "2023-05-03", D),
    # years and decades
    ("2019", LOCOMO, "2019-01-01", "2019-12-31", Y),
    ("in 2022", LOCOMO, "2022-01-01", "2022-12-31", Y),
    ("since 2019", LOCOMO, "2019-01-01", "2023-05-08", R),
    ("since last summer", LOCOMO, "2022-06-01", "2023-05-08", R),
    ("the 1990s", LOCOMO, "1990-01-01", "1999-12-31", R),
    ("from 2019 to 2021", LOCOMO, "2019-01-01", "2021-12-31", R),
    ("from December to February", LOCOMO, "2022-12-01", "2023-02-28", R),
    # seasons (northern hemisphere; winter of Y runs Dec Y - Feb Y+1)
    ("last summer", LOCOMO, "2022-06-01", "2022-08-31", S),
    ("last summer", date(2023, 10, 17), "2023-06-01", "2023-08-31", S),
    ("this summer", LOCOMO, "2023-06-01", "2023-08-31", S),
    ("next summer", LOCOMO, "2024-06-01", "2024-08-31", S),
    ("this winter", LOCOMO, "2022-12-01", "2023-02-28", S),
    ("this winter", date(2024, 1, 15), "2023-12-01", "2024-02-29", S),
    ("in the fall", LOCOMO, "2022-09-01", "2022-11-30", S),
    ("summer 2022", LOCOMO, "2022-06-01", "2022-08-31", S),
    # vague spans
    ("recently", LOCOMO, "2023-04-08", "2023-05-08", R),
    ("lately", LOCOMO, "2023-04-08", "2023-05-08", R),
    ("the other day", LOCOMO, "2023-05-01", "2023-05-07", R),
    ("earlier this year", LOCOMO, "2023-01-01", "2023-05-08", R),
    ("later this month", LOCOMO, "2023-05-08", "2023-05-31", R),
    # holidays
    ("last Christmas", LOCOMO, "2022-12-25", "2022-12-25", D),
    ("Thanksgiving", LOCOMO, "2022-11-24", "2022-11-24", D),
    # anchored phrases, as LoCoMo answers and LLM extractors write them
    ("The week before 9 June 2023", LOCOMO, "2023-05-29", "2023-06-04", W),
    ("The Friday before 15 July 2023", LOCOMO, "2023-07-14", "2023-07-14", D),
    ("The weekend before 20 October 2023", LOCOMO, "2023-10-14", "2023-10-15", R),
    ("two days after Christmas", LOCOMO, "2022-12-27", "2022-12-27", D),
    ("The week of 23 August 2023", LOCOMO, "2023-08-21", "2023-08-27", W),
]


@pytest.mark.parametrize(("phrase", "reference", "start", "end", "granularity"), CASES)
def test_normalize_table(
    phrase: str, reference: date, start: str, end: str, granularity: Granularity
) -> None:
    result = normalize(phrase, reference)
    assert (result.start, result.end, result.granularity) == (d(start), d(end), granularity)
    assert result.raw == phrase
    assert result.reference == reference


def test_normalize_accepts_a_datetime_reference_and_uses_its_clock() -> None:
    reference = datetime(2023, 5, 8, 1, 0, tzinfo=UTC)
    assert normalize("three hours ago", reference).start == d("2023-05-07")
    assert normalize("yesterday", reference).start == d("2023-05-07")


@pytest.mark.parametrize(
    "phrase", ["a while ago", "years ago", "when I was a kid", "", "   ", "Max", "4 years"]
)
def test_unresolvable_phrases_keep_only_the_raw_text(phrase: str) -> None:
    result = normalize(phrase, LOCOMO)
    assert result.raw == phrase.strip()
    assert (result.start, result.end, result.granularity) == (None, None, None)
    assert not result.resolved


@pytest.mark.parametrize(
    "phrase", ["I may go", "the last time we met", "wait a second", "I have 2000 followers"]
)
def test_normalize_does_not_read_non_temporal_words_as_time(phrase: str) -> None:
    assert not normalize(phrase, LOCOMO).resolved


def test_normalize_prefer_places_ambiguous_phrases() -> None:
    assert normalize("in June", LOCOMO, prefer="future").start == d("2023-06-01")
    assert normalize("on Friday", LOCOMO, prefer="future").start == d("2023-05-12")
    assert normalize("in June", LOCOMO, prefer="past").start == d("2022-06-01")


def test_normalize_reads_the_tense_of_a_phrase() -> None:
    assert normalize("I'll visit in June", LOCOMO).start == d("2023-06-01")
    assert normalize("I visited in June", LOCOMO).start == d("2022-06-01")


def test_normalize_rejects_a_reference_that_is_not_a_date() -> None:
    with pytest.raises(ConfigurationError):
        normalize("yesterday", "2023-05-08")  # type: ignore[arg-type]


def test_normalize_falls_back_to_dateparser_for_other_explicit_dates() -> None:
    result = normalize("08.05.2023", LOCOMO)
    assert result.resolved and result.granularity is D and result.start is not None
    assert result.start.year == 2023


# -- find_time_expressions --------------------------------------------------------------------


def spans(text: str, reference: date | datetime = LOCOMO) -> list[tuple[str, date | None, date | None]]:
    return [(m.text, m.time.start, m.time.end) for m in find_time_expressions(text, reference)]


def test_find_locomo_example() -> None:
    text = "I went to a LGBTQ support group yesterday and it was so powerful."
    [mention] = find_time_expressions(text, datetime(2023, 5, 8, 13, 56, tzinfo=UTC))
    assert (mention.start, mention.end, mention.text) == (32, 41, "yesterday")
    assert text[mention.start : mention.end] == "yesterday"
    assert mention.time == TimeRef(raw="yesterday", start=d("2023-05-07"), end=d("2023-05-07"), granularity=D,
                                   reference=LOCOMO)  # fmt: skip


def test_find_two_expressions_in_order_with_exact_spans() -> None:
    text = "I painted that lake sunrise last year, and I'm showing it next week!"
    mentions = find_time_expressions(text, LOCOMO)
    assert [(m.start, m.end, m.text) for m in mentions] == [(28, 37, "last year"), (58, 67, "next week")]
    assert [(m.time.start, m.time.end) for m in mentions] == [
        (d("2022-01-01"), d("2022-12-31")),
        (d("2023-05-15"), d("2023-05-21")),
    ]
    assert all(m.time.raw == m.text == text[m.start : m.end] for m in mentions)


def test_find_prefers_the_longest_expression() -> None:
    assert spans("We met on Tuesday, 9 May 2023 at noon.") == [("Tuesday, 9 May 2023", d("2023-05-09"),
                                                              d("2023-05-09"))]  # fmt: skip
    assert spans("It happened the day before yesterday.") == [
        ("the day before yesterday", d("2023-05-06"), d("2023-05-06"))
    ]
    assert spans("Since 2019 I've painted, and early last year I sold one.") == [
        ("Since 2019", d("2019-01-01"), d("2023-05-08")),
        ("early last year", d("2022-01-01"), d("2022-04-30")),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "I may go to the park later.",
        "May I ask you something?",
        "They march together every Sunday morning? No, they march on Saturdays.",
        "The last time we met was great.",
        "That was the last one, I promise.",
        "Wait a second, let me check.",
        "I have 2000 followers and scored 1999 points.",
        "Right now I'm busy.",
        "We met on the last day of camp.",
        "I'm so inspired by autumn colors.",
        "I read the whole book in a day.",
        "The next day we hiked up the hill.",
        "Every Friday we play chess.",
        "I'm in my 30s and it's in the 90s outside.",
        "The third chapter was the best.",
    ],
)
def test_find_skips_non_temporal_uses(text: str) -> None:
    assert find_time_expressions(text, LOCOMO) == []


def test_find_requires_context_for_bare_months_and_years() -> None:
    assert spans("June said hi") == []
    assert spans("We went there in June.") == [("June", d("2022-06-01"), d("2022-06-30"))]
    assert spans("I moved in 2019.") == [("2019", d("2019-01-01"), d("2019-12-31"))]


def test_find_places_plans_in_the_future() -> None:
    assert spans("I'm going to Paris in June!") == [("June", d("2023-06-01"), d("2023-06-30"))]
    assert spans("I will see her on Friday.") == [("Friday", d("2023-05-12"), d("2023-05-12"))]
    assert spans("Any plans for the weekend?") == [("the weekend", d("2023-05-13"), d("2023-05-14"))]
    assert spans("We'll be back in two weeks.") == [("in two weeks", d("2023-05-22"), d("2023-05-28"))]
    # the tense is read per sentence
    assert spans("I was in Rome in June. I'll go to Oslo in July.") == [
        ("June", d("2022-06-01"), d("2022-06-30")),
        ("July", d("2023-07-01"), d("2023-07-31")),
    ]


def test_find_returns_vague_phrases_unresolved() -> None:
    [mention] = find_time_expressions("I read it a while back and loved it.", LOCOMO)
    assert mention.text == "a while back"
    assert not mention.time.resolved


def test_find_on_empty_or_plain_text() -> None:
    assert find_time_expressions("", LOCOMO) == []
    assert find_time_expressions("Hey! Good to see you! How have you been?", LOCOMO) == []


def test_time_mention_is_frozen() -> None:
    [mention] = find_time_expressions("see you tomorrow", LOCOMO)
    assert isinstance(mention, TimeMention)
    with pytest.raises(dataclasses.FrozenInstanceError):
        mention.start = 0  # type: ignore[misc]


FUZZ_WORDS = (
    "last",
    "next",
    "this",
    "the",
    "May",
    "may",
    "2019",
    "ago",
    "two",
    "weeks",
    "since",
    "Friday",
    "early",
    "of",
    "summer",
    "in",
    "8th",
    "yesterday",
    "before",
    "week",
    "weekend",
    "after",
    "Christmas",
    "from",
    "to",
    "1990s",
    "a few",
    "the end of",
    "9 June",
    "29 February",
    "on the 31st",
)


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list("abcdefghijklmnoprstuvwy 0123456789,.-/'")) | st.characters(),
        max_size=120,
    )
    | st.lists(st.sampled_from(FUZZ_WORDS), max_size=12).map(" ".join),
    reference=st.dates(min_value=date(1901, 1, 1), max_value=date(2098, 12, 31)),
)
def test_never_raises_and_spans_are_consistent(text: str, reference: date) -> None:
    mentions = find_time_expressions(text, reference)
    last_end = 0
    for m in mentions:
        assert last_end <= m.start < m.end <= len(text)
        assert text[m.start : m.end] == m.text == m.time.raw
        if m.time.start is not None and m.time.end is not None:
            assert m.time.start <= m.time.end
        last_end = m.end
    result = normalize(text, reference)
    assert result.raw == text.strip()


# -- parse_timestamp --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
        ("12:30 pm on 1 January, 2024", datetime(2024, 1, 1, 12, 30, tzinfo=UTC)),
        ("2023/05/20 (Sat) 02:21", datetime(2023, 5, 20, 2, 21, tzinfo=UTC)),
        ("2023/05/20", datetime(2023, 5, 20, tzinfo=UTC)),
        ("2023-05-08T13:56:00", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08T13:56:00Z", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08", datetime(2023, 5, 8, tzinfo=UTC)),
        ("8 May 2023 14:00", datetime(2023, 5, 8, 14, 0, tzinfo=UTC)),
    ],
)
def test_parse_timestamp_formats(text: str, expected: datetime) -> None:
    result = parse_timestamp(text)
    assert result == expected
    assert result is not None and result.tzinfo is not None


def test_parse_timestamp_keeps_an_explicit_offset() -> None:
    result = parse_timestamp("2023-05-08T13:56:00+02:00")
    assert result is not None
    assert result.utcoffset() == timedelta(hours=2)
    assert result.tzinfo == timezone(timedelta(hours=2))


@pytest.mark.parametrize(
    "text", ["", "hello", "42", "yesterday", "May", "1:56 pm on 31 February, 2023", "2023/13/40 10:00", None]
)
def test_parse_timestamp_returns_none_for_non_dates(text: str) -> None:
    assert parse_timestamp(text) is None


@pytest.mark.parametrize("text", ["2024-13-01", "2024-02-30", "2024-01-32T10:00", "2023-00-10 08:00"])
def test_an_impossible_iso_date_is_refused_not_swapped(text: str) -> None:
    """dateparser would read '2024-13-01' as 13 January 2024."""
    assert parse_timestamp(text) is None


def test_the_loader_names_the_record_and_field_of_an_impossible_date(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"speaker": "A", "text": "hi", "session": "s1", "timestamp": "2024-13-01"}\n')
    with pytest.raises(InputDataError, match=r"record line 1, field 'timestamp'.*2024-13-01"):
        load_conversation(path)


def test_importing_temporal_does_not_import_dateparser() -> None:
    code = "import sys, gravity_core.temporal; print('dateparser' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("text", "raw", "day_"),
    [
        ("We signed up for a climbing club last Tues.", "last Tues", "2023-05-02"),
        ("She called me last Tue about the trip", "last Tue", "2023-05-02"),
        ("I baked bread last Fri and it flopped.", "last Fri", "2023-05-05"),
        ("Last Wed. we painted the fence.", "Last Wed", "2023-05-03"),
    ],
)
def test_find_weekday_abbreviations_after_last(text: str, raw: str, day_: str) -> None:
    assert spans(text) == [(raw, d(day_), d(day_))]


@pytest.mark.parametrize(
    ("text", "raw", "day_"),
    [
        ("My cousin visited on the 3rd with her twins.", "the 3rd", "2023-05-03"),
        ("He fixed my bike on the 2nd to save me money.", "the 2nd", "2023-05-02"),
        ("I had my exam on the 15th of the month.", "the 15th", "2023-04-15"),  # 15 May is after 8 May
        ("We moved on the 20th - what a week.", "the 20th", "2023-04-20"),
    ],
)
def test_find_day_of_month_followed_by_more_words(text: str, raw: str, day_: str) -> None:
    assert spans(text) == [(raw, d(day_), d(day_))]


@pytest.mark.parametrize(
    "text", ["My flat is on the 5th floor.", "I finally passed on the 3rd try.", "I sat on the sofa."]
)
def test_find_skips_ordinals_that_are_not_dates(text: str) -> None:
    assert find_time_expressions(text, LOCOMO) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # no tense cue: the nearer one
        ("I start at the new hospital on the 2nd of April.", date(2024, 4, 2)),
        ("My birthday is on 8 May.", date(2024, 5, 8)),
        ("I ran a race on 2 April.", date(2023, 4, 2)),  # irregular past verb
        ("We met on May 8th.", date(2023, 5, 8)),
        ("The party is on 1 March.", date(2024, 3, 1)),  # 8 days back is nearer than a year ahead
    ],
)
def test_day_without_year_follows_tense_else_the_nearer_occurrence(text: str, expected: date) -> None:
    [mention] = find_time_expressions(text, date(2024, 3, 9))
    assert mention.time.start == expected
