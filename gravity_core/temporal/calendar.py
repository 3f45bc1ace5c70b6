"""Plain calendar arithmetic on :class:`datetime.date`: weeks, months, seasons, thirds.

Conventions (documented in :mod:`gravity_core.temporal`): weeks run Monday to Sunday; seasons are the
northern-hemisphere meteorological ones, and the winter of year ``Y`` runs from 1 December ``Y`` to the end
of February ``Y + 1``.
"""

from __future__ import annotations

import calendar as _calendar
from datetime import date, timedelta
from types import MappingProxyType
from typing import NamedTuple

from dateutil.relativedelta import relativedelta

from gravity_core.schema.time import Granularity

__all__ = [
    "SEASON_START_MONTH",
    "Interval",
    "add_months",
    "closest_season",
    "day",
    "month_interval",
    "nth_weekday",
    "season_interval",
    "part_of",
    "week_interval",
    "weekday_after",
    "weekday_before",
    "weekday_on_or_after",
    "weekday_on_or_before",
    "year_interval",
]

SEASON_START_MONTH = MappingProxyType({"spring": 3, "summer": 6, "autumn": 9, "winter": 12})


class Interval(NamedTuple):
    """An inclusive day interval with its precision."""

    start: date
    end: date
    granularity: Granularity


def day(d: date) -> Interval:
    """The single day ``d``."""
    return Interval(d, d, Granularity.DAY)


def week_interval(d: date) -> Interval:
    """The Monday-Sunday week that contains ``d``."""
    monday = d - timedelta(days=d.weekday())
    return Interval(monday, monday + timedelta(days=6), Granularity.WEEK)


def month_interval(year: int, month: int) -> Interval:
    """The calendar month ``month`` of ``year``."""
    last = _calendar.monthrange(year, month)[1]
    return Interval(date(year, month, 1), date(year, month, last), Granularity.MONTH)


def year_interval(year: int) -> Interval:
    """The calendar year ``year``."""
    return Interval(date(year, 1, 1), date(year, 12, 31), Granularity.YEAR)


def add_months(d: date, months: int) -> date:
    """``d`` moved by ``months`` calendar months (day clipped to the month's length)."""
    result: date = d + relativedelta(months=months)
    return result


def season_interval(season: str, year: int) -> Interval:
    """Season ``season`` ('spring', 'summer', 'autumn', 'winter') that starts in ``year``."""
    first = date(year, SEASON_START_MONTH[season], 1)
    last = add_months(first, 3) - timedelta(days=1)
    return Interval(first, last, Granularity.SEASON)


def closest_season(season: str, ref: date) -> Interval:
    """The occurrence of ``season`` that contains ``ref``, else the one nearest to it."""
    candidates = [season_interval(season, ref.year + k) for k in (-1, 0, 1)]

    def distance(iv: Interval) -> int:
        if iv.start <= ref <= iv.end:
            return 0
        return min(abs((iv.start - ref).days), abs((ref - iv.end).days))

    return min(candidates, key=distance)


def weekday_on_or_before(d: date, weekday: int) -> date:
    """The latest day on or before ``d`` that falls on ``weekday`` (Monday = 0)."""
    return d - timedelta(days=(d.weekday() - weekday) % 7)


def weekday_before(d: date, weekday: int) -> date:
    """The latest day strictly before ``d`` that falls on ``weekday``."""
    return weekday_on_or_before(d - timedelta(days=1), weekday)


def weekday_on_or_after(d: date, weekday: int) -> date:
    """The earliest day on or after ``d`` that falls on ``weekday``."""
    return d + timedelta(days=(weekday - d.weekday()) % 7)


def weekday_after(d: date, weekday: int) -> date:
    """The earliest day strictly after ``d`` that falls on ``weekday``."""
    return weekday_on_or_after(d + timedelta(days=1), weekday)


def nth_weekday(year: int, month: int, weekday: int, n: int) -> date:
    """The ``n``-th (1-based) ``weekday`` of a month, e.g. the 4th Thursday of November."""
    return weekday_on_or_after(date(year, month, 1), weekday) + timedelta(weeks=n - 1)


def part_of(iv: Interval, part: str) -> Interval:
    """The first ('early'), middle ('mid') or last ('late') third of ``iv``, as a range.

    Years and seasons are cut at month boundaries ('early 2022' is January-April, 'late summer'
    is August); months and other spans by days ('early May' is 1-10 May). Single days are returned
    unchanged: 'late last night' is still last night.
    """
    if iv.start == iv.end:
        return iv
    index = {"early": 0, "mid": 1, "late": 2}[part]
    if iv.granularity in (Granularity.YEAR, Granularity.SEASON):
        months = 4 if iv.granularity is Granularity.YEAR else 1
        first = add_months(iv.start, index * months)
        last = add_months(first, months) - timedelta(days=1)
        return Interval(first, last, Granularity.RANGE)
    length = (iv.end - iv.start).days + 1
    third = max(length // 3, 1)
    if index == 0:
        return Interval(iv.start, iv.start + timedelta(days=third - 1), Granularity.RANGE)
    if index == 2:
        return Interval(iv.end - timedelta(days=third - 1), iv.end, Granularity.RANGE)
    return Interval(iv.start + timedelta(days=third), iv.end - timedelta(days=third), Granularity.RANGE)
