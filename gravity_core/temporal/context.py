"""What a resolver knows besides its match: the reference time, the text, and the tense around a phrase."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

from gravity_core.errors import ConfigurationError

__all__ = ["Direction", "ScanContext", "infer_direction", "split_reference", "tense_cue"]

Direction = Literal["past", "future"]

_FUTURE_CUE = re.compile(
    r"\b(?:will|won['’]t|shall|going\s+to|gonna|plan(?:s|ning)?\s+(?:to|on)|planning|can['’]t\s+wait"
    r"|looking\s+forward|hop(?:e|ing)\s+to|about\s+to|upcoming|intend(?:s|ing)?\s+to|plans?\s+for)\b"
    r"|['’]ll\b",
    re.IGNORECASE,
)
_PAST_CUE = re.compile(
    r"\b(?:was|were|did|had|went|ago|ran|saw|got|took|made|met|came|gave|found|told|said|thought|felt|bought"
    r"|brought|began|won|lost|left|kept|heard|wrote|spent|sent|built|drove|flew|ate|drank|sang|swam|wore|sat"
    r"|stood|slept|caught|taught|fought|paid|held|knew|grew|threw|chose|broke|forgot|became|rode|sold|hung"
    r"|(?!(?:excit|interest|tir|scar|worri|pleas|thrill|stress|bor|suppos"
    r"|us|marri|engag|plann|schedul|need|bless|determin|prepar|inspir|motivat)ed\b)[a-z]{2,}[a-df-z]ed)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?\n]")


def tense_cue(sentence: str) -> Direction | None:
    """'past' or 'future' when the sentence has a tense cue for it, else None (present or unclear)."""
    if _PAST_CUE.search(sentence):
        return "past"
    if _FUTURE_CUE.search(sentence):
        return "future"
    return None


def infer_direction(sentence: str) -> Direction:
    """'future' when the sentence speaks of plans ('will', "I'll", 'going to'...) and has no past-tense cue.

    A cheap tense heuristic used only to place ambiguous phrases ('in June', 'on Friday') before or
    after the reference date; everything defaults to the past, as conversations mostly report events.
    """
    if _FUTURE_CUE.search(sentence) and not _PAST_CUE.search(sentence):
        return "future"
    return "past"


@dataclass(frozen=True, slots=True)
class ScanContext:
    """One scan of one text against one reference.

    Attributes:
        text: The text being scanned.
        ref: The reference (session) date.
        ref_dt: The reference as a datetime when one was given (for 'three hours ago').
        strict: Free-text mode: demand context around ambiguous words ('in May', not 'may').
            ``False`` when the text is known to be a time phrase (:func:`normalize`).
        prefer: Force a direction for ambiguous phrases instead of inferring it from the tense.
    """

    text: str
    ref: date
    ref_dt: datetime | None
    strict: bool
    prefer: Direction | None = None

    def direction_at(self, pos: int) -> Direction:
        """Past or future reading for an ambiguous phrase at ``pos``, from its sentence's tense."""
        if self.prefer is not None:
            return self.prefer
        return infer_direction(self._sentence_at(pos))

    def cue_at(self, pos: int) -> Direction | None:
        """The forced direction, else the tense cue of the sentence at ``pos`` (None: no cue)."""
        if self.prefer is not None:
            return self.prefer
        return tense_cue(self._sentence_at(pos))

    def _sentence_at(self, pos: int) -> str:
        text = self.text
        begin = 0
        for m in _SENTENCE_END.finditer(text, 0, pos):
            begin = m.end()
        after = _SENTENCE_END.search(text, pos)
        return text[begin : after.start() if after else len(text)]


def split_reference(reference: date | datetime) -> tuple[date, datetime | None]:
    """The reference as (date, datetime or None).

    Raises:
        ConfigurationError: ``reference`` is not a date or datetime.
    """
    if isinstance(reference, datetime):
        return reference.date(), reference
    if isinstance(reference, date):
        return reference, None
    raise ConfigurationError(
        f"a time reference must be a datetime.date or datetime.datetime, got {type(reference).__name__}"
    )
