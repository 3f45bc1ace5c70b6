"""The date a question is asked, as every integration accepts it."""

from __future__ import annotations

from datetime import date, datetime

from gravity_core.errors import ConfigurationError

__all__ = ["QUESTION_DATE_KEY", "as_question_date", "parse_iso_moment"]

QUESTION_DATE_KEY = "question_date"
"""The name under which both integrations take a question date (argument, configurable, metadata)."""


def as_question_date(value: object, argument: str = QUESTION_DATE_KEY) -> date | None:
    """``value`` as the date a question is asked: a ``date``, a ``datetime`` (its date) or an ISO string.

    Args:
        value: ``None``, a ``date``, a ``datetime`` or an ISO 8601 string (``"2024-06-01"``,
            ``"2024-06-01T09:30:00Z"``).
        argument: the argument's name, for the error message.

    Raises:
        ConfigurationError: anything else, or a string that is not an ISO date.
    """
    if value is None or (isinstance(value, date) and not isinstance(value, datetime)):
        return value
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, str):
        parsed = parse_iso_moment(value)
        if parsed is not None:
            return parsed.date() if isinstance(parsed, datetime) else parsed
    raise ConfigurationError(
        f"{argument} must be a date, a datetime or an ISO date string such as '2024-06-01'; got {value!r}"
    )


def parse_iso_moment(text: str) -> date | datetime | None:
    """``text`` (spaces around it ignored) as an ISO date, else an ISO datetime, else ``None``."""
    text = text.strip()
    try:
        return date.fromisoformat(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
