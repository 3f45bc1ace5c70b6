"""The value :func:`gravity_core.temporal.find_time_expressions` returns for each time phrase."""

from __future__ import annotations

from dataclasses import dataclass

from gravity_core.schema.time import TimeRef

__all__ = ["TimeMention"]


@dataclass(frozen=True, slots=True)
class TimeMention:
    """A time expression found in a text.

    Attributes:
        start: Offset of the first character of the expression in the text.
        end: Offset just past its last character (``text == source[start:end]``).
        text: The expression as written.
        time: The expression resolved against the reference date (``time.raw == text``).
    """

    start: int
    end: int
    text: str
    time: TimeRef
