"""Shared parts of the time grammar: the rule and hit types and the resolvers' helpers."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date
from typing import NamedTuple

from gravity_core.temporal.calendar import (
    Interval,
    month_interval,
    season_interval,
)
from gravity_core.temporal.context import ScanContext

__all__ = [
    "PART_OF",
    "Hit",
    "Resolver",
    "Rule",
    "both",
    "date_or_none",
    "hit",
    "month_ok",
    "placed_day",
    "preceded_by",
    "recent_date",
    "recent_month",
    "recent_season",
    "year_of",
]

_I = re.IGNORECASE


class Hit(NamedTuple):
    """A resolved match: its character span and interval (``None``: a time phrase we cannot ground)."""

    start: int
    end: int
    interval: Interval | None


Resolver = Callable[[re.Match[str], ScanContext], Hit | None]


class Rule(NamedTuple):
    """One kind of time expression."""

    name: str
    strict: re.Pattern[str]
    lenient: re.Pattern[str]
    resolve: Resolver


def both(pattern: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The (strict, lenient) pair for a rule that needs no context: one pattern, compiled once."""
    compiled = re.compile(pattern, _I)
    return compiled, compiled


def month_ok(token: str, ctx: ScanContext) -> bool:
    """In free text, lower-case 'may' and 'march' are verbs, not months."""
    return not (ctx.strict and token.lower() in ("may", "march") and token.islower())


def preceded_by(text: str, pos: int, words: tuple[str, ...]) -> bool:
    """Whether the word just before ``pos`` is one of ``words`` (lower case)."""
    before = text[max(0, pos - 12) : pos].rstrip().lower()
    return any(before == w or before.endswith(" " + w) or before.endswith("\n" + w) for w in words)


def date_or_none(year: int, month: int, dom: int) -> date | None:
    """The date, or ``None`` when it does not exist (31 April)."""
    try:
        return date(year, month, dom)
    except ValueError:
        return None


def year_of(match: re.Match[str], group: str) -> int | None:
    """The year a match's ``group`` holds, or ``None`` when the group did not match."""
    value = match.group(group)
    return int(value) if value else None


def recent_date(month: int, dom: int, ctx: ScanContext, pos: int) -> date | None:
    """The day ``month``/``dom`` without a year, placed by the tense of the sentence.

    The latest one on or before the reference when the sentence is in the past, the first one on or
    after it when it speaks of the future, and the nearer of the two when it has no tense cue
    ('I start on 2 April' said in March).
    """

    def occurrence(future: bool) -> date | None:
        for k in range(0, 9):  # 29 February may be years away
            year = ctx.ref.year + (k if future else -k)
            d = date_or_none(year, month, dom)
            if d is not None and (d >= ctx.ref if future else d <= ctx.ref):
                return d
        return None

    return placed_day(ctx, pos, occurrence)


def placed_day(ctx: ScanContext, pos: int, occurrence: Callable[[bool], date | None]) -> date | None:
    """The occurrence (``occurrence(future)``) the tense of the sentence at ``pos`` asks for.

    The past one, the future one, or the nearer of the two when the sentence has no tense cue.
    """
    cue = ctx.cue_at(pos)
    if cue is not None:
        return occurrence(cue == "future")
    past, upcoming = occurrence(False), occurrence(True)
    if past is None or upcoming is None:
        return past or upcoming
    return upcoming if (upcoming - ctx.ref) < (ctx.ref - past) else past


def recent_month(month: int, ctx: ScanContext, pos: int) -> Interval:
    """'in May': the latest May not after the reference month, or the next May not before it for plans.

    The nearer of the two when the sentence has no tense cue ('the wedding is in June' said in May).
    """
    ref = ctx.ref
    past = ref.year if month <= ref.month else ref.year - 1
    upcoming = ref.year if month >= ref.month else ref.year + 1
    cue = ctx.cue_at(pos)
    if cue is None:
        behind = (ref.year - past) * 12 + ref.month - month
        ahead = (upcoming - ref.year) * 12 + month - ref.month
        return month_interval(upcoming if ahead < behind else past, month)
    return month_interval(upcoming if cue == "future" else past, month)


def recent_season(season: str, ctx: ScanContext, pos: int) -> Interval:
    """'in the summer': the latest summer begun by the reference, or the first not yet over for plans."""
    ref = ctx.ref
    options = [season_interval(season, ref.year + k) for k in (-2, -1, 0, 1)]
    if ctx.direction_at(pos) == "future":
        return next(iv for iv in options if iv.end >= ref)
    return [iv for iv in options if iv.start <= ref][-1]


def hit(m: re.Match[str], interval: Interval | None, group: str | int = 0) -> Hit:
    """A hit spanning ``group`` of the match (the whole match by default)."""
    return Hit(m.start(group), m.end(group), interval)


PART_OF = r"(?:the\s+)?(?:very\s+)?(?:beginning|start|middle|end|rest)\s+of"
"""'the beginning of', 'the end of'...: context before a month or season."""
