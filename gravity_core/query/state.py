"""What a query reads of one KB: the KB and everything prepared from it, as one immutable snapshot.

An engine that follows its KB (:mod:`gravity_core.query.live`) swaps whole snapshots: a query takes
one at its start and reads only it, so it never mixes two versions of the KB, whatever a reload
does meanwhile.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import date

from gravity_core.embeddings.base import Embedder
from gravity_core.query.blocks import RenderedAnchors
from gravity_core.query.expansion import ExpansionTexts
from gravity_core.query.index import AnchorIndex
from gravity_core.query.matching import AnchorLexicon
from gravity_core.query.provenance import SourceRanker
from gravity_core.query.stored_expansions import StoredExpansions
from gravity_core.schema import KnowledgeBase
from gravity_core.storage.anchor_vectors import KindVectors, summary_vectors
from gravity_core.storage.packed_kb import KBReader, to_knowledge_base
from gravity_core.text.tokens import TokenCounter

__all__ = ["KBSnapshot"]


@dataclass(frozen=True, eq=False)
class KBSnapshot:
    """One KB as a query sees it: the KB, its vectors' index, lexicon, renderings and stored vectors.

    Attributes:
        kb: the knowledge base (not changed while the snapshot is served): a ``KnowledgeBase``, or
            a :class:`~gravity_core.storage.packed_kb.PackedKB` for one read from a folder.
        index: the anchor vectors.
        lexicon: native-matching tables of ``kb``.
        rendered: memo of ``kb``'s rendered anchors.
        sources: ranks the selected anchors' source utterances for a question.
        expansions: stored vectors of expanded queries.
        expansion_texts: memo of ``kb``'s anchors' expanded queries.
        reference_date: the default question date (the KB's latest day, else today).
        generation: the store generation it was read from (``None``: not from a store).
        revision: counts the snapshots an engine has served, starting at 0.
    """

    kb: KBReader
    index: AnchorIndex
    lexicon: AnchorLexicon
    rendered: RenderedAnchors
    sources: SourceRanker
    expansions: StoredExpansions
    expansion_texts: ExpansionTexts
    reference_date: date
    generation: int | None = None
    revision: int = 0
    _summaries: list[KindVectors] = field(default_factory=list, repr=False)
    _summary_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _whole: list[KnowledgeBase] = field(default_factory=list, repr=False)

    @classmethod
    def of(
        cls,
        kb: KBReader,
        index: AnchorIndex,
        *,
        counter: TokenCounter,
        expansion_vectors: KindVectors | None = None,
        summary_vectors: KindVectors | None = None,
        generation: int | None = None,
        revision: int = 0,
    ) -> KBSnapshot:
        """Prepare what a query needs from ``kb``: lexicon, memos of renders and expansions, vectors."""
        lexicon = AnchorLexicon.from_kb(kb)
        return cls(
            kb=kb,
            index=index,
            lexicon=lexicon,
            rendered=RenderedAnchors(kb, counter=counter),
            sources=SourceRanker(kb),
            expansions=StoredExpansions.of(expansion_vectors),
            expansion_texts=ExpansionTexts(kb),
            reference_date=lexicon.latest_day or date.today(),
            generation=generation,
            revision=revision,
            _summaries=[] if summary_vectors is None else [summary_vectors],
        )

    def whole_kb(self) -> KnowledgeBase:
        """``kb`` as a :class:`KnowledgeBase`: a packed KB's records are all made at the first call."""
        with self._summary_lock:
            if not self._whole:
                self._whole.append(to_knowledge_base(self.kb))
            return self._whole[0]

    def summary_vectors(self, embedder: Embedder) -> KindVectors:
        """Vectors of the KB's batch summaries (embedded once, at first use)."""
        with self._summary_lock:
            if not self._summaries:
                self._summaries.append(summary_vectors(self.kb, embedder))
            return self._summaries[0]
