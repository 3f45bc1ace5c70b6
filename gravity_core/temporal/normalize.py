"""Resolve one time phrase against a reference date."""

from __future__ import annotations

import logging
import re
from datetime import date, datetime, time, timedelta
from types import MappingProxyType

from gravity_core.schema.time import Granularity, TimeRef
from gravity_core.temporal.arithmetic import offset_interval
from gravity_core.temporal.calendar import (
    Interval,
    add_months,
    day,
    month_interval,
    week_interval,
    weekday_after,
    weekday_before,
    weekday_on_or_after,
    weekday_on_or_before,
    year_interval,
)
from gravity_core.temporal.context import Direction, infer_direction, split_reference, tense_cue
from gravity_core.temporal.lexicon import (
    MONTH_ANY_RE,
    NUMBER_RE,
    UNIT_RE,
    WEEKDAY_RE,
    WEEKDAYS,
    count_of,
    unit_of,
)
from gravity_core.temporal.mention import TimeMention
from gravity_core.temporal.scan import scan

__all__ = ["normalize"]

logger = logging.getLogger(__name__)

# 'the week before 9 June 2023', 'two days after Christmas': what LLM extractors and LoCoMo answers write
_ANCHORED = re.compile(
    rf"^(?:the\s+)?(?:(?P<n>{NUMBER_RE})\s+(?P<u>{UNIT_RE}|weekends?)|(?P<unit>day|week|weekend|month|year)"
    rf"|(?P<wd>{WEEKDAY_RE}))\s+(?P<dir>before|after|prior\s+to|following|of)\s+(?P<tail>.+?)[\s.!?]*$",
    re.IGNORECASE,
)
_NUMERIC_DATE_HINT = re.compile(r"\d{1,4}[./-]\d{1,2}")
_MONTH_HINT = re.compile(rf"\b(?:{MONTH_ANY_RE})\b", re.IGNORECASE)
_DATEPARSER_PERIODS = MappingProxyType(
    {
        "day": Granularity.DAY,
        "time": Granularity.DAY,
        "week": Granularity.WEEK,
        "month": Granularity.MONTH,
        "year": Granularity.YEAR,
    }
)
_MAX_PHRASE = 300
_YEAR_DIGITS = re.compile(r"\d{4}")
_WORD = re.compile(r"[^\W_]+")
_FILLER = frozenset(
    {
        "in", "on", "at", "during", "around", "about", "approximately", "roughly", "circa", "sometime",
        "some", "time", "back", "the", "of", "by", "from", "to", "until", "till", "through", "since",
        "before", "after", "and", "or", "between", "early", "late", "mid",
    }
)  # fmt: skip


def normalize(phrase: str, reference: date | datetime, *, prefer: Direction | None = None) -> TimeRef:
    """Resolve one time phrase into an absolute date or interval.

    The phrase may be a bare expression ('last Friday', 'May', '2022'), one with a preposition
    ('in May', 'since 2019'), an anchored one ('the week before 9 June 2023') or a sentence that
    contains one expression. Several expressions resolve to the interval spanning all of them
    ('from May to July'). Conventions are those of :mod:`gravity_core.temporal`.

    Args:
        phrase: The time phrase as written.
        reference: The session date (or timestamp) the phrase was said at.
        prefer: 'past' or 'future' to place ambiguous phrases ('in June', 'on Friday'); by default
            the phrase's tense cue, else a month or day takes its nearer occurrence and the rest
            the past.

    Returns:
        A :class:`TimeRef` with ``raw`` = the phrase (stripped). When nothing can be resolved,
        ``start``/``end``/``granularity`` are ``None``; this function never raises on odd text.

    Raises:
        ConfigurationError: ``reference`` is not a date or datetime.
    """
    ref, ref_dt = split_reference(reference)
    if not isinstance(phrase, str):
        return TimeRef(raw=str(phrase), reference=ref)
    raw = phrase.strip()
    text = " ".join(raw.split())
    if not text or len(text) > _MAX_PHRASE:
        return TimeRef(raw=raw, reference=ref)
    try:
        interval = _resolve(text, ref, ref_dt, prefer)
    except (ValueError, OverflowError, StopIteration, IndexError) as exc:  # defensive: never raise on text
        logger.debug("could not normalize %r: %s", text, exc)
        interval = None
    if interval is None:
        return TimeRef(raw=raw, reference=ref)
    return TimeRef(
        raw=raw, start=interval.start, end=interval.end, granularity=interval.granularity, reference=ref
    )


def _resolve(text: str, ref: date, ref_dt: datetime | None, prefer: Direction | None) -> Interval | None:
    anchored = _anchored(text, ref, prefer)
    if anchored is not None:
        return anchored
    # Without a tense cue the rules place each phrase themselves (some take the nearer occurrence).
    direction = prefer or tense_cue(text)
    mentions = scan(text, ref, ref_dt, strict=True, prefer=direction)
    if not _covered(text, mentions):
        # the text is taken as a time phrase, so 'may' or '2019' alone count, but only when the
        # expressions are all there is ('I may go' is no month); else it is a sentence
        lenient = scan(text, ref, ref_dt, strict=False, prefer=direction)
        if _covered(text, lenient):
            mentions = lenient
    resolved = [m.time for m in mentions if m.time.resolved]
    if len(resolved) == 1:
        only = resolved[0]
        assert only.start is not None and only.end is not None and only.granularity is not None
        return Interval(only.start, only.end, only.granularity)
    if resolved:
        parts = _in_order(resolved)
        return Interval(min(p.start for p in parts), max(p.end for p in parts), Granularity.RANGE)
    if mentions:  # a known but vague phrase ('a while ago')
        return None
    return _with_dateparser(text, ref, direction or infer_direction(text))


def _in_order(times: list[TimeRef]) -> list[Interval]:
    """The intervals of 'from May to July', each moved a year on while it starts before the last one.

    Each was placed on its own, so 'July' alone went to the past.
    """
    parts: list[Interval] = []
    for t in times:
        assert t.start is not None and t.end is not None and t.granularity is not None
        part = Interval(t.start, t.end, t.granularity)
        explicit_year = _YEAR_DIGITS.search(t.raw) is not None
        while parts and not explicit_year and part.start < parts[-1].start:
            if part.granularity is Granularity.MONTH:
                part = month_interval(part.start.year + 1, part.start.month)
            else:
                part = Interval(add_months(part.start, 12), add_months(part.end, 12), part.granularity)
        parts.append(part)
    return parts


def _covered(text: str, mentions: list[TimeMention]) -> bool:
    """Whether nothing but filler words ('in', 'around', 'the'...) is left outside the mentions."""
    rest, last = [], 0
    for m in mentions:
        rest.append(text[last : m.start])
        last = m.end
    rest.append(text[last:])
    return all(word in _FILLER for word in _WORD.findall(" ".join(rest).lower()))


def _anchored(text: str, ref: date, prefer: Direction | None) -> Interval | None:
    """'the Friday before 15 July 2023' -> the Friday strictly before the resolved anchor."""
    m = _ANCHORED.match(text)
    if m is None:
        return None
    tail = normalize(m["tail"], ref, prefer=prefer)
    if tail.start is None or tail.end is None:
        return None
    direction = " ".join(m["dir"].lower().split())
    if direction == "of":
        return _containing(m, tail.start)
    before = direction in ("before", "prior to")
    sign = -1 if before else 1
    base = tail.start if before else tail.end
    if m["n"]:
        counts = count_of(m["n"])
        if counts is None:
            return None
        if unit_of(m["u"]) == "weekend":
            weeks = offset_interval(*counts, "week", base, sign)
            return Interval(weeks.start + timedelta(days=5), weeks.end, Granularity.RANGE)
        return offset_interval(*counts, unit_of(m["u"]), base, sign)
    if m["wd"]:
        wd = WEEKDAYS[m["wd"].lower()]
        return day(weekday_before(base, wd) if before else weekday_after(base, wd))
    unit = m["unit"].lower()
    if unit == "day":
        return day(base + timedelta(days=sign))
    if unit == "week":
        return week_interval(base + timedelta(weeks=sign))
    if unit == "weekend":
        saturday = weekday_before(base, 6) - timedelta(days=1) if before else weekday_after(base, 5)
        return Interval(saturday, saturday + timedelta(days=1), Granularity.RANGE)
    if unit == "month":
        d = add_months(base, sign)
        return month_interval(d.year, d.month)
    return year_interval(base.year + sign)


def _containing(m: re.Match[str], anchor: date) -> Interval | None:
    """'the week of 23 August 2023': the unit that holds the anchor day."""
    if m["n"]:
        return None
    week = week_interval(anchor)
    if m["wd"]:
        return day(week.start + timedelta(days=WEEKDAYS[m["wd"].lower()]))
    unit = m["unit"].lower()
    if unit == "day":
        return day(anchor)
    if unit == "week":
        return week
    if unit == "weekend":  # the nearest one: 'the weekend of Monday 22 August' is 20-21 August
        after = weekday_on_or_after(anchor, 5)
        sunday_before = weekday_on_or_before(anchor, 6)
        saturday = sunday_before - timedelta(days=1) if anchor - sunday_before < after - anchor else after
        return Interval(saturday, saturday + timedelta(days=1), Granularity.RANGE)
    if unit == "month":
        return month_interval(anchor.year, anchor.month)
    return year_interval(anchor.year)


def _with_dateparser(text: str, ref: date, direction: Direction) -> Interval | None:
    """Last resort for explicit dates the grammar does not know ('08.05.2023', 'Tue 9 May')."""
    # only what looks like a date: dateparser reads '4 years' as April
    has_month = _MONTH_HINT.search(text) is not None and any(c.isdigit() for c in text)
    if not (has_month or _NUMERIC_DATE_HINT.search(text)):
        return None
    from dateparser.date import DateDataParser  # slow import, rarely needed

    parser = DateDataParser(
        languages=["en"],
        settings={
            "RELATIVE_BASE": datetime.combine(ref, time()),
            "PREFER_DATES_FROM": direction,
            "PARSERS": ["custom-formats", "absolute-time"],
            "RETURN_AS_TIMEZONE_AWARE": False,
        },
    )
    try:
        data = parser.get_date_data(text)
    except Exception as exc:  # dateparser raises assorted errors on odd input
        logger.debug("dateparser failed on %r: %s", text, exc)
        return None
    if data is None or data.date_obj is None:
        return None
    found = data.date_obj.date()
    granularity = _DATEPARSER_PERIODS.get(data.period or "day", Granularity.DAY)
    if granularity is Granularity.WEEK:
        return week_interval(found)
    if granularity is Granularity.MONTH:
        return month_interval(found.year, found.month)
    if granularity is Granularity.YEAR:
        return year_interval(found.year)
    return day(found)
