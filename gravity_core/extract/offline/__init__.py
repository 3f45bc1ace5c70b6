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
from gravity_core.extract.offline.parsing import noun_phrases, parse_batch, parsed_texts
from gravity_core.extract.offline.summaries import summarize_batch
from gravity_core.extract.offline.topics import TopicExtractor
from gravity_core.extract.update_cache import UPDATES, UpdateCache
from gravity_core.schema import AnchorUpdate, EntityType, KnowledgeBase, Utterance
from gravity_core.schema.lineage import batch_key
from gravity_core.storage.file_cache import RecordedFiles
from gravity_core.text.nlp import load_pipeline, pipeline_id

__all__ = ["OfflineExtractor", "ParseCache", "parse_cache_of"]


def parse_cache_of(cache_dir: str | os.PathLike[str]) -> ParseCache:
    """The parse cache inside a KB's model cache folder (``AnchorStore.cache_dir``)."""
    return ParseCache(Path(cache_dir) / PARSES)


class OfflineExtractor:
    """Deterministic extractor of all three anchor kinds from plain text.

    Args:
        embedder: used for topic segmentation and linking (the KB's anchor embedder is a good choice).
        pipeline: the spaCy pipeline: an installed package name or folder, or a loaded ``Language``;
            ``None`` for the default (see :func:`gravity_core.text.nlp.load_pipeline`). A name is loaded on
            first use.
        parses: where parsed batches are kept (a KB's ``cache/parses``: :func:`parse_cache_of`), so a
            rebuild after a forget parses only the batches it changed.
        updates: where the answers to batches are kept (a KB's ``cache/updates``), so a rebuild
            after a forget extracts only the batches after the first one it changed.

    :meth:`kept_in` makes one with both caches in a KB's cache folder, as ``gravity build`` does.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        pipeline: str | Any | None = None,
        parses: ParseCache | None = None,
        updates: UpdateCache | None = None,
    ) -> None:
        self.parses = parses
        self.updates = updates
        self._topics = TopicExtractor(embedder)
        self._embedder_name = embedder.name
        named = pipeline is None or isinstance(pipeline, str)
        self._pipeline_name: str | None = pipeline if named else None
        self._nlp: Any | None = None if named else pipeline

    @classmethod
    def kept_in(
        cls, cache_dir: str | os.PathLike[str], embedder: Embedder, *, pipeline: str | Any | None = None
    ) -> OfflineExtractor:
        """An extractor keeping parses and answers in a KB's cache folder (``AnchorStore.cache_dir``)."""
        return cls(
            embedder,
            pipeline=pipeline,
            parses=parse_cache_of(cache_dir),
            updates=UpdateCache(Path(cache_dir) / UPDATES),
        )

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
        """The file caches a forget prunes: the parse and update caches it has."""
        return [cache for cache in (self.parses, self.updates) if cache is not None]

    @property
    def turn_embedder(self) -> str:
        """The embedder of topic segmentation: turn vectors are read only if they come from it."""
        return self._embedder_name

    def use_turn_vectors(self, vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        """Turn embeddings by text, read by topic segmentation instead of embedding the turns again."""
        self._topics.use_vectors(vectors)

    def extract(self, batch: Sequence[Utterance], kb: KnowledgeBase) -> AnchorUpdate:
        """Entities, events and topics found in ``batch``, plus its extractive summary (+Sum baseline)."""
        updates = self.updates
        key = batch_key(kb, self.name, batch) if updates is not None else None
        if updates is None or key is None:
            return self._extract(batch, kb)
        kept = updates.get(key)
        if kept is not None:
            if self.parses is not None:
                self.parses.keep(pipeline_id(self.nlp), parsed_texts(batch))
            return kept
        update = self._extract(batch, kb)
        updates.put(key, update)
        return update

    def _extract(self, batch: Sequence[Utterance], kb: KnowledgeBase) -> AnchorUpdate:
        turns = parse_batch(self.nlp, batch, self.parses, pipeline_id(self.nlp) if self.parses else "")
        entities = extract_entities(turns, kb)
        people = entity_names(entities, EntityType.PERSON, EntityType.PET)
        return AnchorUpdate(
            entities=entities,
            events=extract_events(turns, kb, people),
            topics=self._topics.extract(batch, kb, {t.utterance.id: noun_phrases(t) for t in turns}),
            summaries=summarize_batch(batch),
        )
