"""Timestamp values of conversation input as timezone-aware datetimes, or an InputDataError saying why not.

Conversation files give strings (:func:`aware_timestamp`); chat messages, read by the LangChain and
LlamaIndex adapters, may also carry datetimes, dates and Unix times (:func:`read_timestamp`). Both
keep to what a datetime can hold in UTC: years 1 to 9999. A Unix time is therefore a finite
number of seconds in ``[MIN_EPOCH_SECONDS, MAX_EPOCH_SECONDS)``; ``True`` and ``False`` are not
numbers here. Nothing else than :class:`~gravity_core.errors.InputDataError` leaves these functions
(``datetime.fromtimestamp`` raised ``OverflowError`` for ``1e20`` and ``ValueError`` for ``nan``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from numbers import Real

from gravity_core.errors import InputDataError
from gravity_core.loaders._common import Where, brief_repr, json_type
from gravity_core.temporal import parse_timestamp

__all__ = [
    "MAX_EPOCH_SECONDS",
    "MESSAGE_TIMESTAMP_FORMS",
    "MIN_EPOCH_SECONDS",
    "aware_timestamp",
    "epoch_timestamp",
    "read_timestamp",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

MIN_EPOCH_SECONDS = -62_135_596_800
"""0001-01-01T00:00:00Z as a Unix time: the earliest accepted."""

MAX_EPOCH_SECONDS = 253_402_300_800
"""10000-01-01T00:00:00Z as a Unix time: the first refused (the last accepted second is in 9999)."""

_FILE_FORMS = (
    "an ISO 8601 datetime or date (e.g. '2024-03-09T16:45:00Z', '2024-03-09') "
    "or a date like '1:56 pm on 8 May, 2023'"
)

MESSAGE_TIMESTAMP_FORMS = (
    "a datetime, a date, an ISO 8601 string (e.g. '2024-03-09T16:45:00Z') "
    f"or a Unix time in seconds from {MIN_EPOCH_SECONDS} to {MAX_EPOCH_SECONDS - 1} (years 1-9999)"
)
"""What :func:`read_timestamp` accepts, as its error messages word it."""

_Fail = Callable[[str], InputDataError]


def epoch_timestamp(seconds: object) -> datetime | None:
    """A Unix time (seconds since 1970-01-01 UTC) as a UTC datetime; ``None`` when it is not one.

    ``None`` for a bool, a non-number, NaN, an infinity, or a time outside years 1 to 9999. Any
    real number is accepted (int, float, ``numpy.float64``, ``Fraction``); a float keeps its
    microseconds.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, Real):
        return None
    try:
        value = float(seconds)
    except OverflowError:  # an int too large for a float
        return None
    if not MIN_EPOCH_SECONDS <= value < MAX_EPOCH_SECONDS:  # False for NaN and the infinities too
        return None
    try:
        # Plain arithmetic, not datetime.fromtimestamp: no platform limit (Windows refuses negatives).
        return _EPOCH + timedelta(seconds=value)
    except OverflowError:  # a float rounded up onto year 10000
        return None


def _from_string(value: str, expected: str, fail: _Fail) -> datetime:
    parsed = parse_timestamp(value)
    if parsed is None:
        raise fail(f"cannot read {brief_repr(value)} as a timestamp; expected {expected}")
    return _in_utc_range(parsed, value, fail)


def _in_utc_range(moment: datetime, value: object, fail: _Fail) -> datetime:
    """``moment`` with UTC for a missing zone, if it has a UTC equivalent in years 1-9999."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    try:
        aware.astimezone(UTC)  # '0001-01-01T00:00+05:00' is a valid datetime with no UTC equivalent
    except OverflowError as exc:
        raise fail(f"{brief_repr(value)} is out of the representable range (years 1-9999 in UTC)") from exc
    return aware


def aware_timestamp(value: object, where: Where, field: str, expected: str = _FILE_FORMS) -> datetime:
    """Turn a timestamp field of a conversation file into a timezone-aware datetime.

    Reads whatever :func:`gravity_core.temporal.parse_timestamp` reads: ISO 8601 datetimes and
    dates, LoCoMo's "1:56 pm on 8 May, 2023", LongMemEval's "2023/05/20 (Sat) 02:21", and other
    absolute dates. A timestamp without a zone is taken as UTC; a plain date as midnight UTC.
    Files spell times as strings: a number is refused.

    Args:
        value: the raw field value.
        where: the record, for error messages.
        field: the field name, for error messages.
        expected: the accepted forms, as the error message words them.

    Returns:
        The timestamp, timezone-aware.

    Raises:
        InputDataError: the value is not a string, cannot be read as a date, or has no UTC
            equivalent in years 1-9999.
    """

    def fail(message: str) -> InputDataError:
        return where.error(message, field=field)

    if not isinstance(value, str):
        raise fail(f"expected {expected}, got {json_type(value)}")
    return _from_string(value, expected, fail)


def read_timestamp(value: object, *, record: str | None = None, field: str | None = None) -> datetime:
    """Turn a timestamp a program handed over (a chat message's metadata) into an aware datetime.

    Accepted: a datetime (one without a zone is taken as UTC), a date (midnight UTC), a string
    :func:`gravity_core.temporal.parse_timestamp` reads (ISO 8601 first), or a Unix time in
    seconds (int or float, see :func:`epoch_timestamp`). The result has a UTC equivalent in years
    1 to 9999.

    Args:
        value: the value as found.
        record: which message it is, for the error message (e.g. ``"messages[3] (id 'm9')"``).
        field: where in the message, for the error message (e.g. ``additional_kwargs["timestamp"]``).

    Raises:
        InputDataError: the value is none of these, or out of range; the message names ``record``
            and ``field`` and what was expected.
    """

    def fail(message: str) -> InputDataError:
        return InputDataError(message, record=record, field=field)

    if isinstance(value, datetime):
        return _in_utc_range(value, value, fail)
    if isinstance(value, date):
        return datetime.combine(value, time(0, 0), tzinfo=UTC)
    if isinstance(value, bool):
        raise fail(f"expected {MESSAGE_TIMESTAMP_FORMS}, got the bool {value!r}")
    if isinstance(value, Real):
        moment = epoch_timestamp(value)
        if moment is None:
            raise fail(f"{brief_repr(value)} is not a usable Unix time; expected {MESSAGE_TIMESTAMP_FORMS}")
        return moment
    if isinstance(value, str):
        return _from_string(value, MESSAGE_TIMESTAMP_FORMS, fail)
    raise fail(f"expected {MESSAGE_TIMESTAMP_FORMS}, got {type(value).__name__}")
