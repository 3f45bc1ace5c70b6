"""One turn of a conversation: the only input of the build phase."""

from __future__ import annotations

from datetime import UTC, date, datetime, time

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["Utterance"]


class Utterance(BaseModel):
    """A single utterance (turn) of a conversation.

    ``timestamp`` is timezone-aware; a plain date is accepted and stored as midnight UTC.
    ``attachments`` hold text the extractor can read in place of non-text content, such as
    the caption of a shared photo.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, description="Unique id of the utterance, e.g. 'D1:3'.")
    speaker: str = Field(min_length=1)
    text: str
    session: str = Field(min_length=1, description="Id of the session the utterance belongs to.")
    timestamp: datetime = Field(description="When the utterance (or its session) took place.")
    attachments: list[str] = Field(default_factory=list)

    @field_validator("timestamp", mode="before")
    @classmethod
    def _aware(cls, value: object) -> object:
        if isinstance(value, str) and len(value) == 10:
            value = date.fromisoformat(value)
        if isinstance(value, date) and not isinstance(value, datetime):
            return datetime.combine(value, time(0, 0), tzinfo=UTC)
        if isinstance(value, datetime) and value.tzinfo is None:
            raise ValueError("a timezone-aware datetime or a plain date is expected")
        return value

    @property
    def day(self) -> date:
        """The calendar day of the utterance."""
        return self.timestamp.date()

    def full_text(self) -> str:
        """The text with attachment descriptions appended, as extractors read it."""
        if not self.attachments:
            return self.text
        shared = "; ".join(self.attachments)
        return f"{self.text} [shared: {shared}]"
