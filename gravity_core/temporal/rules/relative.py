"""Words relative to the reference day: 'yesterday', 'last week', 'next Friday', 'over the weekend'."""

from __future__ import annotations

import re
from datetime import date, timedelta
from types import MappingProxyType

from gravity_core.schema.time import Granularity
from gravity_core.temporal.calendar import (
    Interval,
    add_months,
    closest_season,
    day,
    month_interval,
    season_interval,
    week_interval,
    weekday_after,
    weekday_before,
    weekday_on_or_after,
    weekday_on_or_before,
    year_interval,
)
from gravity_core.temporal.context import ScanContext
from gravity_core.temporal.lexicon import (
    MONTH_FULL_RE,
    MONTHS,
    SEASON_RE,
    SEASONS,
    TIME_OF_DAY_RE,
    WEEKDAY_ABBR_RE,
    WEEKDAY_ABBREVIATIONS,
    WEEKDAY_RE,
    WEEKDAYS,
)
from gravity_core.temporal.rules.base import (
    Hit,
    Rule,
    both,
    hit,
    month_ok,
    preceded_by,
)

__all__ = [
    "BEFORE_LAST",
    "CALENDAR",
    "DAYWORD",
    "WEEKDAY",
    "WEEKEND",
]

_I = re.IGNORECASE

_DAYWORD = both(
    r"\b(?P<w>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|tonight"
    r"|tomorrow|tmrw|last\s+night|this\s+(?:morning|afternoon|evening))\b"
    rf"(?:\s+(?:{TIME_OF_DAY_RE})\b)?"
)
_DAYWORD_OFFSET = MappingProxyType(
    {
        "the day before yesterday": -2,
        "the day after tomorrow": 2,
        "yesterday": -1,
        "last night": -1,
        "tomorrow": 1,
        "tmrw": 1,
    }
)


def _dayword(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    word = " ".join(m["w"].lower().split())
    if word == "last night" and preceded_by(ctx.text, m.start(), ("the",)):
        return None  # 'the last night of the trip'
    return hit(m, day(ctx.ref + timedelta(days=_DAYWORD_OFFSET.get(word, 0))))


_CALENDAR = both(
    r"\b(?P<rel>last|this\s+past|this\s+coming|this|next|coming)\s+"
    rf"(?P<w>weekend|week|month|year|{WEEKDAY_RE}|{WEEKDAY_ABBR_RE}|{MONTH_FULL_RE}|{SEASON_RE})\b"
    rf"(?:\s+(?P<tod>{TIME_OF_DAY_RE})\b)?"
)


def _calendar(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    rel = " ".join(m["rel"].lower().split())
    word = m["w"].lower()
    if rel in ("last", "next") and preceded_by(ctx.text, m.start(), ("the", "at")):
        return None  # 'the last week of June', 'the next week we...', 'at last sat down'
    rel = {"this past": "last", "coming": "this coming"}.get(rel, rel)
    ref = ctx.ref
    word = WEEKDAY_ABBREVIATIONS.get(word, word)
    end = m.end() if m["tod"] and word in WEEKDAYS else m.end("w")
    interval: Interval
    if word == "week":
        interval = week_interval(ref + timedelta(weeks={"last": -1, "next": 1}.get(rel, 0)))
    elif word == "weekend":
        week = week_interval(ref + timedelta(weeks={"last": -1, "next": 1}.get(rel, 0)))
        interval = Interval(week.start + timedelta(days=5), week.end, Granularity.RANGE)
    elif word == "month":
        d = add_months(ref, {"last": -1, "next": 1}.get(rel, 0))
        interval = month_interval(d.year, d.month)
    elif word == "year":
        interval = year_interval(ref.year + {"last": -1, "next": 1}.get(rel, 0))
    elif word in WEEKDAYS:
        wd = WEEKDAYS[word]
        if rel == "last":
            target = weekday_before(ref, wd)
        elif rel == "next":
            target = week_interval(ref + timedelta(weeks=1)).start + timedelta(days=wd)
        elif rel == "this coming":
            target = weekday_after(ref, wd)
        else:
            target = week_interval(ref).start + timedelta(days=wd)
        interval = day(target)
    elif word in SEASONS:
        interval = _relative_season(SEASONS[word], rel, ref)
    else:
        if not month_ok(m["w"], ctx):
            return None
        month = MONTHS[word]
        if rel == "last":
            year = ref.year if month < ref.month else ref.year - 1
        elif rel == "next" or rel == "this coming":
            year = ref.year if month > ref.month else ref.year + 1
        else:
            year = ref.year
        interval = month_interval(year, month)
    return Hit(m.start(), end, interval)


def _relative_season(season: str, rel: str, ref: date) -> Interval:
    """The interval of 'this', 'last' or 'next' ``season`` said on ``ref``.

    'this summer' is the closest summer; 'last summer' the latest one over before the reference;
    'next summer' the one after this summer.
    """
    current = closest_season(season, ref)
    if rel == "last":
        options = [season_interval(season, ref.year + k) for k in (-2, -1, 0)]
        return [iv for iv in options if iv.end < ref][-1]
    if rel in ("next", "this coming") and (rel == "next" or current.start <= ref):
        return season_interval(season, current.start.year + 1)
    return current


_BEFORE_LAST = both(r"\bthe\s+(?P<w>week|weekend|month|year)\s+before\s+last\b")


def _before_last(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    ref, word = ctx.ref, m["w"].lower()
    if word in ("week", "weekend"):
        week = week_interval(ref - timedelta(weeks=2))
        if word == "weekend":
            return hit(m, Interval(week.start + timedelta(days=5), week.end, Granularity.RANGE))
        return hit(m, week)
    if word == "month":
        d = add_months(ref, -2)
        return hit(m, month_interval(d.year, d.month))
    return hit(m, year_interval(ref.year - 2))


_WEEKDAY = both(rf"\b(?P<w>{WEEKDAY_RE})\b(?:\s+(?P<tod>{TIME_OF_DAY_RE})\b)?")


def _weekday(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    if preceded_by(ctx.text, m.start(), ("every", "each")):
        return None  # habits, not a day
    wd = WEEKDAYS[m["w"].lower()]
    if ctx.direction_at(m.start()) == "future":
        return hit(m, day(weekday_on_or_after(ctx.ref, wd)))
    return hit(m, day(weekday_on_or_before(ctx.ref, wd)))


_WEEKEND = (
    re.compile(r"\b(?:over|on|during|at|for)\s+(?P<core>the\s+weekend)\b", _I),
    re.compile(r"\b(?P<core>(?:the\s+)?weekend)\b", _I),
)


def _weekend(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    ref = ctx.ref
    if ctx.direction_at(m.start()) == "future" and ref.weekday() < 5:
        saturday = weekday_on_or_after(ref, 5)
    else:  # the weekend we are in, else the one just past
        saturday = weekday_on_or_before(ref, 5)
    return hit(m, Interval(saturday, saturday + timedelta(days=1), Granularity.RANGE), "core")


DAYWORD = Rule("dayword", *_DAYWORD, _dayword)
CALENDAR = Rule("calendar", *_CALENDAR, _calendar)
BEFORE_LAST = Rule("before_last", *_BEFORE_LAST, _before_last)
WEEKDAY = Rule("weekday", *_WEEKDAY, _weekday)
WEEKEND = Rule("weekend", *_WEEKEND, _weekend)
