"""Counted offsets and vague spans: 'two weeks ago', 'in a few days', 'the past month', 'lately'."""

from __future__ import annotations

import re
from datetime import timedelta

from gravity_core.schema.time import Granularity
from gravity_core.temporal.arithmetic import offset_interval, rolling_interval
from gravity_core.temporal.calendar import (
    Interval,
)
from gravity_core.temporal.context import ScanContext
from gravity_core.temporal.lexicon import (
    NUMBER_RE,
    UNIT_RE,
    count_of,
    unit_of,
)
from gravity_core.temporal.rules.base import (
    Hit,
    Rule,
    both,
    hit,
)

__all__ = [
    "AGO",
    "COMING",
    "IN_FUTURE",
    "RECENT",
    "ROLLING",
    "VAGUE",
]

_I = re.IGNORECASE

_AGO = both(
    rf"\b(?:(?P<n>{NUMBER_RE})\s+(?P<u>{UNIT_RE}|weekends?)|(?P<n1>a|an|one)\s+(?P<u1>day|week|month|year)\s+or\s+two)"
    r"\s+(?P<dir>ago|back|from\s+now|from\s+today)\b"
)


def _ago(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    if m["n1"]:
        counts: tuple[int, int] | None = (1, 2)
        unit = unit_of(m["u1"])
    else:
        counts = count_of(m["n"])
        unit = unit_of(m["u"])
    if counts is None:
        return None
    sign = -1 if m["dir"].lower() in ("ago", "back") else 1
    if unit == "weekend":  # 'two weekends ago': Saturday-Sunday of the week two weeks back
        weeks = offset_interval(*counts, "week", ctx.ref, sign)
        return hit(m, Interval(weeks.start + timedelta(days=5), weeks.end, Granularity.RANGE))
    return hit(m, offset_interval(*counts, unit, ctx.ref, sign, ctx.ref_dt))


_IN_FUTURE = both(rf"\bin\s+(?P<n>{NUMBER_RE})\s+(?P<u>{UNIT_RE})\b(?!\s*(?:of\b|['’]s\b))")


def _in_future(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    # 'in two weeks' is a plan only in a sentence about the future; 'read it in a day' is a duration
    if ctx.strict and ctx.direction_at(m.start()) != "future":
        return None
    counts = count_of(m["n"])
    if counts is None:
        return None
    return hit(m, offset_interval(*counts, unit_of(m["u"]), ctx.ref, 1, ctx.ref_dt))


_ROLLING = both(
    r"\b(?:(?P<det>the|these|this)\s+)?(?P<rel>past|last|previous)\s+"
    rf"(?:(?P<n>{NUMBER_RE})\s+)?(?P<u>{UNIT_RE})\b(?!\s+(?:of|before|after|that|when|which)\b)"
)


def _rolling(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    unit = unit_of(m["u"])
    number = m["n"]
    if m["det"] is None and (number is None or number.lower() in ("a", "an", "one")):
        return None  # bare 'last week' is the calendar week (see _calendar)
    if number is None and unit in ("day", "hour", "minute"):
        return None  # 'the last day' is an ordinal, not a span
    if m["det"] is None and m["rel"].lower() == "previous":
        return None
    counts = count_of(number) if number else (1, 1)
    if counts is None:
        return None
    return hit(m, rolling_interval(counts[1], unit, ctx.ref, -1, ctx.ref_dt))


_COMING = both(
    rf"\b(?:the\s+)?(?:next|coming)\s+(?P<n>{NUMBER_RE})\s+(?P<u>{UNIT_RE})\b"
    r"|\b(?:the\s+)coming\s+(?P<u2>days|weeks|months|years)\b"
)


def _coming(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    if m["u2"]:
        counts: tuple[int, int] | None = count_of("few")
        unit = unit_of(m["u2"])
    else:
        if m["n"].lower() in ("a", "an", "one"):
            return None  # 'the next day': relative to a story, not to the reference
        counts = count_of(m["n"])
        unit = unit_of(m["u"])
    if counts is None:
        return None
    return hit(m, rolling_interval(counts[1], unit, ctx.ref, 1, ctx.ref_dt))


_RECENT = both(r"\b(?P<w>recently|lately|the\s+other\s+(?:day|night))\b")


def _recent(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    ref = ctx.ref
    if m["w"].lower() in ("recently", "lately"):
        return hit(m, Interval(ref - timedelta(days=30), ref, Granularity.RANGE))
    return hit(m, Interval(ref - timedelta(days=7), ref - timedelta(days=1), Granularity.RANGE))


_VAGUE = both(
    r"\b(?:a\s+(?:long\s+|little\s+|good\s+)?while\s+(?:ago|back)|(?:a\s+)?long\s+time\s+ago|long\s+ago"
    r"|(?:many\s+|so\s+many\s+)?(?:days|weeks|months|years|ages|decades)\s+ago|some\s+time\s+ago)\b"
)


def _vague(m: re.Match[str], ctx: ScanContext) -> Hit | None:
    return hit(m, None)


AGO = Rule("ago", *_AGO, _ago)
IN_FUTURE = Rule("in_future", *_IN_FUTURE, _in_future)
ROLLING = Rule("rolling", *_ROLLING, _rolling)
COMING = Rule("coming", *_COMING, _coming)
RECENT = Rule("recent", *_RECENT, _recent)
VAGUE = Rule("vague", *_VAGUE, _vague)
