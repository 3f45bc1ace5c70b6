"""Keywords: light stems of a text's content words, and stem -> anchor indexes weighted by IDF.

Keywords are the content words of :func:`gravity_core.extract.offline.keywords.content_tokens`
(the build's stop list and plural lemmatizer) reduced further by :func:`stem`, so 'painted',
'painting' and 'paints' meet. An anchor is indexed as a few fields (an event's what / where /
outcome...); a stem found in several of them counts with the highest field weight
(:class:`~gravity_core.query.config.MatchWeights`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from gravity_core.extract.offline.keywords import content_lemma, lemmatize, matched_words
from gravity_core.query.memo import remember
from gravity_core.schema import EntityAnchor, EventAnchor, TopicAnchor

__all__ = [
    "QUESTION_STEMS",
    "KeywordIndex",
    "Stemmer",
    "attribute_fields",
    "event_fields",
    "stem",
    "topic_fields",
]

# Words of questions that say what is asked, not what it is about.
_QUESTION_WORDS = """
happen happens happened happening kind kinds type types sort often long ago many much would likely
consider considered current currently ever usually name names describe described reason reasons
whose specific specifically
"""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
#: ``(text, field number)`` pairs of one anchor; the field numbers index a weight tuple.
Fields = list[tuple[str | None, int]]


def stem(word: str) -> str:
    """A light stem of a lowercase word: plural lemma, then '-ing' / '-ed' / '-tion' / final 'e' off.

    Only meant to make a question's words meet the KB's ('painted', 'painting', 'paints' ->
    'paint'; 'hike', 'hiking' -> 'hik'; 'adoption', 'adopted' -> 'adopt'); both sides go through
    it, so the stems need not be words. (A real stemmer such as Snowball would be a new
    dependency for this one use; the build's plural lemmatizer does the first step.)
    """
    w = lemmatize(word)
    stripped = True
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith("ied"):
        w = w[:-3] + "y"
    elif len(w) > 4 and w.endswith("ed") and not w.endswith("eed"):
        w = w[:-2]
    elif len(w) > 6 and w.endswith("tion"):
        w = w[:-3]
    else:
        stripped = False
    if stripped and len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]  # 'running' -> 'runn' -> 'run'
    if len(w) > 3 and w.endswith("e") and not w.endswith("ee"):
        w = w[:-1]
    return w


#: Stems of the words that say what a question asks, not what it is about.
QUESTION_STEMS = frozenset(stem(w) for w in _QUESTION_WORDS.split())


class Stemmer:
    """Keyword stems of texts, with bounded memos of each lemma's and each word's stem.

    A keyword is the :func:`stem` of a content word's lemma of three letters or more (a memo of
    ``None``: not a keyword).

    A KB's vocabulary is small and stemming is not free: an anchor's texts come to a few hundred
    words, most of them seen before. Safe to share between threads (two may stem a word twice).
    """

    __slots__ = ("_memo", "_words")
    _SIZE = 65536

    def __init__(self) -> None:
        self._memo: dict[str, str] = {}
        self._words: dict[str, str | None] = {}

    def __call__(self, lemma: str) -> str:
        """:func:`stem` of a lemma."""
        out = self._memo.get(lemma)
        if out is None:
            out = remember(self._memo, lemma, stem(lemma), self._SIZE)
        return out

    def stems(self, text: str) -> list[str]:
        """Distinct keyword stems of ``text``, in order."""
        out: dict[str, None] = {}
        for word in matched_words(text):
            if word in self._words:
                found = self._words[word]
            else:
                lemma = content_lemma(word)
                found = remember(self._words, word, None if lemma is None else self(lemma), self._SIZE)
            if found is not None and len(found) >= 3:
                out[found] = None
        return list(out)

    def field_masks(self, fields: Fields) -> dict[str, int]:
        """Stem -> the bit mask of the fields it occurs in."""
        out: dict[str, int] = {}
        for text, number in fields:
            if text:
                for s in self.stems(text):
                    out[s] = out.get(s, 0) | (1 << number)
        return out


def event_fields(event: EventAnchor) -> Fields:
    """An event's keyword fields: what (0), where (1), outcome (2)."""
    return [(event.what, 0), (event.where, 1), (event.outcome, 2)]


def topic_fields(topic: TopicAnchor) -> Fields:
    """A topic's keyword fields: label and keywords (0), key facts (1)."""
    fields: Fields = [(topic.label.replace("/", " "), 0)]
    fields.extend((k, 0) for k in topic.keywords)
    fields.extend((_strip_speaker(f.text), 1) for f in topic.key_facts)
    return fields


def attribute_fields(entity: EntityAnchor) -> Fields:
    """An entity's keyword fields: current values and relation objects (0), past values (1), names (2)."""
    fields: Fields = []
    for attr in entity.attributes:
        fields.append((attr.value, 0 if attr.current else 1))
        fields.append((attr.name.replace("_", " "), 2))
    for rel in entity.relations:
        fields.append((rel.object, 0))
        fields.append((rel.relation.replace("_", " "), 2))
    return fields


def _strip_speaker(fact: str) -> str:
    """Key facts read 'Caroline: ...'; the speaker prefix is no keyword."""
    head, sep, rest = fact.partition(": ")
    return rest if sep and len(head.split()) <= 3 else fact


def _mask_weights(weights: Sequence[float]) -> FloatArray:
    """Per field bit mask, the highest weight of its fields."""
    return np.asarray(
        [
            max((w for i, w in enumerate(weights) if mask >> i & 1), default=0.0)
            for mask in range(1 << len(weights))
        ],
        dtype=np.float64,
    )


class KeywordIndex:
    """Stem -> (positions, weights) posting lists with IDF over a fixed set of documents.

    A document is its stems' field masks (:meth:`Stemmer.field_masks`); a posting weighs the
    highest weight of the fields the stem occurs in, so :meth:`reweighted` needs no document again.
    """

    __slots__ = ("_masks", "idf", "n_docs", "postings")

    def __init__(self, docs: Iterable[Mapping[str, int]], n_docs: int, weights: Sequence[float]) -> None:
        lists: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
        for pos, doc in enumerate(docs):
            for key, mask in doc.items():
                idx, m = lists[key]
                idx.append(pos)
                m.append(mask)
        self.n_docs = n_docs
        self._masks = {
            k: (np.asarray(i, dtype=np.intp), np.asarray(m, dtype=np.uint8)) for k, (i, m) in lists.items()
        }
        self.idf = {k: self._idf(len(i)) for k, (i, _) in lists.items()}
        self.postings = self._weigh(weights)

    def _weigh(self, weights: Sequence[float]) -> dict[str, tuple[IntArray, FloatArray]]:
        table = _mask_weights(weights)
        return {k: (i, table[m]) for k, (i, m) in self._masks.items()}

    def reweighted(self, weights: Sequence[float]) -> KeywordIndex:
        """The same index with other field weights (positions and IDF shared)."""
        out = KeywordIndex.__new__(KeywordIndex)
        out.n_docs, out.idf, out._masks = self.n_docs, self.idf, self._masks
        out.postings = out._weigh(weights)
        return out

    def _idf(self, df: int) -> float:
        return math.log((1 + self.n_docs) / (1 + df)) + 1.0

    def coverage(self, stems: Iterable[str]) -> tuple[IntArray, FloatArray] | None:
        """The documents holding any of ``stems`` and the IDF-weighted share of ``stems`` each holds.

        Stems the index does not know count in the total, so a question with many unknown
        words scores lower everywhere. None when no stem is known.
        """
        total = 0.0
        known: list[tuple[str, float]] = []
        for s in stems:
            idf = self.idf.get(s)
            total += self._idf(0) if idf is None else idf
            if idf is not None:
                known.append((s, idf))
        if not known:
            return None
        if len(known) == 1:
            idx, w = self.postings[known[0][0]]
            return idx, w * (known[0][1] / total)
        dense = np.zeros(self.n_docs, dtype=np.float64)
        held = np.zeros(self.n_docs, dtype=np.bool_)
        for s, idf in known:
            idx, w = self.postings[s]
            dense[idx] += idf * w
            held[idx] = True
        # A byte per document scans several times faster than the float sums (and than np.unique of
        # the postings, whatever their number): 0.1 to 0.7 ms at 717k documents.
        positions = np.flatnonzero(held)
        return positions, dense[positions] / total
