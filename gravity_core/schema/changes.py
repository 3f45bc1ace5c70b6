"""Which parts of a KB changed since it was last written: what a checkpoint journals.

The merge steps note every utterance, entity, event, topic and summary they add or change
(:func:`~gravity_core.build.merge.apply_update`); the builder notes the build log. A checkpoint
then writes only those (:mod:`gravity_core.storage.journal`), so its cost follows what changed, not the
size of the KB.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["PARTS", "KBChanges"]

#: The KB's parts of anchors and utterances, keyed by id (``build`` is noted apart).
PARTS = ("utterances", "entities", "events", "topics", "summaries")


@dataclass
class KBChanges:
    """Ids changed per part, in the order they first changed (new ones in the order they were made)."""

    utterances: dict[str, None] = field(default_factory=dict)
    entities: dict[str, None] = field(default_factory=dict)
    events: dict[str, None] = field(default_factory=dict)
    topics: dict[str, None] = field(default_factory=dict)
    summaries: dict[str, None] = field(default_factory=dict)
    build: bool = False

    def note(self, part: str, ids: Iterable[str]) -> None:
        """``ids`` of ``part`` (one of :data:`PARTS`) changed."""
        seen: dict[str, None] = getattr(self, part)
        for i in ids:
            seen.setdefault(i, None)

    def __bool__(self) -> bool:
        return self.build or any(getattr(self, part) for part in PARTS)

    def add(self, other: KBChanges) -> None:
        """Note what ``other`` names too."""
        for part in PARTS:
            self.note(part, getattr(other, part))
        self.build = self.build or other.build

    def clear(self) -> None:
        """Forget everything noted (after a checkpoint wrote it)."""
        for part in PARTS:
            getattr(self, part).clear()
        self.build = False
