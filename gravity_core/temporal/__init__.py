"""Temporal normalization: ground relative time phrases in the session date.

Every time phrase in a conversation ('yesterday', 'last Friday', 'two weeks ago') is resolved against
the session timestamp into an absolute, inclusive day interval (:class:`~gravity_core.schema.TimeRef`),
keeping the phrase as written. Detection is a regex grammar (:mod:`.rules`) and resolution is plain
date arithmetic; ``dateparser`` is only used for timestamps and explicit dates the grammar does not
know, since it costs milliseconds per call.

Conventions:

- Weeks run Monday to Sunday. 'last week' is the previous Monday-Sunday week, 'this week' the
  current one, 'next week' the following one; 'N weeks ago' is the week holding the day 7N days back.
- 'last weekend' is Saturday-Sunday of the previous week; 'this weekend' / 'next weekend' the one of
  the current / following week; 'over the weekend' the weekend we are in, else the one just past.
- 'last Friday' is the latest Friday strictly before the reference; 'this Friday' the Friday of the
  current week; 'next Friday' the Friday of the following week; 'this coming Friday' the first
  Friday after the reference.
- Ambiguous phrases without 'last'/'next' ('on Friday', 'in May', 'May 8th', 'in the summer',
  'on the 8th', 'at Christmas') take the latest occurrence on or before the reference (the reference
  month for months): conversations mostly report past events. When the sentence speaks of plans
  ('will', "I'll", 'going to', 'planning to'...) and has no past-tense cue, they take the first
  occurrence on or after it instead. :func:`normalize` takes ``prefer`` to force either reading.
- 'last May' is the latest May before the reference month, 'this May' the May of the reference year,
  'next May' the first May after the reference month.
- Seasons are northern-hemisphere meteorological seasons: spring March-May, summer June-August,
  autumn/fall September-November, winter December-February; the winter of year Y starts in December
  of Y. 'this summer' is the summer containing, else closest to, the reference; 'last summer' the latest
  one already over; 'next summer' the one after 'this summer'.
- 'recently' / 'lately' are the 30 days up to and including the reference (RANGE); 'the other day'
  the 7 days before it. 'a while ago', 'years ago', 'long ago' are found but stay unresolved.
- Vague counts are ranges: 'a couple of' = 2-3, 'a few' = 2-4, 'several' = 3-6, 'a handful of' = 3-5
  units, and 'a day or two' = 1-2 days; 'a few weeks ago' spans the weeks 4 to 2 weeks back.
- 'the past two weeks' / 'the last few months' are the span up to the reference (RANGE); 'the next
  two weeks' the span after it; 'in two weeks' (in a sentence about plans) the week two weeks ahead.
- 'since X' is the range from the start of X to the reference; 'early' / 'mid' / 'late' / 'the
  beginning of' / 'the end of' take the first / middle / last third of a month, season, year or week;
  'earlier this year' is the range from 1 January to the reference, 'later this year' from it to the end.
- Bare years (1900-2099) are taken only after a preposition ('in 2022', 'since 2019', 'from 2019 to
  2021'); decades only as '1990s' or "the '90s" ('in the 90s' is often a temperature).
- In free text, 'may' and 'march' count as months only capitalised and with context ('in May',
  'May 8th', 'last May'); bare months and seasons need a preposition ('in June', 'over the summer').
- Numeric dates are year-first ISO ('2023-05-08') or month-first ('5/8/2023', day-first when the first
  number is above 12). Holidays: Christmas (Eve), New Year's (Eve), Halloween, Valentine's Day,
  Easter, Independence Day, Thanksgiving (US, fourth Thursday of November).
"""

from __future__ import annotations

from datetime import date, datetime

from gravity_core.temporal.context import split_reference
from gravity_core.temporal.mention import TimeMention
from gravity_core.temporal.normalize import normalize
from gravity_core.temporal.scan import scan as _scan
from gravity_core.temporal.timestamp import parse_timestamp

__all__ = ["TimeMention", "find_time_expressions", "normalize", "parse_timestamp"]


def find_time_expressions(text: str, reference: date | datetime) -> list[TimeMention]:
    """Find and resolve every time expression in a text.

    Expressions are found leftmost-longest and never overlap; they are returned in text order.
    Non-temporal uses are skipped: 'I may go', 'the last time we met', 'wait a second', numbers that
    are not years. Vague phrases ('a while ago') are returned unresolved.

    Args:
        text: Free text, e.g. one utterance.
        reference: The session date (or timestamp) the text was said at.

    Returns:
        One :class:`TimeMention` per expression; ``mention.time.raw == mention.text``.

    Raises:
        ConfigurationError: ``reference`` is not a date or datetime.
    """
    ref, ref_dt = split_reference(reference)
    if not isinstance(text, str) or not text:
        return []
    return _scan(text, ref, ref_dt, strict=True)
