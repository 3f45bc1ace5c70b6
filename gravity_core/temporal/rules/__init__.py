"""The time grammar: one regex and one resolver per kind of expression.

Each :class:`Rule` has a *strict* pattern, used on free text, that demands context around ambiguous
words ('in May' but not 'I may go'; 'in 2019' but not '2019 followers'), and a *lenient* one used when
the text is already known to be a time phrase (:func:`gravity_core.temporal.normalize`). A resolver
turns a match into a :class:`Hit`, or ``None`` to reject the match (e.g. 'the last week of June').
All patterns are immutable module constants; nothing is compiled per call.
"""

from __future__ import annotations

from gravity_core.temporal.rules.base import Hit, Rule
from gravity_core.temporal.rules.dates import (
    DAY_MONTH_YEAR,
    DAY_OF_MONTH,
    ISO,
    MONTH,
    MONTH_DAY_YEAR,
    MONTH_YEAR,
    NUMERIC,
    WEEK_OF,
)
from gravity_core.temporal.rules.named import DECADE, HOLIDAY, SEASON, YEAR
from gravity_core.temporal.rules.offsets import AGO, COMING, IN_FUTURE, RECENT, ROLLING, VAGUE
from gravity_core.temporal.rules.relative import BEFORE_LAST, CALENDAR, DAYWORD, WEEKDAY, WEEKEND

__all__ = ["RULES", "Hit", "Rule"]

# Order breaks ties between matches of equal start and length: earlier rules win
# ('this past week' is the rolling 7 days, not the calendar week).
RULES: tuple[Rule, ...] = (
    ISO,
    NUMERIC,
    DAY_MONTH_YEAR,
    MONTH_DAY_YEAR,
    MONTH_YEAR,
    DAYWORD,
    BEFORE_LAST,
    WEEK_OF,
    AGO,
    IN_FUTURE,
    ROLLING,
    COMING,
    HOLIDAY,
    CALENDAR,
    SEASON,
    MONTH,
    WEEKEND,
    WEEKDAY,
    DAY_OF_MONTH,
    DECADE,
    YEAR,
    RECENT,
    VAGUE,
)
