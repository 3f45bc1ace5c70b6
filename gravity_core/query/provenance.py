"""Where the selected anchors came from: their source utterance ids, for retrieval by provenance.

Every fact an anchor states carries the ids of the utterances it was read from. A host that stores
one document per turn under the utterance id (or lists the ids a document holds) can hand those
turns back by id, so the evidence itself reaches the context, not only GRAVITY's summary of it.
The context policy (:meth:`~gravity_core.context.policy.ContextPolicy.source_turns`) decides how
many of each anchor's sources are fetched and where the fetched turns are placed.

An event comes from the one or two utterances that reported it. A profile or a topic rests on many
(every mention of a person), so its sources are those about what the question asks: the
utterances sharing a keyword with the question, other than the names of the anchor's own people, most shared
keywords first, earlier first among equals (``gravity eval locomo``, dev split: entity sources in
their own order lowered evidence recall at 800 tokens, ranked this way they raise it the most;
docs/design/provenance.md).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from gravity_core.query.matching.keywords import Stemmer
from gravity_core.query.memo import remember
from gravity_core.query.types import AnchorSources, ScoredAnchor
from gravity_core.schema import AnchorKind
from gravity_core.storage.packed_kb import KBReader

__all__ = ["SourceRanker"]

_STEMS_MEMO = 65536


class SourceRanker:
    """The source utterances of selected anchors, ranked for a question; one per loaded KB.

    Keeps a bounded memo of each utterance's keyword stems (the KB does not change while it is
    served). Safe to share between threads (a race at worst stems an utterance twice).

    Args:
        kb: the knowledge base.
    """

    def __init__(self, kb: KBReader) -> None:
        self.kb = kb
        self._stemmer = Stemmer()
        self._stems: dict[str, frozenset[str]] = {}

    def sources(self, anchors: Sequence[ScoredAnchor], focus: Collection[str]) -> list[AnchorSources]:
        """The source utterance ids of ``anchors``, in their order; anchors not in the KB are skipped.

        Args:
            anchors: the selected anchors.
            focus: keyword stems of what the question asks about
                (:meth:`~gravity_core.query.matching.lexicon.AnchorLexicon.focus`).
        """
        kb = self.kb
        found: list[AnchorSources] = []
        for anchor in anchors:
            ids: Iterable[str]
            if anchor.kind is AnchorKind.EVENT:
                event = kb.events.get(anchor.id)
                if event is None:
                    continue
                ids = event.sources
            elif anchor.kind is AnchorKind.ENTITY:
                entity = kb.entities.get(anchor.id)
                if entity is None:
                    continue
                names = self._text_stems(" ".join([entity.name, *entity.aliases]))
                ids = self._about(entity.sources, frozenset(focus) - names)
            else:
                topic = kb.topics.get(anchor.id)
                if topic is None:
                    continue
                facts = [u for fact in topic.key_facts for u in fact.sources]
                snapshots = [u for snapshot in topic.arc for u in snapshot.sources]
                names = self._text_stems(" ".join(topic.participants))
                ids = self._about([*facts, *snapshots], frozenset(focus) - names)
            found.append(AnchorSources(anchor.kind, anchor.id, tuple(dict.fromkeys(ids)), anchor.score))
        return found

    def _about(self, utterance_ids: Sequence[str], focus: frozenset[str]) -> list[str]:
        """The utterances sharing a keyword with ``focus``, most shared first, then in their order."""
        if not focus:
            return []
        scored: list[tuple[int, int, str]] = []
        for position, utterance_id in enumerate(dict.fromkeys(utterance_ids)):
            shared = len(focus & self._utterance_stems(utterance_id))
            if shared:
                scored.append((-shared, position, utterance_id))
        scored.sort()
        return [utterance_id for _, _, utterance_id in scored]

    def _utterance_stems(self, utterance_id: str) -> frozenset[str]:
        stems = self._stems.get(utterance_id)
        if stems is None:
            utterance = self.kb.utterances.get(utterance_id)
            text = utterance.text if utterance is not None else ""
            stems = remember(self._stems, utterance_id, self._text_stems(text), _STEMS_MEMO)
        return stems

    def _text_stems(self, text: str) -> frozenset[str]:
        return frozenset(self._stemmer.stems(text))
