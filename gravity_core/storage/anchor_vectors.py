"""Vectors stored beside the KB, computed at build time.

Each anchor's compact text (reranking), the anchors' likely expanded queries (so the host search
need not embed them at query time) and each turn's text (so an incremental build never embeds a
turn twice). The '+Sum' baseline's batch summaries are embedded on demand by the engine.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from gravity_core.anchors.expansions import (
    entity_expansions,
    event_expansions,
    expansion_key,
    topic_expansions,
)
from gravity_core.anchors.text import entity_text, event_text, topic_text
from gravity_core.embeddings.base import Embedder, Matrix
from gravity_core.errors import ConfigurationError
from gravity_core.schema import AnchorKind, KnowledgeBase
from gravity_core.storage.files import RowReader
from gravity_core.storage.packed_kb import KBReader

__all__ = [
    "ANCHOR_KINDS",
    "EXPANSIONS_PER_ANCHOR",
    "EXPANSION_KIND",
    "SUMMARY_KIND",
    "TURN_KIND",
    "VECTOR_KINDS",
    "AnchorVectors",
    "KindVectors",
    "anchor_texts",
    "summary_vectors",
]

logger = logging.getLogger(__name__)


SUMMARY_KIND = "summary"
#: Rows are expanded queries, keyed by :func:`expansion_key`.
EXPANSION_KIND = "expansion"
#: Rows are utterances, keyed by id; embedded text: :meth:`Utterance.full_text`.
TURN_KIND = "turn"
#: The kinds a KB folder stores (older KBs may lack the last two).
VECTOR_KINDS: tuple[str, ...] = (*(k.value for k in AnchorKind), EXPANSION_KIND, TURN_KIND)
#: What :meth:`AnchorVectors.refresh` brings up to date unless told otherwise (turns are kept only
#: for extractors that read them).
ANCHOR_KINDS: tuple[str, ...] = (*(k.value for k in AnchorKind), EXPANSION_KIND)

#: Expanded queries embedded per anchor at build time. A query's round robin takes about three per
#: module from the best few anchors, so nearly all are an anchor's first or second; the rest are
#: embedded at query time.
EXPANSIONS_PER_ANCHOR = 2


def _expansion_texts(kb: KBReader) -> dict[str, str]:
    texts: dict[str, str] = {}
    per_anchor = EXPANSIONS_PER_ANCHOR
    for group in (
        (entity_expansions(a, per_anchor) for a in kb.entities.values()),
        (event_expansions(a, per_anchor) for a in kb.events.values()),
        (topic_expansions(a, per_anchor) for a in kb.topics.values()),
    ):
        for expansions in group:
            for text in expansions:
                texts.setdefault(expansion_key(text), text)
    return texts


def anchor_texts(kb: KBReader, kind: str) -> dict[str, str]:
    """Text to embed of every row of ``kind`` (an AnchorKind or one of the other kinds), by id.

    Anchors give their compact text, in KB order; expansions their first
    :data:`EXPANSIONS_PER_ANCHOR` queries per anchor; turns their full text.
    """
    render: Mapping[str, Callable[[KBReader], dict[str, str]]] = {
        AnchorKind.ENTITY: lambda k: {i: entity_text(a) for i, a in k.entities.items()},
        AnchorKind.EVENT: lambda k: {i: event_text(a) for i, a in k.events.items()},
        AnchorKind.TOPIC: lambda k: {i: topic_text(a) for i, a in k.topics.items()},
        EXPANSION_KIND: _expansion_texts,
        TURN_KIND: lambda k: {i: u.full_text() for i, u in k.utterances.items()},
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
    #: The float32 rows, read from their file on demand, when ``matrix`` holds them in float16.
    exact_rows: RowReader | None = None
    #: Only for a kind read mapped from a delta generation (``AnchorStore.load_packed``), whose
    #: rows are in two files: ``matrix`` maps the base's rows and ``tail`` holds the delta's; row
    #: ``i`` is ``matrix[source[i]]`` when ``source[i] >= 0``, else ``tail[~source[i]]``.
    tail: Matrix | None = None
    source: npt.NDArray[np.intp] | None = None

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

    def refresh(
        self,
        kb: KnowledgeBase,
        embedder: Embedder,
        kinds: Sequence[str] = ANCHOR_KINDS,
        extra: Mapping[str, Mapping[str, str]] | None = None,
        donor: AnchorVectors | None = None,
    ) -> int:
        """Bring the vectors in line with the KB, embedding only rows whose text changed.

        All stale rows of all ``kinds`` are embedded in one call, so the encoder sees large,
        length-sorted batches.

        Args:
            kb: the KB.
            embedder: the KB's embedder.
            kinds: which kinds to bring up to date.
            extra: more rows (id -> text) per kind, kept beside the KB's own, e.g. the turns of
                a build not yet merged.
            donor: vectors of the same embedder to take a row from when its text is there under
                any id (a KB rebuilt from its own utterances embeds only what is new).

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
        pending: list[tuple[KindVectors, list[int], list[str]]] = []
        for kind in kinds:
            texts = anchor_texts(kb, kind)
            for row_id, text in (extra or {}).get(kind, {}).items():
                texts.setdefault(row_id, text)
            old = self.get(kind)
            old_rows = old.row_of()
            ids = list(texts)
            digests = [_digest(texts[i]) for i in ids]
            stale = [
                n
                for n, (row_id, digest) in enumerate(zip(ids, digests, strict=True))
                if row_id not in old_rows or old.digests[old_rows[row_id]] != digest
            ]
            matrix = np.zeros((len(ids), embedder.dim), dtype=np.float32)
            for n, row_id in enumerate(ids):
                if row_id in old_rows:
                    matrix[n] = old.matrix[old_rows[row_id]]
            if donor is not None and donor.embedder == embedder.name and stale:
                stale = _fill_from(donor.get(kind), stale, digests, matrix)
            fresh = KindVectors(ids=ids, digests=digests, matrix=matrix)
            self.kinds[kind] = fresh
            pending.append((fresh, stale, [texts[ids[n]] for n in stale]))
        to_embed = [text for _, _, stale_texts in pending for text in stale_texts]
        if to_embed:
            embedded = np.asarray(embedder.embed(to_embed), dtype=np.float32)
            start = 0
            for vectors, stale, stale_texts in pending:
                vectors.matrix[stale] = embedded[start : start + len(stale_texts)]
                start += len(stale_texts)
        logger.debug("vectors refreshed: %d texts embedded", len(to_embed))
        return len(to_embed)

    def by_text(self, kind: str, texts: Mapping[str, str]) -> dict[str, np.ndarray]:
        """Text -> stored vector, for the rows of ``kind`` whose id is in ``texts`` (id -> text)."""
        vectors = self.get(kind)
        return {texts[row_id]: vectors.matrix[n] for n, row_id in enumerate(vectors.ids) if row_id in texts}


def _fill_from(donor: KindVectors, stale: list[int], digests: list[str], matrix: Matrix) -> list[int]:
    """Fill the stale rows whose text digest the donor holds; returns the rows still to embed."""
    if donor.matrix.shape[1:] != matrix.shape[1:]:
        return stale
    donor_rows = {digest: row for row, digest in enumerate(donor.digests)}
    left = []
    for n in stale:
        row = donor_rows.get(digests[n])
        if row is None:
            left.append(n)
        else:
            matrix[n] = donor.matrix[row]
    return left


def summary_vectors(kb: KBReader, embedder: Embedder) -> KindVectors:
    """Vectors of the KB's batch summaries (the '+Sum' baseline), embedded now in one call."""
    texts = anchor_texts(kb, SUMMARY_KIND)
    ids = list(texts)
    matrix = np.zeros((0, embedder.dim), dtype=np.float32)
    if ids:
        matrix = np.asarray(embedder.embed([texts[i] for i in ids]), dtype=np.float32)
    return KindVectors(ids=ids, digests=[_digest(texts[i]) for i in ids], matrix=matrix)
