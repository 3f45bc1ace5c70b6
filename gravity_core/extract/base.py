"""The extractor interface: a batch of utterances plus the current KB in, anchor updates out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from gravity_core.schema import AnchorUpdate, KnowledgeBase, Utterance

__all__ = ["Extractor"]


@runtime_checkable
class Extractor(Protocol):
    """Reads one batch of utterances and reports what it found.

    The KB is read-only context (known entities and topics, to reuse names and ids); extractors
    never modify it.
    """

    @property
    def name(self) -> str:
        """Identifier recorded in the KB's build info."""
        ...

    def extract(self, batch: Sequence[Utterance], kb: KnowledgeBase) -> AnchorUpdate:
        """Return the observations found in ``batch``."""
        ...
