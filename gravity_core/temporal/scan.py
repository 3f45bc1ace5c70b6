"""The scanning engine: run every rule, keep the leftmost-longest non-overlapping hits, apply prefixes."""

from __future__ import annotations

import logging
import re
from datetime import date, datetime
from types import MappingProxyType

from gravity_core.schema.time import Granularity, TimeRef
from gravity_core.temporal.calendar import Interval, part_of
from gravity_core.temporal.context import Direction, ScanContext
from gravity_core.temporal.mention import TimeMention
from gravity_core.temporal.rules import RULES, Hit

__all__ = ["scan"]

logger = logging.getLogger(__name__)

# Every rule needs one of these; most utterances have none and skip the grammar entirely.
_TRIGGER = re.compile(
    r"\d|day|night|tomorrow|tmrw|week|month|year|ago|recent|lately|while|summer|winter|spring|fall|autumn"
    r"|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|christmas|halloween|thanksgiving|easter|valentine"
    r"|decade|fortnight|morning|afternoon|evening|\b(?:mon|tue|wed|thu|fri|sat|sun)",
    re.IGNORECASE,
)

# Words that narrow ('early May', 'the end of last year') or open ('since 2019') the expression after them.
_PREFIX = re.compile(
    r"(?:\b(?P<since>(?:ever\s+)?since)"
    r"|\b(?P<part>early|mid|late|earlier|later|(?:the\s+)?(?:very\s+)?(?:beginning|start|middle|end)\s+of))"
    r"[\s-]+(?:the\s+)?$",
    re.IGNORECASE,
)
_PART = MappingProxyType(
    {
        "early": "early", "mid": "mid", "late": "late", "earlier": "early", "later": "late",
        "beginning": "early", "start": "early", "middle": "mid", "end": "late",
    }
)  # fmt: skip
_PREFIX_WINDOW = 40


def _with_prefix(text: str, hit: Hit, floor: int, ref: date) -> Hit:
    """Widen ``hit`` over a 'since' / 'early' / 'the end of' / 'earlier' word just before it."""
    iv = hit.interval
    if iv is None:
        return hit
    window_start = max(floor, hit.start - _PREFIX_WINDOW)
    m = _PREFIX.search(text, window_start, hit.start)
    if m is None:
        return hit
    if m["since"]:
        if iv.start > ref:
            return hit
        return Hit(m.start(), hit.end, Interval(iv.start, ref, Granularity.RANGE))
    word = next(w for w in m["part"].lower().split() if w in _PART)
    relative = word in ("earlier", "later")
    if iv.start == iv.end:
        # 'earlier today' keeps its day; 'late last night' is left as 'last night'
        return Hit(m.start(), hit.end, iv) if relative else hit
    if relative and iv.start <= ref <= iv.end:  # 'earlier this year': from its start up to now
        start, end = (iv.start, ref) if word == "earlier" else (ref, iv.end)
        return Hit(m.start(), hit.end, Interval(start, end, Granularity.RANGE))
    return Hit(m.start(), hit.end, part_of(iv, _PART[word]))


def scan(
    text: str,
    ref: date,
    ref_dt: datetime | None,
    *,
    strict: bool,
    prefer: Direction | None = None,
) -> list[TimeMention]:
    """All time expressions in ``text``, leftmost-longest and non-overlapping, in text order.

    Args:
        text: The text to scan.
        ref: Reference date the expressions are resolved against.
        ref_dt: Reference moment, when known (for 'two hours ago').
        strict: Free-text mode (see :class:`ScanContext`).
        prefer: Force the past or future reading of ambiguous expressions.
    """
    if strict and not _TRIGGER.search(text):
        return []
    ctx = ScanContext(text=text, ref=ref, ref_dt=ref_dt, strict=strict, prefer=prefer)
    candidates: list[tuple[int, int, int, Hit]] = []
    for order, rule in enumerate(RULES):
        pattern = rule.strict if strict else rule.lenient
        for match in pattern.finditer(text):
            try:
                hit = rule.resolve(match, ctx)
            except (ValueError, OverflowError) as exc:  # e.g. 'in 9000 years' leaves the calendar
                logger.debug("time phrase %r not resolved: %s", match.group(0), exc)
                continue
            if hit is not None:
                candidates.append((hit.start, hit.start - hit.end, order, hit))
    candidates.sort(key=lambda c: c[:3])
    mentions: list[TimeMention] = []
    last_end = 0
    for start, _, _, hit in candidates:
        if start < last_end:
            continue
        hit = _with_prefix(text, hit, last_end, ref)
        iv = hit.interval
        raw = text[hit.start : hit.end]
        time = (
            TimeRef(raw=raw, start=iv.start, end=iv.end, granularity=iv.granularity, reference=ref)
            if iv is not None
            else TimeRef(raw=raw, reference=ref)
        )
        mentions.append(TimeMention(start=hit.start, end=hit.end, text=raw, time=time))
        last_end = hit.end
    return mentions
