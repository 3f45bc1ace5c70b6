"""Embeddings of each anchor's compact text, computed at build time and stored beside the KB."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from gravity_core.anchor_text import entity_text, event_text, topic_text
from gravity_core.embeddings.base import Embedder, Matrix
from gravity_core.errors import ConfigurationError
from gravity_core.schema import AnchorKind, KnowledgeBase

__all__ = ["SUMMARY_KIND", "VECTOR_KINDS", "AnchorVectors", "KindVectors", "anchor_texts"]

logger = logging.getLogger(__name__)


#: Vectors are kept for the three anchor kinds and for the batch summaries of the '+Sum' baseline.
SUMMARY_KIND = "summary"
VECTOR_KINDS: tuple[str, ...] = (*(k.value for k in AnchorKind), SUMMARY_KIND)


def anchor_texts(kb: KnowledgeBase, kind: str) -> dict[str, str]:
    """Compact text of every anchor of ``kind`` (an AnchorKind or ``"summary"``), by id, in KB order."""
    render: Mapping[str, Callable[[KnowledgeBase], dict[str, str]]] = {
        AnchorKind.ENTITY: lambda k: {i: entity_text(a) for i, a in k.entities.items()},
        AnchorKind.EVENT: lambda k: {i: event_text(a) for i, a in k.events.items()},
        AnchorKind.TOPIC: lambda k: {i: topic_text(a) for i, a in k.topics.items()},
        SUMMARY_KIND: lambda k: {i: s.text for i, s in k.summaries.items()},
    }
    return render[kind](kb)


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


@dataclass
class KindVectors:
    """Vectors of one anchor kind: row ``i`` belongs to ``ids[i]``."""

    ids: list[str] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    matrix: Matrix = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))

    def row_of(self) -> dict[str, int]:
        """Anchor id -> row index."""
        return {anchor_id: i for i, anchor_id in enumerate(self.ids)}


@dataclass
class AnchorVectors:
    """The embedding matrices of all three anchor kinds, and the embedder that made them."""

    embedder: str = ""
    dim: int = 0
    kinds: dict[str, KindVectors] = field(default_factory=dict)

    def get(self, kind: str) -> KindVectors:
        """Vectors of one kind (empty when none were computed)."""
        return self.kinds.get(kind, KindVectors(matrix=np.zeros((0, self.dim), dtype=np.float32)))

    def refresh(self, kb: KnowledgeBase, embedder: Embedder) -> int:
        """Bring the vectors in line with the KB, embedding only anchors whose text changed.

        Returns:
            The number of texts embedded.

        Raises:
            ConfigurationError: the vectors were made by another embedder.
        """
        if self.embedder and self.embedder != embedder.name:
            msg = (
                f"the KB's anchor vectors were made by embedder '{self.embedder}', not '{embedder.name}'; "
                "query with the same embedder or rebuild the KB"
            )
            raise ConfigurationError(msg)
        self.embedder, self.dim = embedder.name, embedder.dim
        embedded = 0
        for kind in VECTOR_KINDS:
            texts = anchor_texts(kb, kind)
            old = self.get(kind)
            old_rows = old.row_of()
            ids = list(texts)
            digests = [_digest(texts[i]) for i in ids]
            stale = [
                n
                for n, (anchor_id, digest) in enumerate(zip(ids, digests, strict=True))
                if anchor_id not in old_rows or old.digests[old_rows[anchor_id]] != digest
            ]
            matrix = np.zeros((len(ids), embedder.dim), dtype=np.float32)
            for n, anchor_id in enumerate(ids):
                if anchor_id in old_rows:
                    matrix[n] = old.matrix[old_rows[anchor_id]]
            if stale:
                matrix[stale] = embedder.embed([texts[ids[n]] for n in stale])
            embedded += len(stale)
            self.kinds[kind] = KindVectors(ids=ids, digests=digests, matrix=matrix)
        logger.debug("anchor vectors refreshed: %d texts embedded", embedded)
        return embedded
