"""The extractor interface: a batch of utterances plus the current KB in, anchor updates out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from gravity_core.schema import AnchorUpdate, KnowledgeBase, Utterance

if TYPE_CHECKING:
    from gravity_core.llm.cache import ResponseCache

__all__ = ["Extractor", "ResponseCaching", "TurnVectorReader"]


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
class ResponseCaching(Protocol):
    """An extractor that keeps its model's answers in a :class:`~gravity_core.llm.cache.ResponseCache`.

    A forget prunes that cache to the entries its rebuild used: the others answered prompts that
    held the forgotten text.
    """

    cache: ResponseCache | None
