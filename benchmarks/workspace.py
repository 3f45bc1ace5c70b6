"""Objects several benchmarks need, made once per run: the encoder, the seed KB, grown KBs, Chroma stores."""

from __future__ import annotations

import contextlib
import itertools
import logging
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.common import BenchSettings, load_questions, make_embedder
from benchmarks.synthetic import GrownKB, grow_kb, grow_streamed
from gravity_core.build.builder import AnchorBuilder
from gravity_core.embeddings.base import Embedder, Matrix
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders.locomo import load_locomo
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import NumpyAnchorIndex
from gravity_core.schema import KnowledgeBase, Utterance
from gravity_core.storage.anchor_vectors import EXPANSION_KIND, AnchorVectors
from gravity_core.storage.store import AnchorStore
from gravity_core.text.nlp import load_pipeline

if TYPE_CHECKING:
    from langchain_chroma import Chroma
    from langchain_core.embeddings import Embeddings

__all__ = ["HostCollection", "SavedKB", "Workspace", "build_offline", "turn_text"]

logger = logging.getLogger(__name__)


def turn_text(utterance: Utterance) -> str:
    """How a host memory stores a turn, and what counts as the conversation's own text: ``speaker: text``."""
    return f"{utterance.speaker}: {utterance.full_text()}"


def build_offline(
    utterances: Sequence[Utterance],
    embedder: Embedder,
    store: AnchorStore | None = None,
    pipeline: Any = None,
    cache_dir: Path | None = None,
) -> AnchorBuilder:
    """A KB built by a fresh offline extractor (no state carries over), saved to ``store`` if given.

    With a store, or a ``cache_dir``, the extractor keeps its parses and answers there, as ``gravity
    build`` does. ``pipeline``: a loaded spaCy pipeline to share (a process loads it once); ``None``
    loads one.
    """
    caches = store.cache_dir if store is not None else cache_dir
    extractor = (
        OfflineExtractor.kept_in(caches, embedder, pipeline=pipeline)
        if caches is not None
        else OfflineExtractor(embedder, pipeline=pipeline)
    )
    builder = AnchorBuilder(extractor, embedder, store=store)
    builder.add(utterances)
    if store is None:
        builder.save()
    return builder


@dataclass(frozen=True)
class SavedKB:
    """A grown KB saved part by part (never held as models), its vectors and what the save took."""

    folder: Path
    anchors: int
    vectors: AnchorVectors
    save_seconds: float


class Workspace:
    """Lazily built, shared inputs of one benchmark run.

    Args:
        settings: the run's settings.
        root: a scratch folder (KBs saved for the memory benchmark go there).
    """

    def __init__(self, settings: BenchSettings, root: Path) -> None:
        self.settings = settings
        self.root = root
        self._grown: dict[tuple[int, bool], GrownKB] = {}
        self._saved: dict[int, SavedKB] = {}
        self._names = itertools.count()

    @cached_property
    def nlp(self) -> Any:
        """The offline extractor's spaCy pipeline, loaded once per run (as a process does)."""
        return load_pipeline()

    @cached_property
    def embedder(self) -> Embedder:
        """The encoder, loaded and warmed up."""
        embedder = make_embedder(self.settings.embedder)
        embedder.embed(["warm up the encoder"])
        return embedder

    @cached_property
    def utterances(self) -> list[Utterance]:
        """The turns of the seed sample."""
        return load_locomo(self.settings.locomo, self.settings.sample)

    @cached_property
    def seed(self) -> tuple[KnowledgeBase, AnchorVectors]:
        """The seed sample's KB, built offline with the encoder, and its vectors."""
        builder = build_offline(self.utterances, self.embedder, pipeline=self.nlp)
        logger.info(
            "seed KB %s: %d entities, %d events, %d topics",
            self.settings.sample,
            len(builder.kb.entities),
            len(builder.kb.events),
            len(builder.kb.topics),
        )
        return builder.kb, builder.vectors

    @cached_property
    def turns(self) -> tuple[list[str], list[str], Matrix]:
        """Ids, texts (``speaker: text``) and vectors of the seed sample's turns, as a host stores them."""
        texts = [turn_text(u) for u in self.utterances]
        return (
            [u.id for u in self.utterances],
            texts,
            np.asarray(self.embedder.embed(texts), dtype=np.float32),
        )

    @cached_property
    def questions(self) -> tuple[list[str], Matrix]:
        """The seed sample's questions (categories 1-4) and their vectors."""
        questions = load_questions(self.settings.locomo, self.settings.sample, self.settings.max_questions)
        return questions, np.asarray(self.embedder.embed(questions), dtype=np.float32)

    def grown(self, anchors: int, *, rename: bool = True) -> GrownKB:
        """The seed KB grown to about ``anchors`` anchors (cached, see ``grow_kb``)."""
        key = (anchors, rename)
        if key not in self._grown:
            kb, vectors = self.seed
            self._grown[key] = grow_kb(
                kb, vectors, anchors, rename=rename, noise=self.settings.noise, seed=self.settings.seed
            )
        return self._grown[key]

    def forget(self, anchors: int) -> None:
        """Drop the cached grown KBs of that size (the 100k ones hold a few hundred MB each)."""
        for rename in (True, False):
            self._grown.pop((anchors, rename), None)

    def saved(self, anchors: int) -> SavedKB:
        """The seed KB grown to about ``anchors`` anchors and saved to a folder part by part (cached;
        see ``grow_streamed``: no turn vectors), for sizes too large to hold as models."""
        if anchors not in self._saved:
            kb, vectors = self.seed
            streamed, grown = grow_streamed(
                kb, vectors, anchors, noise=self.settings.noise, seed=self.settings.seed
            )
            folder = self.root / f"saved-kb-{anchors}"
            started = time.perf_counter()
            AnchorStore(folder).save(streamed, grown)
            self._saved[anchors] = SavedKB(folder, streamed.anchors, grown, time.perf_counter() - started)
        return self._saved[anchors]

    def forget_saved(self, anchors: int) -> None:
        """Delete the saved KB of that size (5 GB at 1M anchors) and drop its vectors."""
        saved = self._saved.pop(anchors, None)
        if saved is not None:
            shutil.rmtree(saved.folder, ignore_errors=True)

    def engine(
        self, kb: KnowledgeBase, vectors: AnchorVectors, embedder: Embedder | None = None
    ) -> GravityEngine:
        """An engine over ``kb`` with the in-process numpy index (all per-KB structures built here)."""
        return GravityEngine(
            kb,
            NumpyAnchorIndex.from_vectors(vectors),
            embedder or self.embedder,
            expansion_vectors=vectors.get(EXPANSION_KIND),
        )

    @contextlib.contextmanager
    def chroma(self, ids: Sequence[str], texts: Sequence[str], vectors: Matrix) -> Iterator[HostCollection]:
        """An embedded (in-memory) chromadb collection holding the given rows, deleted on exit.

        The rows' vectors are written as given: nothing is embedded here.
        """
        import chromadb
        from chromadb.config import Settings

        client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
        name = f"bench-host-{next(self._names)}"
        collection = client.create_collection(name, metadata={"hnsw:space": "cosine"})
        step = int(client.get_max_batch_size())
        for start in range(0, len(ids), step):
            stop = start + step
            metadatas: list[Any] = [{"turn": i} for i in ids[start:stop]]
            collection.add(
                ids=list(ids[start:stop]),
                embeddings=np.asarray(vectors[start:stop], dtype=np.float32),
                documents=list(texts[start:stop]),
                metadatas=metadatas,
            )
        try:
            yield HostCollection(client, name)
        finally:
            client.delete_collection(name)


class HostCollection:
    """A chromadb collection the host's LangChain stores are opened on."""

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = name

    def store(self, embeddings: Embeddings, store_class: type[Chroma] | None = None) -> Chroma:
        """A langchain-chroma ``Chroma`` (or ``store_class``, a subclass) over the collection that
        embeds queries with ``embeddings``."""
        from langchain_chroma import Chroma

        made = store_class or Chroma
        return made(client=self.client, collection_name=self.name, embedding_function=embeddings)
