"""Normalized time: a raw phrase resolved to an absolute date or interval."""

from __future__ import annotations

from datetime import date
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Granularity", "TimeRef"]


class Granularity(StrEnum):
    """How precise a normalized time is."""

    DAY = "day"
    WEEK = "week"
    MONTH = "month"
    SEASON = "season"
    YEAR = "year"
    RANGE = "range"


class TimeRef(BaseModel):
    """A time expression as written, and the absolute interval it denotes.

    ``start`` and ``end`` are inclusive; for a single day they are equal. An expression that
    could not be resolved keeps ``raw`` with ``start``/``end`` left empty.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    raw: str = Field(description="The time phrase exactly as written, e.g. 'last Friday'.")
    start: date | None = Field(default=None, description="First day of the interval (inclusive).")
    end: date | None = Field(default=None, description="Last day of the interval (inclusive).")
    granularity: Granularity | None = Field(default=None, description="Precision of the interval.")
    reference: date | None = Field(
        default=None, description="The date the phrase was resolved against (the session date)."
    )
    basis: Literal["phrase", "mention"] = Field(
        default="phrase",
        description=(
            "'phrase': resolved from a time phrase in the text. 'mention': the text gave no time, so the "
            "interval is the day the event was mentioned (it happened then or shortly before)."
        ),
    )

    @model_validator(mode="after")
    def _ordered(self) -> TimeRef:
        if (self.start is None) != (self.end is None):
            raise ValueError("start and end must be given together")
        if self.start is not None and self.end is not None and self.start > self.end:
            raise ValueError(f"start {self.start} is after end {self.end}")
        return self

    @property
    def resolved(self) -> bool:
        """Whether the phrase was grounded to an absolute interval."""
        return self.start is not None

    def overlaps(self, start: date, end: date) -> bool:
        """Whether this interval shares at least one day with ``[start, end]``."""
        if self.start is None or self.end is None:
            return False
        return self.start <= end and start <= self.end

    @classmethod
    def mentioned_on(cls, day: date) -> TimeRef:
        """The fallback time of an event reported without a time phrase: the day it was mentioned."""
        return cls(raw="", start=day, end=day, granularity=Granularity.DAY, reference=day, basis="mention")

    def label(self) -> str:
        """A human-readable rendering of the interval, e.g. '7 May 2023' or 'May 2023'."""
        if self.start is None or self.end is None:
            return self.raw
        if self.basis == "mention":
            said = f"mentioned {self.start.day} {self.start:%B %Y}"
            return f"{self.raw}, {said}" if self.raw else said
        if self.granularity is Granularity.DAY or self.start == self.end:
            return f"{self.start.day} {self.start:%B %Y}"
        if self.granularity is Granularity.MONTH:
            return f"{self.start:%B %Y}"
        if self.granularity is Granularity.YEAR:
            return f"{self.start.year}"
        return f"{self.start.day} {self.start:%B %Y} to {self.end.day} {self.end:%B %Y}"
