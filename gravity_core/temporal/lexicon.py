"""Words of the time grammar: month, weekday, season and number names, and their regex fragments.

Everything here is an immutable constant; the fragments are assembled into patterns by
:mod:`gravity_core.temporal.grammar`.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = [
    "FUZZY_COUNTS",
    "MONTHS",
    "MONTH_ANY_RE",
    "MONTH_FULL_RE",
    "NUMBER_RE",
    "NUMBER_WORDS",
    "SEASONS",
    "SEASON_RE",
    "TIME_OF_DAY_RE",
    "UNIT_RE",
    "WEEKDAYS",
    "WEEKDAY_ABBREVIATIONS",
    "WEEKDAY_ABBR_RE",
    "WEEKDAY_RE",
    "YEAR_RE",
    "count_of",
    "unit_of",
]

_FULL_MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_ABBREVIATIONS = MappingProxyType({
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7,
    "aug": 8, "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
})  # fmt: skip

MONTHS = MappingProxyType({**{m: i for i, m in enumerate(_FULL_MONTHS, 1)}, **_ABBREVIATIONS})
"""Month name or abbreviation (lower case) -> month number."""

MONTH_FULL_RE = "|".join(_FULL_MONTHS)
MONTH_ANY_RE = "|".join((*_FULL_MONTHS, *sorted(_ABBREVIATIONS, key=len, reverse=True)))

_WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
WEEKDAYS = MappingProxyType({d: i for i, d in enumerate(_WEEKDAY_NAMES)})
"""Weekday name (lower case) -> ``date.weekday()`` number (Monday = 0)."""
WEEKDAY_RE = "|".join(WEEKDAYS)
WEEKDAY_ABBREVIATIONS = MappingProxyType(
    {
        "mon": "monday", "tue": "tuesday", "tues": "tuesday", "wed": "wednesday", "thu": "thursday",
        "thur": "thursday", "thurs": "thursday", "fri": "friday", "sat": "saturday", "sun": "sunday",
    }
)  # fmt: skip
"""Weekday abbreviations, accepted only after 'last' / 'this' / 'next' ('last Fri'; 'I sat' is a verb)."""
WEEKDAY_ABBR_RE = "|".join(sorted(WEEKDAY_ABBREVIATIONS, key=len, reverse=True))

SEASONS = MappingProxyType(
    {"spring": "spring", "summer": "summer", "fall": "autumn", "autumn": "autumn", "winter": "winter"}
)
"""Season word -> canonical season name."""
SEASON_RE = "|".join(SEASONS)

TIME_OF_DAY_RE = r"morning|afternoon|evening|night"

NUMBER_WORDS = MappingProxyType(
    {
        "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
        "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
        "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
        "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    }
)  # fmt: skip
"""Exact number words -> value."""

FUZZY_COUNTS = MappingProxyType({"couple": (2, 3), "few": (2, 4), "several": (3, 6), "handful": (3, 5)})
"""Vague quantities -> the (fewest, most) units they are taken to mean; they resolve to a RANGE."""

_FUZZY_NUMBER_RE = r"a\s+couple(?:\s+of)?|couple(?:\s+of)?|a\s+few|few|several|a\s+handful\s+of"
NUMBER_RE = _FUZZY_NUMBER_RE + r"|\d{1,3}|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True))
"""A count: digits, a number word, or a vague quantity ('a couple of', 'a few', 'several')."""

UNIT_RE = r"days?|weeks?|fortnights?|months?|years?|decades?|hours?|hrs?|minutes?|mins?"

YEAR_RE = r"(?:19|20)\d{2}"
"""A year we accept as one: 1900-2099."""


def count_of(word: str) -> tuple[int, int] | None:
    """The (fewest, most) units a count means; equal for exact numbers. None if not a count."""
    w = " ".join(word.lower().split())
    if w.isdigit():
        return int(w), int(w)
    if w in NUMBER_WORDS:
        return NUMBER_WORDS[w], NUMBER_WORDS[w]
    for key, span in FUZZY_COUNTS.items():
        if key in w:
            return span
    return None


def unit_of(word: str) -> str:
    """Canonical unit name for a unit word: 'Weeks' -> 'week', 'hrs' -> 'hour'."""
    w = word.lower().rstrip("s")
    return {"hr": "hour", "min": "minute"}.get(w, w)
