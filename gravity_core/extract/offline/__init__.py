"""The offline extractor: GRAVITY's embedded default, no model needed.

Entities and events come from patterns over the text; topics from embedding-based segmentation
of each session, linked across sessions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from gravity_core.embeddings.base import Embedder
from gravity_core.extract.offline.entities import extract_entities
from gravity_core.extract.offline.events import extract_events
from gravity_core.extract.offline.summaries import summarize_batch
from gravity_core.extract.offline.topics import TopicExtractor
from gravity_core.schema import AnchorUpdate, KnowledgeBase, Utterance

__all__ = ["OfflineExtractor"]


class OfflineExtractor:
    """Deterministic extractor of all three anchor kinds from plain text.

    Args:
        embedder: used for topic segmentation and linking (the KB's anchor embedder is a good choice).
    """

    def __init__(self, embedder: Embedder) -> None:
        self._topics = TopicExtractor(embedder)
        self._name = f"offline-v1:{embedder.name}"
        self._embedder_name = embedder.name

    @property
    def name(self) -> str:
        """Identifier recorded in the KB's build info."""
        return self._name

    @property
    def turn_embedder(self) -> str:
        """The embedder of topic segmentation: turn vectors are read only if they come from it."""
        return self._embedder_name

    def use_turn_vectors(self, vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        """Turn embeddings by text, read by topic segmentation instead of embedding the turns again."""
        self._topics.use_vectors(vectors)

    def extract(self, batch: Sequence[Utterance], kb: KnowledgeBase) -> AnchorUpdate:
        """Entities, events and topics found in ``batch``, plus its extractive summary (+Sum baseline)."""
        return AnchorUpdate(
            entities=extract_entities(batch, kb),
            events=extract_events(batch, kb),
            topics=self._topics.extract(batch, kb),
            summaries=summarize_batch(batch),
        )
