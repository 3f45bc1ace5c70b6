"""The offline extractor: GRAVITY's embedded default, no model needed.

Entities and events come from a spaCy parse of each turn (entity spans and types, subjects,
objects, appositions); topics from embedding-based segmentation of each session, linked across
sessions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gravity_core.embeddings.base import Embedder
from gravity_core.extract.offline.entities import entity_names, extract_entities
from gravity_core.extract.offline.events import extract_events
from gravity_core.extract.offline.parse_cache import PARSES, ParseCache
from gravity_core.extract.offline.parsing import noun_phrases, parse_batch
from gravity_core.extract.offline.summaries import summarize_batch
from gravity_core.extract.offline.topics import TopicExtractor
from gravity_core.file_cache import RecordedFiles
from gravity_core.nlp import load_pipeline, pipeline_id
from gravity_core.schema import AnchorUpdate, EntityType, KnowledgeBase, Utterance

__all__ = ["OfflineExtractor", "ParseCache", "parse_cache_of"]


def parse_cache_of(cache_dir: str | os.PathLike[str]) -> ParseCache:
    """The parse cache inside a KB's model cache folder (``AnchorStore.cache_dir``)."""
    return ParseCache(Path(cache_dir) / PARSES)


class OfflineExtractor:
    """Deterministic extractor of all three anchor kinds from plain text.

    Args:
        embedder: used for topic segmentation and linking (the KB's anchor embedder is a good choice).
        pipeline: the spaCy pipeline: an installed package name or folder, or a loaded ``Language``;
            ``None`` for the default (see :func:`gravity_core.nlp.load_pipeline`). A name is loaded on
            first use.
        parses: where parsed batches are kept (a KB's ``cache/parses``: :func:`parse_cache_of`), so a
            rebuild after a forget parses only the batches it changed.
    """

    def __init__(
        self, embedder: Embedder, *, pipeline: str | Any | None = None, parses: ParseCache | None = None
    ) -> None:
        self.parses = parses
        self._topics = TopicExtractor(embedder)
        self._embedder_name = embedder.name
        named = pipeline is None or isinstance(pipeline, str)
        self._pipeline_name: str | None = pipeline if named else None
        self._nlp: Any | None = None if named else pipeline

    @property
    def name(self) -> str:
        """Identifier recorded in the KB's build info: version, parser pipeline and embedder."""
        return f"offline-v2:{pipeline_id(self.nlp)}:{self._embedder_name}"

    @property
    def nlp(self) -> Any:
        """The spaCy ``Language`` (loaded on first use)."""
        if self._nlp is None:
            self._nlp = load_pipeline(self._pipeline_name)
        return self._nlp

    def caches(self) -> list[RecordedFiles]:
        """The file caches a forget prunes: the parse cache, if any."""
        return [self.parses] if self.parses is not None else []

    @property
    def turn_embedder(self) -> str:
        """The embedder of topic segmentation: turn vectors are read only if they come from it."""
        return self._embedder_name

    def use_turn_vectors(self, vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        """Turn embeddings by text, read by topic segmentation instead of embedding the turns again."""
        self._topics.use_vectors(vectors)

    def extract(self, batch: Sequence[Utterance], kb: KnowledgeBase) -> AnchorUpdate:
        """Entities, events and topics found in ``batch``, plus its extractive summary (+Sum baseline)."""
        turns = parse_batch(self.nlp, batch, self.parses, pipeline_id(self.nlp) if self.parses else "")
        entities = extract_entities(turns, kb)
        people = entity_names(entities, EntityType.PERSON, EntityType.PET)
        return AnchorUpdate(
            entities=entities,
            events=extract_events(turns, kb, people),
            topics=self._topics.extract(batch, kb, {t.utterance.id: noun_phrases(t) for t in turns}),
            summaries=summarize_batch(batch),
        )
