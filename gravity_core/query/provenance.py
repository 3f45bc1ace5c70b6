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

A profile or a topic that rests on few utterances (at most :data:`SPECIFIC_ANCHOR_SOURCES`: a
relative, a pet, a trip, as opposed to the speakers themselves, who are the source of hundreds) is
specific enough that any of its sources may hold the answer in other words than the question's:
all of them are fetched, those without a keyword of the question after those with one.

Each source also says how surely it is about the question (its *fit*, in ``[0, 1]``), so the
policy can fetch the surest turns of all the anchors first: for a profile or a topic, the share of
the question's keywords the utterance holds (at least :data:`SPECIFIC_SOURCE_FIT` for a specific
anchor's); for an event, half of it plus :data:`EVENT_SOURCE_CREDIT`, since the utterance reported
the event the question matched.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from gravity_core.query.matching.keywords import Stemmer
from gravity_core.query.memo import remember
from gravity_core.query.types import AnchorSources, ScoredAnchor
from gravity_core.schema import AnchorKind
from gravity_core.storage.packed_kb import KBReader

__all__ = ["EVENT_SOURCE_CREDIT", "SPECIFIC_ANCHOR_SOURCES", "SPECIFIC_SOURCE_FIT", "SourceRanker"]

_STEMS_MEMO = 65536

EVENT_SOURCE_CREDIT = 0.5
"""The fit an event's source has before its words are read: it reported what the question matched.

Its fit is ``EVENT_SOURCE_CREDIT + (1 - EVENT_SOURCE_CREDIT) * share``. With 1 (events' turns before
any profile's or topic's turn of an anchor scored as high) the LangChain retriever's recall@5 was
lower on the LoCoMo dev conversations (0.488 / 0.463 / 0.530 / 0.403 / 0.542 against 0.531 / 0.539 /
0.558 / 0.444 / 0.569); with 0 LongMemEval's evidence recall at 1,500 tokens fell (vector host 0.826,
BM25 0.824, against 0.857 and 0.847); docs/design/provenance.md.
"""

SPECIFIC_ANCHOR_SOURCES = 30
"""A profile or topic resting on at most this many utterances has all of them fetched.

On the LoCoMo dev KBs (offline extractor) the speakers' profiles rest on 184 to 344 utterances,
the other people's on 1 to 20, topics on 3 to 108. Fetching a specific anchor's sources that share
no keyword with the question raised evidence recall at 1,500 and 3,000 tokens on every host (BM25
0.742 / 0.796 to 0.761 / 0.819), with 15, 30 or 60 alike; docs/design/provenance.md.
"""

SPECIFIC_SOURCE_FIT = 0.2
"""The least fit of a specific anchor's source: as sure as a turn holding a fifth of the keywords.

0.1 to 0.3 measured alike; 0.5 put them before turns the question's words point to and lowered
evidence recall at 800 tokens (SGMem host 0.748 to 0.737).
"""


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
            anchors: the selected anchors (their scores carry over to the sources).
            focus: keyword stems of what the question asks about
                (:meth:`~gravity_core.query.matching.lexicon.AnchorLexicon.focus`).
        """
        kb = self.kb
        found: list[AnchorSources] = []
        for anchor in anchors:
            if anchor.kind is AnchorKind.EVENT:
                event = kb.events.get(anchor.id)
                if event is None:
                    continue
                asked = frozenset(focus) - self._text_stems(" ".join(event.who))
                ids = tuple(dict.fromkeys(event.sources))
                fits = tuple(
                    EVENT_SOURCE_CREDIT + (1.0 - EVENT_SOURCE_CREDIT) * self._share(u, asked) for u in ids
                )
                found.append(AnchorSources(anchor.kind, anchor.id, ids, anchor.score, fits))
                continue
            if anchor.kind is AnchorKind.ENTITY:
                entity = kb.entities.get(anchor.id)
                if entity is None:
                    continue
                names = self._text_stems(" ".join([entity.name, *entity.aliases]))
                about = self._about(entity.sources, frozenset(focus) - names)
            else:
                topic = kb.topics.get(anchor.id)
                if topic is None:
                    continue
                facts = [u for fact in topic.key_facts for u in fact.sources]
                snapshots = [u for snapshot in topic.arc for u in snapshot.sources]
                names = self._text_stems(" ".join(topic.participants))
                about = self._about([*facts, *snapshots], frozenset(focus) - names)
            found.append(
                AnchorSources(
                    anchor.kind,
                    anchor.id,
                    tuple(u for u, _ in about),
                    anchor.score,
                    tuple(f for _, f in about),
                )
            )
        return found

    def _about(self, utterance_ids: Sequence[str], focus: frozenset[str]) -> list[tuple[str, float]]:
        """The utterances about ``focus``, each with its fit, most shared keywords first, then in their order.

        Those sharing a keyword with ``focus``, with the share they hold; when there are at most
        :data:`SPECIFIC_ANCHOR_SOURCES` utterances, all of them, each fit at least
        :data:`SPECIFIC_SOURCE_FIT`.
        """
        if not focus:
            return []
        unique = list(dict.fromkeys(utterance_ids))
        least = SPECIFIC_SOURCE_FIT if len(unique) <= SPECIFIC_ANCHOR_SOURCES else 0.0
        shares = ((self._share(u, focus), position, u) for position, u in enumerate(unique))
        held = sorted((-share, position, u) for share, position, u in shares if share > 0 or least)
        return [(utterance_id, max(-negative, least)) for negative, _, utterance_id in held]

    def _share(self, utterance_id: str, focus: frozenset[str]) -> float:
        """The share of ``focus`` the utterance holds (1 when there is no focus to hold)."""
        return len(focus & self._utterance_stems(utterance_id)) / len(focus) if focus else 1.0

    def _utterance_stems(self, utterance_id: str) -> frozenset[str]:
        stems = self._stems.get(utterance_id)
        if stems is None:
            utterance = self.kb.utterances.get(utterance_id)
            text = utterance.text if utterance is not None else ""
            stems = remember(self._stems, utterance_id, self._text_stems(text), _STEMS_MEMO)
        return stems

    def _text_stems(self, text: str) -> frozenset[str]:
        return frozenset(self._stemmer.stems(text))
