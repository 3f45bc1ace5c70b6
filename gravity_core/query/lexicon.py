"""Native (embedding-free) matching of a question against a KB's anchors.

:class:`AnchorLexicon` is built once per loaded KB: name tables, inverted keyword indexes and
per-event date arrays. Per question it does dictionary lookups and a few numpy operations over
the posting lists, never a Python scan over all anchors, so it stays well under a millisecond
at tens of thousands of events.

Matching, in short:

- Entities: names and aliases as token n-grams (case-, accent- and possessive-insensitive),
  small misspellings through ``difflib`` over the name vocabulary only, words of multi-word
  names, then, at lower scores, entities holding a relation to a named entity and entities
  whose attribute or relation values share the question's words.
- Events: participants (events of the entities named in the question) plus IDF-weighted
  keyword coverage of ``what`` / ``where`` / ``outcome``.
- Topics: IDF-weighted keyword coverage of label and keywords, key facts at a lower weight.

Keywords are the content words of :func:`gravity_core.extract.offline.keywords.content_tokens`
(the build's stop list and plural lemmatizer) reduced further by :func:`stem`, so 'painted',
'painting' and 'paints' meet.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from gravity_core.extract.offline import text as offline_text
from gravity_core.extract.offline.keywords import (
    STOP_WORDS,
    content_lemma,
    content_tokens,
    lemmatize,
    matched_words,
)
from gravity_core.query.memo import remember
from gravity_core.schema import EntityAnchor, EventAnchor, TopicAnchor
from gravity_core.storage.packed_kb import KBReader

__all__ = ["AnchorLexicon", "EventDates", "Stemmer", "stem"]

R = TypeVar("R")

# Score of each kind of entity match (the best one wins).
_NAME_SCORE = 1.0
_ALIAS_SCORE = 0.95
_FUZZY_FACTOR = 0.9  # times the difflib ratio
_FUZZY_CUTOFF = 0.75  # 'Melany' / 'melanie' is 0.77
_PLURAL_FACTOR = 0.95  # 'Melanies' for 'Melanie's'
_LOWERCASE_COMMON_FACTOR = 0.6  # 'pride parade' for the entity 'Pride'
_PARTIAL_SCORE = 0.8  # times the share of a multi-word name's words present
_HOLDER_FACTOR = 0.6  # 'Oscar' named: his owner (a relation to Oscar)
_OBJECT_FACTOR = 0.4  # 'Caroline' named: the entities of her relations
_ATTRIBUTE_SCORE = 0.5  # times the keyword coverage of attribute/relation values
_PARTICIPANT_MIN = 0.5  # name-match score that makes an entity a participant for events

# Event score: keyword coverage and participation, when the question names participants.
_EVENT_KEYWORD_WEIGHT = 0.7
_EVENT_PARTICIPANT_WEIGHT = 1.0 - _EVENT_KEYWORD_WEIGHT

_WHAT_WEIGHT = 1.0
_WHERE_WEIGHT = 0.8
_OUTCOME_WEIGHT = 0.5
_LABEL_WEIGHT = 1.0
_FACT_WEIGHT = 0.4
_ATTR_VALUE_WEIGHT = 1.0
_ATTR_PAST_WEIGHT = 0.6
_ATTR_NAME_WEIGHT = 0.5

_MAX_NGRAM = 6
_MIN_FUZZY_LEN = 4
_FUZZY_CANDIDATES = 20  # difflib runs on the names sharing the most letter pairs only
_FUZZY_CACHE_SIZE = 4096
_PARSE_CACHE_SIZE = 64
_TIE_EPS = 1e-6
#: From this many scores on, :func:`_largest` partially sorts only those above a sampled threshold.
_SAMPLED_MIN = 8192
_SAMPLE_SIZE = 1024
_SHORT_SPAN = 31  # days; see _Timeline

# Words of questions that say what is asked, not what it is about.
_QUESTION_WORDS = """
happen happens happened happening kind kinds type types sort often long ago many much would likely
consider considered current currently ever usually name names describe described reason reasons
whose specific specifically
"""

_NAME_TOKEN_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


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


_QUESTION_STEMS = frozenset(stem(w) for w in _QUESTION_WORDS.split())


def _fold(token: str) -> str:
    """Case-folded, accents removed."""
    if token.isascii():
        return token.casefold()
    decomposed = unicodedata.normalize("NFKD", token)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _name_tokens(text: str) -> list[tuple[str, bool]]:
    """Name-matching tokens of ``text`` (folded, possessive removed) and whether each was all lowercase.

    Unlike :func:`gravity_core.extract.offline.text.tokenize` (ASCII words, hyphens kept), this
    takes any letters ('José') and splits hyphens, so 'Jean-Luc' meets 'Jean Luc'.
    """
    out = []
    for match in _NAME_TOKEN_RE.finditer(offline_text.normalize_quotes(text)):
        surface = match.group()
        folded = _fold(surface)
        if folded.endswith("'s") and len(folded) > 2:
            folded = folded[:-2]
        folded = folded.rstrip("'")
        if folded:
            out.append((folded, surface.islower()))
    return out


def _name_key(text: str) -> tuple[str, ...]:
    return tuple(t for t, _ in _name_tokens(text))[:_MAX_NGRAM]


def _bigrams(word: str) -> set[str]:
    padded = f"^{word}$"
    return {padded[i : i + 2] for i in range(len(padded) - 1)}


@dataclass(frozen=True, slots=True)
class EventDates:
    """Per-event day ordinals (``date.toordinal()``), aligned with :attr:`AnchorLexicon.event_ids`.

    Attributes:
        start: First day of the event's normalized interval (its mention day when it has none).
        end: Last day of that interval.
        phrase: Whether the interval came from a time phrase (``TimeRef.basis == "phrase"``).
    """

    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    phrase: npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class _Timeline:
    """Events by start day, for interval look-ups by binary search.

    Events spanning at most ``_SHORT_SPAN`` days are found in a window of the start-sorted
    list; the few longer ones ('last year', 'since 2019') are checked one by one.
    """

    short: IntArray
    short_starts: npt.NDArray[np.int64]
    short_ends: npt.NDArray[np.int64]
    long: IntArray
    long_starts: npt.NDArray[np.int64]
    long_ends: npt.NDArray[np.int64]

    @classmethod
    def of(cls, chronological: IntArray, dates: EventDates) -> _Timeline:
        starts, ends = dates.start[chronological], dates.end[chronological]
        is_short = ends - starts <= _SHORT_SPAN
        short, long = chronological[is_short], chronological[~is_short]
        return cls(short, starts[is_short], ends[is_short], long, starts[~is_short], ends[~is_short])

    def overlapping(self, first: int, last: int) -> IntArray:
        """Positions of the events sharing a day with ``[first, last]`` (day ordinals)."""
        lo = int(np.searchsorted(self.short_starts, first - _SHORT_SPAN, side="left"))
        hi = int(np.searchsorted(self.short_starts, last, side="right"))
        short = self.short[lo:hi][self.short_ends[lo:hi] >= first]
        if self.long.size == 0:
            return short
        long = self.long[(self.long_starts <= last) & (self.long_ends >= first)]
        return np.concatenate([short, long])


@dataclass(frozen=True, slots=True)
class _NameEntry:
    entity: int
    score: float
    common: bool  # every word of the name is also a common word


@dataclass(frozen=True, slots=True)
class _Parsed:
    """What one question yields, shared by the entity, event and topic lookups."""

    named: dict[int, float]  # entity position -> name-level score
    participants: tuple[int, ...]  # named entities that take part in events
    stems: tuple[str, ...]  # keyword stems, participant names removed
    attribute_stems: tuple[str, ...]  # keyword stems, every matched name removed


class Stemmer:
    """Keyword stems of texts (the :func:`stem` of each content word's lemma, three letters or more),
    with bounded memos of each lemma's and each word's stem (``None``: not a keyword).

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


class _KeywordIndex:
    """Stem -> (positions, weights) posting lists with IDF over a fixed set of documents."""

    __slots__ = ("idf", "n_docs", "postings")

    def __init__(self, docs: Iterable[Mapping[str, float]], n_docs: int) -> None:
        lists: dict[str, tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
        for pos, doc in enumerate(docs):
            for key, weight in doc.items():
                idx, w = lists[key]
                idx.append(pos)
                w.append(weight)
        self.n_docs = n_docs
        self.postings = {
            k: (np.asarray(i, dtype=np.intp), np.asarray(w, dtype=np.float64)) for k, (i, w) in lists.items()
        }
        self.idf = {k: self._idf(len(i)) for k, (i, _) in lists.items()}

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


def _ties(n: int, order: npt.NDArray[np.intp] | None = None) -> FloatArray:
    """Tiny tie-breaking offsets: earlier positions win, or later ones along ``order``."""
    if order is None:
        return -np.arange(n, dtype=np.float64) / max(1, n) * _TIE_EPS
    out = np.empty(n, dtype=np.float64)
    out[order] = np.arange(n, dtype=np.float64) / max(1, n) * _TIE_EPS
    return out


def _top(
    positions: IntArray, scores: FloatArray, ties: FloatArray, limit: int, ids: tuple[str, ...]
) -> dict[str, float]:
    """The ``limit`` best positive scores as ``{id: score}``, best first."""
    if limit <= 0 or positions.size == 0:
        return {}
    keep = scores > 0
    if not keep.all():  # keyword coverage is positive wherever a word matched: usually all are
        positions, scores = positions[keep], scores[keep]
        if positions.size == 0:
            return {}
    keys = scores + ties[positions]
    if positions.size > limit:
        part = _largest(keys, limit)
        positions, scores, keys = positions[part], scores[part], keys[part]
    order = np.argsort(-keys, kind="stable")
    return {ids[int(positions[i])]: min(1.0, float(scores[i])) for i in order}


def _largest(keys: FloatArray, limit: int) -> IntArray:
    """Indices of the ``limit`` largest ``keys``, in no order (``0 < limit < keys.size``).

    A partial sort of all keys took 1.2 ms at 92k (a question's matched events at 1M anchors).
    From :data:`_SAMPLED_MIN` keys on, a strided sample gives a threshold that about four times
    ``limit`` keys reach; only those are partially sorted. When fewer than ``limit`` reach it,
    all keys are. Either way the result is the ``limit`` largest.
    """
    n = keys.size
    if n >= _SAMPLED_MIN:
        sample = keys[:: n // _SAMPLE_SIZE]
        from_top = min(sample.size, math.ceil(4 * limit * sample.size / n))
        threshold = np.partition(sample, sample.size - from_top)[sample.size - from_top]
        reaching = np.flatnonzero(keys >= threshold)
        if reaching.size >= limit:
            return reaching[np.argpartition(-keys[reaching], limit - 1)[:limit]]
    return np.argpartition(-keys, limit - 1)[:limit]


class AnchorLexicon:
    """Precomputed name tables and keyword indexes of one KB, for native candidate matching.

    Build it with :meth:`from_kb` once per loaded KB; every method then costs dictionary lookups
    and vector operations on posting lists. All scores are in ``[0, 1]``, higher is better; they
    rank candidates within one question and are not comparable across kinds. Small caches
    (stems, misspellings, the last questions) make repeated lookups of one question cheap.

    Attributes:
        entity_ids: Entity ids in KB order (the positions the arrays use).
        event_ids: Event ids in KB order.
        topic_ids: Topic ids in KB order.
        event_dates: Each event's day interval, aligned with ``event_ids``.
        latest_day: Day of the KB's latest utterance (latest event report without utterances).
    """

    def __init__(self, kb: KBReader) -> None:
        """Index ``kb`` (prefer :meth:`from_kb`)."""
        # Each pass reads the records again: a packed KB makes its models as they are read, and
        # holding them all at once is what packing avoids.
        entities = _Records(kb.entities)
        events = _Records(kb.events)
        topics = _Records(kb.topics)
        # The KB's own keys (the ids it is read by), so the strings are shared with it.
        self.entity_ids: tuple[str, ...] = tuple(kb.entities)
        self.event_ids: tuple[str, ...] = tuple(kb.events)
        self.topic_ids: tuple[str, ...] = tuple(kb.topics)
        self._entity_pos = {eid: i for i, eid in enumerate(self.entity_ids)}
        self._event_pos = {eid: i for i, eid in enumerate(self.event_ids)}
        self._stem = Stemmer()

        self._event_index = _KeywordIndex((self._event_doc(e) for e in events), len(events))
        self._topic_index = _KeywordIndex((self._topic_doc(t) for t in topics), len(topics))
        self._attribute_index = _KeywordIndex((self._attribute_doc(e) for e in entities), len(entities))

        self._build_names(entities, _lowercase_words(events, topics))
        self._build_vocabulary()
        self._build_relations(entities)
        self._build_events(events)
        self.latest_day: date | None = _latest_day(kb)
        self._entity_ties = _ties(len(entities))
        self._topic_ties = _ties(len(topics))
        self._fuzzy_cache: dict[str, tuple[str, float] | None] = {}
        self._parse_cache: dict[str, _Parsed] = {}

    @classmethod
    def from_kb(cls, kb: KBReader) -> AnchorLexicon:
        """Build the lexicon of ``kb``.

        Args:
            kb: The loaded knowledge base; later changes to it are not seen.

        Returns:
            A lexicon answering :meth:`entities`, :meth:`events` and :meth:`topics`.
        """
        return cls(kb)

    # ----------------------------------------------------------------------------------- build

    def _weighted_stems(self, fields: Iterable[tuple[str | None, float]]) -> dict[str, float]:
        """Stem -> the highest weight of a field it occurs in."""
        out: dict[str, float] = {}
        for text, weight in fields:
            if text:
                for s in self._stem.stems(text):
                    if out.get(s, 0.0) < weight:
                        out[s] = weight
        return out

    def _event_doc(self, event: EventAnchor) -> dict[str, float]:
        return self._weighted_stems(
            [(event.what, _WHAT_WEIGHT), (event.where, _WHERE_WEIGHT), (event.outcome, _OUTCOME_WEIGHT)]
        )

    def _topic_doc(self, topic: TopicAnchor) -> dict[str, float]:
        fields: list[tuple[str | None, float]] = [(topic.label.replace("/", " "), _LABEL_WEIGHT)]
        fields.extend((k, _LABEL_WEIGHT) for k in topic.keywords)
        fields.extend((_strip_speaker(f.text), _FACT_WEIGHT) for f in topic.key_facts)
        return self._weighted_stems(fields)

    def _attribute_doc(self, entity: EntityAnchor) -> dict[str, float]:
        fields: list[tuple[str | None, float]] = []
        for attr in entity.attributes:
            fields.append((attr.value, _ATTR_VALUE_WEIGHT if attr.current else _ATTR_PAST_WEIGHT))
            fields.append((attr.name.replace("_", " "), _ATTR_NAME_WEIGHT))
        for rel in entity.relations:
            fields.append((rel.object, _ATTR_VALUE_WEIGHT))
            fields.append((rel.relation.replace("_", " "), _ATTR_NAME_WEIGHT))
        return self._weighted_stems(fields)

    def _build_names(self, entities: Collection[EntityAnchor], lowercase: frozenset[str]) -> None:
        names: dict[tuple[str, ...], list[_NameEntry]] = defaultdict(list)
        partial: dict[str, list[tuple[int, int]]] = defaultdict(list)
        commons = STOP_WORDS | offline_text.STOP_WORDS | offline_text.COMMON_WORDS | lowercase
        for pos, entity in enumerate(entities):
            forms = [(entity.name, _NAME_SCORE)] + [(a, _ALIAS_SCORE) for a in entity.aliases]
            for form, score in forms:
                key = _name_key(form)
                if not key:
                    continue
                common = all(t in commons for t in key)
                if all(e.entity != pos for e in names[key]):
                    names[key].append(_NameEntry(pos, score, common))
                if len(key) > 1:
                    for t in dict.fromkeys(key):
                        if len(t) >= 3 and t not in commons:
                            partial[t].append((pos, len(key)))
        self._names = dict(names)
        self._name_starts = frozenset(k[0] for k in names)
        self._partial = dict(partial)
        self._max_ngram = max((len(k) for k in names), default=1)
        self._name_words = frozenset(t for k in names for t in k) | frozenset(partial)
        bigram_index: dict[str, set[str]] = defaultdict(set)
        for word in self._name_words:
            if len(word) >= 3:
                for bg in _bigrams(word):
                    bigram_index[bg].add(word)
        self._bigram_index = dict(bigram_index)

    def _build_vocabulary(self) -> None:
        # Words known to be ordinary words are never fuzzy-matched to names. The indexes hold
        # stems, and names occur in the texts they index ('caroline' -> 'carolin').
        vocab: set[str] = set(STOP_WORDS | offline_text.STOP_WORDS | offline_text.COMMON_WORDS)
        for index in (self._event_index, self._topic_index, self._attribute_index):
            vocab.update(index.postings)
        self._vocabulary = frozenset(vocab - self._name_words - {stem(w) for w in self._name_words})

    def _build_relations(self, entities: Collection[EntityAnchor]) -> None:
        unique_names = {key: entries[0].entity for key, entries in self._names.items() if len(entries) == 1}
        holders: dict[int, set[int]] = defaultdict(set)
        objects: dict[int, set[int]] = defaultdict(set)
        for pos, entity in enumerate(entities):
            for rel in entity.relations:
                target = self._entity_pos.get(rel.object_id) if rel.object_id else None
                if target is None:
                    target = unique_names.get(_name_key(rel.object))
                if target is not None and target != pos:
                    holders[target].add(pos)
                    objects[pos].add(target)
        self._holders = {k: tuple(sorted(v)) for k, v in holders.items()}
        self._objects = {k: tuple(sorted(v)) for k, v in objects.items()}
        self._unique_names = unique_names

    def _build_events(self, events: Collection[EventAnchor]) -> None:
        n = len(events)
        start = np.empty(n, dtype=np.int64)
        end = np.empty(n, dtype=np.int64)
        phrase = np.zeros(n, dtype=np.bool_)
        who: list[list[int]] = []
        for pos, event in enumerate(events):
            when = event.when
            if when is not None and when.start is not None and when.end is not None:
                start[pos], end[pos] = when.start.toordinal(), when.end.toordinal()
                phrase[pos] = when.basis == "phrase"
            else:
                start[pos] = end[pos] = event.said_at.date().toordinal()
            people = list(dict.fromkeys(self._entity_pos[i] for i in event.who_ids if i in self._entity_pos))
            if not people:  # older KBs: resolve the names
                found = (self._unique_names.get(_name_key(w)) for w in event.who)
                people = list(dict.fromkeys(p for p in found if p is not None))
            who.append(people)
        self.event_dates = EventDates(start=start, end=end, phrase=phrase)
        # Chronological order (conversation order within a day): later events win score ties,
        # and each entity's events are kept in this order for 'before/after' look-ups.
        chrono = np.lexsort((np.arange(n), start)).astype(np.intp)
        rank = np.empty(n, dtype=np.intp)
        rank[chrono] = np.arange(n)
        self._event_ties = _ties(n, chrono)
        by_entity: dict[int, list[int]] = defaultdict(list)
        for pos in chrono.tolist():
            for p in who[pos]:
                by_entity[p].append(pos)
        self._events_by_entity = {k: np.asarray(v, dtype=np.intp) for k, v in by_entity.items()}
        self._starts_by_entity = {k: start[v] for k, v in self._events_by_entity.items()}
        self._chrono, self._chrono_starts = chrono, start[chrono]
        self._timeline = _Timeline.of(chrono, self.event_dates)
        self._timelines = {k: _Timeline.of(v, self.event_dates) for k, v in self._events_by_entity.items()}
        # Participants as columns: column k holds each event's k-th participant (-1 if none).
        width = max((len(w) for w in who), default=0) or 1
        columns = [np.full(n, -1, dtype=np.intp) for _ in range(width)]
        for pos, people in enumerate(who):
            for k, p in enumerate(people):
                columns[k][pos] = p
        self._who_columns = columns

    # ---------------------------------------------------------------------------- question side

    def _fuzzy(self, word: str) -> tuple[str, float] | None:
        """The name word closest to ``word`` (difflib ratio >= cutoff), cached per lexicon."""
        # One lookup, not `in` then `[]`: another thread may clear the cache in between.
        with contextlib.suppress(KeyError):
            return self._fuzzy_cache[word]
        grams = _bigrams(word)
        shared: Counter[str] = Counter()
        for bg in grams:
            shared.update(self._bigram_index.get(bg, ()))
        need = max(2, len(grams) // 2)
        ranked = sorted((-count, cand) for cand, count in shared.items() if count >= need)
        best: tuple[str, float] | None = None
        for _, cand in ranked[:_FUZZY_CANDIDATES]:
            ratio = difflib.SequenceMatcher(None, word, cand).ratio()
            if ratio >= _FUZZY_CUTOFF and (best is None or ratio > best[1]):
                best = (cand, ratio)
        if len(self._fuzzy_cache) >= _FUZZY_CACHE_SIZE:
            self._fuzzy_cache.clear()
        self._fuzzy_cache[word] = best
        return best

    def _resolve_token(self, word: str) -> tuple[str, float]:
        """The name-vocabulary form of a question word and the confidence of that reading."""
        if word in self._name_words:
            return word, 1.0
        if len(word) > 3 and word.endswith("s") and word[:-1] in self._name_words:
            return word[:-1], _PLURAL_FACTOR
        if len(word) < _MIN_FUZZY_LEN or word in self._vocabulary or self._stem(word) in self._vocabulary:
            return word, 1.0
        hit = self._fuzzy(word)
        return (hit[0], hit[1] * _FUZZY_FACTOR) if hit is not None else (word, 1.0)

    def _match_names(self, raw: list[tuple[str, bool]]) -> tuple[dict[int, float], dict[int, int], list[str]]:
        """Named entities (position -> score), the token positions they used, and the resolved forms."""
        resolved = [self._resolve_token(w) for w, _ in raw]
        forms = [f for f, _ in resolved]
        named: dict[int, float] = {}
        consumed: dict[int, int] = {}  # token position -> entity position
        i = 0
        while i < len(forms):
            if forms[i] not in self._name_starts:
                i += 1
                continue
            for n in range(min(self._max_ngram, len(forms) - i), 0, -1):
                entries = self._names.get(tuple(forms[i : i + n]))
                if not entries:
                    continue
                factor = min(c for _, c in resolved[i : i + n])
                lowercase = all(low for _, low in raw[i : i + n])
                for entry in entries:
                    score = entry.score * factor
                    if entry.common and lowercase:
                        score *= _LOWERCASE_COMMON_FACTOR
                    named[entry.entity] = max(named.get(entry.entity, 0.0), score)
                for j in range(i, i + n):
                    consumed[j] = entries[0].entity
                i += n - 1
                break
            i += 1
        partial_hits: dict[int, set[str]] = defaultdict(set)
        sizes: dict[int, int] = {}
        for j, form in enumerate(forms):
            if j not in consumed:
                for pos, size in self._partial.get(form, ()):
                    partial_hits[pos].add(form)
                    sizes[pos] = size
        for pos, words in partial_hits.items():
            named[pos] = max(named.get(pos, 0.0), _PARTIAL_SCORE * len(words) / sizes[pos])
        return named, consumed, forms

    def _parse(self, question: str) -> _Parsed:
        cached = self._parse_cache.get(question)
        if cached is not None:
            return cached
        raw = _name_tokens(question)
        named, consumed, forms = self._match_names(raw)
        participants = tuple(
            p
            for p, s in sorted(named.items(), key=lambda kv: -kv[1])
            if s >= _PARTICIPANT_MIN and p in self._events_by_entity
        )
        part_set = set(participants)
        all_names = {raw[j][0] for j in consumed} | {forms[j] for j in consumed}
        part_names = {raw[j][0] for j, e in consumed.items() if e in part_set}
        part_names |= {forms[j] for j, e in consumed.items() if e in part_set}
        tokens = [(t.surface.lower(), t.lemma) for t in content_tokens(question)]

        def stems_without(excluded: set[str]) -> tuple[str, ...]:
            kept = (
                self._stem(lemma) for word, lemma in tokens if word not in excluded and lemma not in excluded
            )
            return tuple(s for s in dict.fromkeys(kept) if len(s) >= 3 and s not in _QUESTION_STEMS)

        parsed = _Parsed(
            named=named,
            participants=participants,
            stems=stems_without(part_names),
            attribute_stems=stems_without(all_names),
        )
        if len(self._parse_cache) >= _PARSE_CACHE_SIZE:
            self._parse_cache.clear()
        self._parse_cache[question] = parsed
        return parsed

    def _people(self, entity_ids: Iterable[str]) -> list[int]:
        return [p for p in (self._entity_pos.get(e) for e in entity_ids) if p is not None]

    def _latest_unmatched(self, people: list[int], matched: IntArray, limit: int) -> IntArray:
        """The ``limit`` latest events of each of ``people`` that are not in ``matched``."""
        taken: npt.NDArray[np.bool_] | None = None
        if matched.size:
            taken = np.zeros(len(self.event_ids), dtype=np.bool_)
            taken[matched] = True
        chunks = []
        for p in people:
            chronological = self._events_by_entity[p]
            take = 2 * limit
            while True:
                tail = chronological[-take:]
                if taken is not None:
                    tail = tail[~taken[tail]]
                if tail.size >= limit or take >= chronological.size:
                    break
                take *= 4
            chunks.append(tail[-limit:])
        latest = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.intp)
        return np.unique(latest) if len(chunks) > 1 else latest

    def _involves(self, positions: IntArray, people: Collection[int]) -> npt.NDArray[np.bool_]:
        """Per event position, whether one of ``people`` (entity positions) takes part."""
        if not people or positions.size == 0:
            return np.zeros(positions.size, dtype=np.bool_)
        # One slot more than there are entities: the -1 padding lands there.
        table = np.zeros(len(self.entity_ids) + 1, dtype=np.bool_)
        table[list(people)] = True
        out = table[self._who_columns[0][positions]]
        for column in self._who_columns[1:]:
            out |= table[column[positions]]
        return out

    # ---------------------------------------------------------------------------------- public

    def focus(self, question: str) -> frozenset[str]:
        """The stems of what ``question`` asks about: its keyword stems but question words."""
        return frozenset(self._stem.stems(question)) - _QUESTION_STEMS

    def participants(self, question: str) -> list[str]:
        """Ids of the entities named in ``question`` that take part in events, best match first."""
        return [self.entity_ids[p] for p in self._parse(question).participants]

    def entities(self, question: str, limit: int) -> dict[str, float]:
        """Entities the question names or points at.

        Args:
            question: The question as asked.
            limit: At most this many entities.

        Returns:
            ``{entity_id: score}`` best first. Names and aliases score near 1 (lower when
            misspelled, written as a lowercase common word, or only partly given); holders of a
            relation to a named entity 0.6, the named entities' own relation objects 0.4, and
            entities whose attribute or relation values share the question's words up to 0.5.
        """
        if limit <= 0 or not self.entity_ids:
            return {}
        parsed = self._parse(question)
        scores = np.zeros(len(self.entity_ids), dtype=np.float64)
        touched: list[IntArray] = []
        coverage = self._attribute_index.coverage(parsed.attribute_stems)
        if coverage is not None:
            positions, values = coverage
            scores[positions] = _ATTRIBUTE_SCORE * values
            touched.append(positions)
        linked: list[int] = list(parsed.named)
        for pos, named in parsed.named.items():
            for holder in self._holders.get(pos, ()):
                scores[holder] = max(scores[holder], _HOLDER_FACTOR * named)
                linked.append(holder)
            for obj in self._objects.get(pos, ()):
                scores[obj] = max(scores[obj], _OBJECT_FACTOR * named)
                linked.append(obj)
        for pos, named in parsed.named.items():
            scores[pos] = max(scores[pos], named)
        touched.append(np.asarray(linked, dtype=np.intp))
        positions = np.unique(np.concatenate(touched))
        return _top(positions, scores[positions], self._entity_ties, limit, self.entity_ids)

    def events(self, question: str, limit: int, entity_ids: Collection[str] = ()) -> dict[str, float]:
        """Events matching the question by participants and keywords.

        Args:
            question: The question as asked (or any phrase describing an event).
            limit: At most this many events.
            entity_ids: Participants to match; empty means the entities named in the question.

        Returns:
            ``{event_id: score}`` best first. With participants, the score is
            ``0.7 * keyword coverage + 0.3 * (takes part)``; without, the keyword coverage
            (IDF-weighted share of the question's content words found in what/where/outcome).
            Among equal scores the later event comes first.
        """
        if limit <= 0 or not self.event_ids:
            return {}
        parsed = self._parse(question)
        people = self._people(entity_ids) if entity_ids else list(parsed.participants)
        people = [p for p in people if p in self._events_by_entity]
        coverage = self._event_index.coverage(parsed.stems)
        if not people:
            if coverage is None:
                return {}
            return _top(*coverage, self._event_ties, limit, self.event_ids)
        parts: list[tuple[IntArray, FloatArray]] = []
        matched = np.empty(0, dtype=np.intp)
        if coverage is not None:
            matched, values = coverage
            member = self._involves(matched, people)
            parts.append((matched, _EVENT_KEYWORD_WEIGHT * values + _EVENT_PARTICIPANT_WEIGHT * member))
        # Events sharing no word all score the participation weight: only the latest can make it.
        latest = self._latest_unmatched(people, matched, limit)
        parts.append((latest, np.full(latest.size, _EVENT_PARTICIPANT_WEIGHT)))
        positions = np.concatenate([p for p, _ in parts])
        scores = np.concatenate([s for _, s in parts])
        return _top(positions, scores, self._event_ties, limit, self.event_ids)

    def topics(self, question: str, limit: int) -> dict[str, float]:
        """Topics whose label, keywords or key facts share the question's words.

        Returns:
            ``{topic_id: score}`` best first: IDF-weighted keyword coverage, key-fact words
            counting 0.4 of label and keyword words.
        """
        if limit <= 0 or not self.topic_ids:
            return {}
        coverage = self._topic_index.coverage(self._parse(question).stems)
        if coverage is None:
            return {}
        return _top(*coverage, self._topic_ties, limit, self.topic_ids)

    def match_event(self, phrase: str, entity_ids: Collection[str] = ()) -> str | None:
        """The event best described by ``phrase`` ('the charity race'), or None if no word matches.

        Scored as :meth:`events`, but an event must share at least one keyword with the phrase.

        Args:
            phrase: A short description of an event.
            entity_ids: Participants that make an event likelier; empty means those the phrase names.
        """
        if not self.event_ids:
            return None
        parsed = self._parse(phrase)
        coverage = self._event_index.coverage(parsed.stems)
        if coverage is None:
            return None
        positions, values = coverage
        people = self._people(entity_ids) if entity_ids else parsed.participants
        score = _EVENT_KEYWORD_WEIGHT * values + _EVENT_PARTICIPANT_WEIGHT * self._involves(positions, people)
        best = int(np.argmax(score + self._event_ties[positions]))
        return self.event_ids[int(positions[best])]

    def event_position(self, event_id: str) -> int | None:
        """Position of an event in :attr:`event_ids` and :attr:`event_dates` (None if unknown)."""
        return self._event_pos.get(event_id)

    def involves(self, positions: IntArray, entity_ids: Collection[str]) -> npt.NDArray[np.bool_]:
        """For each event position, whether one of ``entity_ids`` takes part in that event."""
        return self._involves(positions, self._people(entity_ids))

    def events_of(self, entity_ids: Iterable[str]) -> IntArray:
        """Positions of the events any of ``entity_ids`` takes part in (ascending positions)."""
        arrays = [self._events_by_entity[p] for p in self._people(entity_ids) if p in self._events_by_entity]
        if not arrays:
            return np.empty(0, dtype=np.intp)
        return np.unique(np.concatenate(arrays))

    def events_overlapping(self, first: int, last: int, entity_ids: Collection[str] = ()) -> IntArray:
        """Events whose day interval shares a day with ``[first, last]``.

        Args:
            first: First day, as ``date.toordinal()``.
            last: Last day (inclusive).
            entity_ids: Only events of these participants; empty means all events.

        Returns:
            Event positions, each once, in no particular order.
        """
        if not entity_ids:
            return self._timeline.overlapping(first, last)
        people = [p for p in self._people(entity_ids) if p in self._timelines]
        return self.union([self._timelines[p].overlapping(first, last) for p in people])

    def union(self, chunks: Sequence[IntArray]) -> IntArray:
        """The distinct event positions of ``chunks``, ascending."""
        if not chunks:
            return np.empty(0, dtype=np.intp)
        if len(chunks) == 1:
            return np.sort(chunks[0]) if chunks[0].size < 2048 else _mask_union(chunks, len(self.event_ids))
        if sum(c.size for c in chunks) * 16 < len(self.event_ids):
            return np.unique(np.concatenate(chunks))
        return _mask_union(chunks, len(self.event_ids))

    def events_around(self, entity_ids: Collection[str], day: int, window: int) -> IntArray:
        """Events of ``entity_ids`` (of everyone when empty) starting near a day.

        Args:
            entity_ids: Participants; empty means all events.
            day: A day ordinal (``date.toordinal()``).
            window: How many events to take on each side of ``day`` in each participant's
                chronological list (events starting on ``day`` are always included).

        Returns:
            Event positions (ascending), without order by distance.
        """
        if entity_ids:
            people = [p for p in self._people(entity_ids) if p in self._events_by_entity]
            lists = [(self._events_by_entity[p], self._starts_by_entity[p]) for p in people]
        else:
            lists = [(self._chrono, self._chrono_starts)]
        chunks = []
        for positions, starts in lists:
            lo = int(np.searchsorted(starts, day, side="left"))
            hi = int(np.searchsorted(starts, day, side="right"))
            chunks.append(positions[max(0, lo - window) : hi + window])
        if not chunks:
            return np.empty(0, dtype=np.intp)
        return np.unique(np.concatenate(chunks))

    def __repr__(self) -> str:
        return (
            f"AnchorLexicon(entities={len(self.entity_ids)}, events={len(self.event_ids)}, "
            f"topics={len(self.topic_ids)})"
        )


def _mask_union(chunks: Sequence[IntArray], n: int) -> IntArray:
    """Distinct positions through a boolean mask: linear in ``n``, no sort."""
    mask = np.zeros(n, dtype=np.bool_)
    for chunk in chunks:
        mask[chunk] = True
    return np.flatnonzero(mask)


def _strip_speaker(fact: str) -> str:
    """Key facts read 'Caroline: ...'; the speaker prefix is no keyword."""
    head, sep, rest = fact.partition(": ")
    return rest if sep and len(head.split()) <= 3 else fact


def _lowercase_words(events: Collection[EventAnchor], topics: Collection[TopicAnchor]) -> frozenset[str]:
    """Words the KB writes in lower case: a name made of them is also an ordinary word ('clay')."""
    texts: list[str] = []
    for event in events:
        texts.extend(t for t in (event.what, event.where, event.outcome) if t)
    for topic in topics:
        texts.append(topic.label)
        texts.extend(topic.keywords)
    return frozenset(w.casefold() for w in offline_text.lowercase_vocabulary(texts))


class _Records(Collection[R]):
    """The values of a mapping, read again on each iteration."""

    def __init__(self, records: Mapping[str, R]) -> None:
        self._records = records

    def __iter__(self) -> Iterator[R]:
        return iter(self._records.values())

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, item: object) -> bool:
        return any(item is record for record in self)


def _latest_day(kb: KBReader) -> date | None:
    if kb.utterances:
        return max(u.timestamp.date() for u in kb.utterances.values())
    return max((e.said_at.date() for e in kb.events.values()), default=None)
