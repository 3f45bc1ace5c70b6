"""Seasons, years, decades and holidays: 'last summer', 'in 2019', 'the 1990s', 'at Christmas'."""

from __future__ import annotations

import re
from datetime import date

from dateutil.easter import easter

from gravity_core.schema.time import Granularity
from gravity_core.temporal.calendar import (
    Interval,
    day,
    nth_weekday,
    season_interval,
    year_interval,
)
from gravity_core.temporal.context import ScanContext
from gravity_core.temporal.lexicon import (
    SEASON_RE,
    SEASONS,
    YEAR_RE,
)
from gravity_core.temporal.rules.base import (
    PART_OF,
    Hit,
    Rule,
    both,
    hit,
    recent_season,
    year_of,
)

__all__ = [
    "DECADE",
    "HOLIDAY",
    "SEASON",
    "YEAR",
]

_I = re.IGNORECASE

# not 'by': 'inspired by autumn' is more common in chat than 'by autumn'
_SEASON_CONTEXT = (
    r"(?:in|during|over|for|through|throughout|since|until|till|before|after|around|early|mid|late"
    rf"|{PART_OF})"
)
_SEASON_YEAR = rf"(?:\s+(?:of\s+)?(?P<y>{YEAR_RE})\b)?"
_SEASON = (
    re.compile(
        rf"(?:\b(?P<ctx>{_SEASON_CONTEXT})[\s-]+(?:the\s+)?)?\b(?P<s>{SEASON_RE})\b{_SEASON_YEAR}", _I
    ),
    re.compile(rf"\b(?P<s>{SEASON_RE})\b{_SEASON_YEAR}", _I),
)


def _season(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    year = year_of(m, "y")
    season = SEASONS[m["s"].lower()]
    if year is not None:
        return Hit(m.start("s"), m.end(), season_interval(season, year))
    if ctx.strict and not m.groupdict().get("ctx"):
        return None  # 'summer camp', 'I fall'
    return hit(m, recent_season(season, ctx, m.start("s")), "s")


_YEAR_GUARD = r"(?![-/.:]\d|%|\s*(?:percent|dollars|people|followers|miles|km|pounds|times)\b)"
_YEAR = (
    re.compile(
        r"\b(?:in|since|of|by|until|till|from|during|before|after|around|circa|to|through|year|early|mid"
        rf"|late|and|or|back\s+in)[\s-]+(?P<y>{YEAR_RE})\b{_YEAR_GUARD}",
        _I,
    ),
    re.compile(rf"\b(?P<y>{YEAR_RE})\b{_YEAR_GUARD}", _I),
)


def _bare_year(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    return hit(m, year_interval(int(m["y"])), "y")


_DECADE = both(r"(?:\bthe\s+['’](?P<d2>[3-9]0)s|\b(?P<d4>(?:19|20)\d0)s)\b")


def _decade(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    first = int(m["d4"]) if m["d4"] else 1900 + int(m["d2"])
    return hit(m, Interval(date(first, 1, 1), date(first + 9, 12, 31), Granularity.RANGE))


_HOLIDAY_NAMES = (
    r"christmas\s+eve|christmas(?:\s+day)?|new\s+year['’]?s\s+eve|new\s+year['’]?s(?:\s+day)?|halloween"
    r"|valentine['’]?s\s+day|thanksgiving|easter(?:\s+sunday)?|independence\s+day"
)
_HOLIDAY = (
    re.compile(
        r"\b(?:(?P<rel>last|this\s+past|this\s+coming|this|next)\s+"
        r"|(?P<ctx>on|at|for|over|during|since|before|after|around|until|till|by)\s+)"
        rf"(?P<h>{_HOLIDAY_NAMES})\b",
        _I,
    ),
    re.compile(rf"\b(?:(?P<rel>last|this\s+past|this\s+coming|this|next)\s+)?(?P<h>{_HOLIDAY_NAMES})\b", _I),
)


def _holiday_on(name: str, year: int) -> date:
    if name.startswith("christmas eve"):
        return date(year, 12, 24)
    if name.startswith("christmas"):
        return date(year, 12, 25)
    if name.startswith("new year") and name.endswith("eve"):
        return date(year, 12, 31)
    if name.startswith("new year"):
        return date(year, 1, 1)
    if name.startswith("halloween"):
        return date(year, 10, 31)
    if name.startswith("valentine"):
        return date(year, 2, 14)
    if name.startswith("thanksgiving"):
        return nth_weekday(year, 11, 3, 4)  # US: fourth Thursday of November
    if name.startswith("easter"):
        result: date = easter(year)
        return result
    return date(year, 7, 4)  # independence day (US)


def _holiday(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    name = " ".join(m["h"].lower().replace("’", "'").split())
    rel = " ".join((m["rel"] or "").lower().split())
    ref = ctx.ref
    days = [_holiday_on(name, ref.year + k) for k in (-1, 0, 1)]
    if rel in ("last", "this past"):
        target = [d for d in days if d < ref][-1]
    elif rel == "this":
        target = days[1]
    elif rel in ("next", "this coming"):
        target = next(d for d in days if d > ref)
    elif ctx.direction_at(m.start("h")) == "future":
        target = next(d for d in days if d >= ref)
    else:
        target = [d for d in days if d <= ref][-1]
    start = m.start() if rel else m.start("h")
    return Hit(start, m.end(), day(target))


SEASON = Rule("season", *_SEASON, _season)
YEAR = Rule("year", *_YEAR, _bare_year)
DECADE = Rule("decade", *_DECADE, _decade)
HOLIDAY = Rule("holiday", *_HOLIDAY, _holiday)
