"""The extractor interface: a batch of utterances plus the current KB in, anchor updates out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from gravity_core.schema import AnchorUpdate, KnowledgeBase, Utterance

if TYPE_CHECKING:
    from gravity_core.storage.file_cache import RecordedFiles

__all__ = ["Extractor", "FileCaching", "SessionSpanning", "TurnVectorReader"]


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


@runtime_checkable
class TurnVectorReader(Protocol):
    """An extractor that reads turn embeddings (made with the KB's embedder).

    The builder embeds every new turn once, in one call before the first batch, keeps the vectors
    with the KB, and hands the extractor those of the whole conversation, so neither a batch nor a
    later incremental build embeds a turn again.
    """

    @property
    def turn_embedder(self) -> str:
        """Name of the embedder whose vectors it reads (only those are handed over)."""
        ...

    def use_turn_vectors(self, vectors: Mapping[str, npt.NDArray[np.float32]]) -> None:
        """Vectors by turn text (:meth:`~gravity_core.schema.Utterance.full_text`); replaces earlier ones."""
        ...


@runtime_checkable
class FileCaching(Protocol):
    """An extractor that keeps files in caches (model answers, parses) under the KB's ``cache/``.

    A forget records which entries its rebuild uses and deletes the others: they belong to the old
    build only and may hold the forgotten text.
    """

    def caches(self) -> list[RecordedFiles]:
        """The extractor's file caches."""
        ...


@runtime_checkable
class SessionSpanning(Protocol):
    """An extractor that says whether its batches may run across a session boundary.

    By default the builder never puts two sessions in one batch. An extractor whose prompt marks
    each session (the fused LLM extractor) can take batches filled up to the batch size instead,
    so short sessions share a model call.
    """

    @property
    def spans_sessions(self) -> bool:
        """True if a batch may hold the end of one session and the start of the next."""
        ...
