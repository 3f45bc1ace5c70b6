"""Parse session timestamps: LoCoMo's '1:56 pm on 8 May, 2023', LongMemEval's '2023/05/20 (Sat) 02:21'."""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime

from gravity_core.temporal.lexicon import MONTHS

__all__ = ["parse_timestamp"]

logger = logging.getLogger(__name__)

_LOCOMO = re.compile(
    r"^(?P<h>\d{1,2})[:.](?P<mi>\d{2})\s*(?P<ap>[ap])\.?\s*m\.?\s+on\s+(?P<d>\d{1,2})\s+(?P<mon>[a-z]+)\.?,?\s+"
    r"(?P<y>\d{4})$",
    re.IGNORECASE,
)
_SLASHED = re.compile(
    r"^(?P<y>\d{4})/(?P<mo>\d{1,2})/(?P<d>\d{1,2})\s*(?:\([a-z]{2,9}\))?"
    r"(?:\s*(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2}))?)?$",
    re.IGNORECASE,
)
_MAX_TIMESTAMP = 80
# An ISO date that Python refuses (month 13, day 32) is impossible, not another format: dateparser
# would read '2024-13-01' as 13 January 2024.
_ISO_DATE = re.compile(r"^[+-]?\d{4}-\d{2}-\d{2}(?:$|[T ])")


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_timestamp(text: str) -> datetime | None:
    """Parse a session timestamp into a timezone-aware datetime.

    Knows LoCoMo's '1:56 pm on 8 May, 2023', LongMemEval's '2023/05/20 (Sat) 02:21' and ISO 8601
    directly, and other absolute formats with a day, a month and a year through ``dateparser``.

    Args:
        text: The timestamp as written.

    Returns:
        The moment, in the text's own zone or UTC when the text has none; ``None`` when the text is
        not a full date (relative phrases such as 'yesterday' are not timestamps).
    """
    if not isinstance(text, str):
        return None
    s = " ".join(text.split())
    if not s or len(s) > _MAX_TIMESTAMP or not any(c.isdigit() for c in s):
        return None
    try:
        return _parse(s)
    except (ValueError, OverflowError) as exc:  # e.g. '31 February' or hour 25
        logger.debug("not a timestamp %r: %s", s, exc)
        return None


def _parse(s: str) -> datetime | None:
    m = _LOCOMO.match(s)
    if m is not None and m["mon"].lower() in MONTHS:
        hour = int(m["h"]) % 12 + (12 if m["ap"].lower() == "p" else 0)
        month = MONTHS[m["mon"].lower()]
        return datetime(int(m["y"]), month, int(m["d"]), hour, int(m["mi"]), tzinfo=UTC)
    m = _SLASHED.match(s)
    if m is not None:
        return datetime(
            int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"] or 0), int(m["mi"] or 0), int(m["s"] or 0),
            tzinfo=UTC,
        )  # fmt: skip
    try:
        return _aware(datetime.fromisoformat(s))
    except ValueError:
        if _ISO_DATE.match(s):
            raise
    return _with_dateparser(s)


def _with_dateparser(s: str) -> datetime | None:
    import dateparser  # slow import, only for unusual formats

    try:
        found = dateparser.parse(
            s,
            languages=["en"],
            settings={
                "PARSERS": ["custom-formats", "absolute-time"],
                "REQUIRE_PARTS": ["day", "month", "year"],
                "RETURN_AS_TIMEZONE_AWARE": True,
                "TIMEZONE": "UTC",
            },
        )
    except Exception as exc:  # dateparser raises assorted errors on odd input
        logger.debug("dateparser failed on %r: %s", s, exc)
        return None
    return _aware(found) if found is not None else None
