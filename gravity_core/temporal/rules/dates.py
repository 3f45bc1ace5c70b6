"""Explicit dates: '8 May 2023', 'May 8th', '2023-05-08', 'May 2023', 'in May', 'the 8th'."""

from __future__ import annotations

import re
from datetime import date, timedelta
from types import MappingProxyType

from gravity_core.schema.time import Granularity
from gravity_core.temporal.calendar import (
    Interval,
    add_months,
    day,
    month_interval,
    weekday_on_or_after,
    weekday_on_or_before,
)
from gravity_core.temporal.context import ScanContext
from gravity_core.temporal.lexicon import (
    MONTH_ANY_RE,
    MONTH_FULL_RE,
    MONTHS,
    WEEKDAY_RE,
    YEAR_RE,
)
from gravity_core.temporal.rules.base import (
    PART_OF,
    Hit,
    Rule,
    both,
    date_or_none,
    hit,
    month_ok,
    placed_day,
    recent_date,
    recent_month,
    year_of,
)

__all__ = [
    "DAY_MONTH_YEAR",
    "DAY_OF_MONTH",
    "ISO",
    "MONTH",
    "MONTH_DAY_YEAR",
    "MONTH_YEAR",
    "NUMERIC",
    "WEEK_OF",
]

_I = re.IGNORECASE

_ISO = both(rf"\b(?P<y>{YEAR_RE})(?P<sep>[-/.])(?P<m>\d{{1,2}})(?P=sep)(?P<d>\d{{1,2}})(?!\d)")


def _iso(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    d = date_or_none(int(m["y"]), int(m["m"]), int(m["d"]))
    return hit(m, day(d)) if d else None


_NUMERIC = both(rf"\b(?P<a>\d{{1,2}})/(?P<b>\d{{1,2}})/(?P<y>{YEAR_RE})(?!\d)")


def _numeric(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    a, b = int(m["a"]), int(m["b"])
    month, dom = (b, a) if a > 12 else (a, b)  # month first (US) unless that cannot be
    d = date_or_none(int(m["y"]), month, dom)
    return hit(m, day(d)) if d else None


_WEEKDAY_PREFIX = rf"(?:(?:{WEEKDAY_RE}),?\s+)?"
_ORDINAL = r"(?:st|nd|rd|th)"
_DMY = both(
    rf"\b{_WEEKDAY_PREFIX}(?:the\s+)?(?P<d>\d{{1,2}}){_ORDINAL}?\s*(?:of\s+)?(?P<m>{MONTH_ANY_RE})\b\.?"
    rf"(?:,?\s+(?P<y>{YEAR_RE})\b)?"
)
_MDY = both(
    rf"\b{_WEEKDAY_PREFIX}(?P<m>{MONTH_ANY_RE})\b\.?\s+(?:the\s+)?(?P<d>\d{{1,2}}){_ORDINAL}?\b"
    rf"(?:,?\s+(?P<y>{YEAR_RE})\b)?"
)


def _day_month(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    token = m["m"]
    if not month_ok(token, ctx):
        return None
    month, dom = MONTHS[token.lower()], int(m["d"])
    year = year_of(m, "y")
    d = date_or_none(year, month, dom) if year else recent_date(month, dom, ctx, m.start())
    return hit(m, day(d)) if d else None


_MONTH_YEAR = both(rf"\b(?P<m>{MONTH_ANY_RE})\b(?:[,.]?\s*|\s+of\s+)(?P<y>{YEAR_RE})\b")


def _month_year(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    if not month_ok(m["m"], ctx):
        return None
    return hit(m, month_interval(int(m["y"]), MONTHS[m["m"].lower()]))


_MONTH_CONTEXT = (
    rf"(?:in|during|since|until|till|by|from|through|throughout|before|after|around|early|mid|late|{PART_OF})"
)
_MONTH = (
    re.compile(rf"\b{_MONTH_CONTEXT}[\s-]+(?:the\s+month\s+of\s+)?(?P<m>{MONTH_FULL_RE})\b", _I),
    re.compile(rf"\b(?P<m>{MONTH_FULL_RE})\b", _I),
)


def _month(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    token = m["m"]
    if not month_ok(token, ctx):
        return None
    return hit(m, recent_month(MONTHS[token.lower()], ctx, m.start("m")), "m")


_DAY_OF_MONTH = (
    re.compile(
        rf"\bon\s+(?P<core>the\s+(?P<d>\d{{1,2}}){_ORDINAL})\b(?!\s+of\b(?!\s+(?:the|this|last)\s+month\b))"
        # Only where a new phrase follows: 'on the 5th floor' or 'on the 3rd try' is no date.
        r"(?=\s*(?:[.,;:!?)\-\u2013\u2014]|$)|\s+(?:and|or|at|in|when|but|so|because|too|as|we|i|with|to|for"
        r"|from|my|our|the|this|that|then|he|she|they|it|of|after|before|which|while|if|until|till|yet)\b)",
        _I,
    ),
    re.compile(rf"\b(?P<core>(?:the\s+)?(?P<d>\d{{1,2}}){_ORDINAL})\b", _I),
)


def _day_of_month(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    """'on the 30th': the latest such day by the reference, or the next one for plans.

    The nearer of the two when the sentence has no tense cue.
    """
    dom = int(m["d"])
    ref = ctx.ref

    def occurrence(future: bool) -> date | None:
        step = 1 if future else -1
        for k in range(0, 3):
            first = add_months(ref.replace(day=1), step * k)
            d = date_or_none(first.year, first.month, dom)
            if d is not None and (d >= ref if future else d <= ref):
                return d
        return None

    found = placed_day(ctx, m.start(), occurrence)
    return hit(m, day(found), "core") if found is not None else None


_NTH = MappingProxyType({"first": 1, "second": 2, "third": 3, "fourth": 4, "last": -1})
_WEEK_OF = both(
    r"\b(?:the\s+)?(?P<o>first|second|third|fourth|last)\s+(?P<w>week|weekend)\s+of\s+"
    rf"(?:(?P<rel>last|this|next)\s+month|(?P<m>{MONTH_FULL_RE})(?:,?\s+(?P<y>{YEAR_RE}))?)\b"
)


def _week_of(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    """'the last week of June' = 24-30 June; 'the first weekend of May' = its first Saturday-Sunday."""
    if m["rel"]:
        d = add_months(ctx.ref, {"last": -1, "next": 1}.get(m["rel"].lower(), 0))
        month = month_interval(d.year, d.month)
    else:
        if not month_ok(m["m"], ctx):
            return None
        number, year = MONTHS[m["m"].lower()], year_of(m, "y")
        month = month_interval(year, number) if year else recent_month(number, ctx, m.start("m"))
    nth = _NTH[m["o"].lower()]
    if m["w"].lower() == "week":
        if nth < 0:
            return hit(m, Interval(month.end - timedelta(days=6), month.end, Granularity.RANGE))
        start = month.start + timedelta(weeks=nth - 1)
        return hit(m, Interval(start, start + timedelta(days=6), Granularity.RANGE))
    if nth < 0:
        saturday = weekday_on_or_before(month.end, 5)
    else:
        saturday = weekday_on_or_after(month.start, 5) + timedelta(weeks=nth - 1)
    if not month.start <= saturday <= month.end:
        return None
    return hit(m, Interval(saturday, saturday + timedelta(days=1), Granularity.RANGE))


ISO = Rule("iso", *_ISO, _iso)
NUMERIC = Rule("numeric", *_NUMERIC, _numeric)
DAY_MONTH_YEAR = Rule("day_month_year", *_DMY, _day_month)
MONTH_DAY_YEAR = Rule("month_day_year", *_MDY, _day_month)
MONTH_YEAR = Rule("month_year", *_MONTH_YEAR, _month_year)
MONTH = Rule("month", *_MONTH, _month)
DAY_OF_MONTH = Rule("day_of_month", *_DAY_OF_MONTH, _day_of_month)
WEEK_OF = Rule("week_of", *_WEEK_OF, _week_of)
