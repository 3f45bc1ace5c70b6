"""Counted offsets from a base date: 'three days ago', 'in two weeks', 'the past few months'."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from gravity_core.schema.time import Granularity
from gravity_core.temporal.calendar import (
    Interval,
    add_months,
    day,
    month_interval,
    week_interval,
    year_interval,
)

__all__ = ["offset_interval", "rolling_interval"]


def _shift(base: date, unit: str, n: int, base_dt: datetime | None) -> date:
    """``base`` moved by ``n`` units (negative = back in time)."""
    if unit in ("hour", "minute"):
        moment = base_dt if base_dt is not None else datetime.combine(base, time(12))
        delta = timedelta(hours=n) if unit == "hour" else timedelta(minutes=n)
        return (moment + delta).date()
    if unit == "day":
        return base + timedelta(days=n)
    if unit == "week":
        return base + timedelta(weeks=n)
    if unit == "fortnight":
        return base + timedelta(weeks=2 * n)
    if unit == "month":
        return add_months(base, n)
    if unit == "year":
        return add_months(base, 12 * n)
    if unit == "decade":
        return add_months(base, 120 * n)
    raise ValueError(f"unknown unit {unit!r}")


def _unit_interval(d: date, unit: str) -> Interval:
    """The calendar interval of ``unit`` size around ``d``: its day, week, month or year."""
    if unit in ("hour", "minute", "day"):
        return day(d)
    if unit in ("week", "fortnight"):
        return week_interval(d)
    if unit == "month":
        return month_interval(d.year, d.month)
    return year_interval(d.year)


def offset_interval(
    fewest: int, most: int, unit: str, base: date, sign: int, base_dt: datetime | None = None
) -> Interval:
    """The calendar unit ``fewest``..``most`` units away from ``base``.

    'two weeks ago' is the Monday-Sunday week that holds the day 14 days back; 'a few months ago'
    (2..4) is the range from the start of the month 4 months back to the end of the one 2 months back.

    Args:
        fewest: Smallest count the phrase means (equal to ``most`` for an exact count).
        most: Largest count.
        unit: 'minute', 'hour', 'day', 'week', 'fortnight', 'month', 'year' or 'decade'.
        base: The date counted from.
        sign: -1 for the past ('ago'), +1 for the future ('from now').
        base_dt: The base moment, for hours and minutes.

    Raises:
        ValueError: the unit is unknown, or the result leaves the calendar's range.
        OverflowError: the result leaves the calendar's range.
    """
    near = _unit_interval(_shift(base, unit, sign * fewest, base_dt), unit)
    if fewest == most:
        return near
    far = _unit_interval(_shift(base, unit, sign * most, base_dt), unit)
    return Interval(min(near.start, far.start), max(near.end, far.end), Granularity.RANGE)


def rolling_interval(
    count: int, unit: str, base: date, sign: int, base_dt: datetime | None = None
) -> Interval:
    """The ``count`` units before ``base`` (``sign`` -1: 'the past two weeks') or after it (+1)."""
    other = _shift(base, unit, sign * count, base_dt)
    return Interval(min(base, other), max(base, other), Granularity.RANGE)
