"""Entity names: a KB's name table, and the entities a question's words name.

Names and aliases match as token n-grams (case-, accent- and possessive-insensitive), small
misspellings through ``difflib`` over the name vocabulary only, and words of multi-word names on
their own. The table also links entities through their relations (the holders and objects of a
relation to a named entity), which :class:`~gravity_core.query.matching.lexicon.AnchorLexicon`
scores lower than the names.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from gravity_core.extract.offline import text as offline_text
from gravity_core.extract.offline.keywords import STOP_WORDS
from gravity_core.query.config import MatchWeights
from gravity_core.query.matching.keywords import Stemmer, stem
from gravity_core.schema import EntityAnchor, EventAnchor, TopicAnchor

__all__ = ["NameTable", "lowercase_words", "name_key", "name_tokens"]

_MAX_NGRAM = 6
_MIN_FUZZY_LEN = 4
_FUZZY_CANDIDATES = 20  # difflib runs on the names sharing the most letter pairs only
_FUZZY_CACHE_SIZE = 4096

_NAME_TOKEN_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


def _fold(token: str) -> str:
    """Case-folded, accents removed."""
    if token.isascii():
        return token.casefold()
    decomposed = unicodedata.normalize("NFKD", token)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def name_tokens(text: str) -> list[tuple[str, bool]]:
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


def name_key(text: str) -> tuple[str, ...]:
    """The tokens a name is looked up by (at most the longest n-gram matched)."""
    return tuple(t for t, _ in name_tokens(text))[:_MAX_NGRAM]


def _bigrams(word: str) -> set[str]:
    padded = f"^{word}$"
    return {padded[i : i + 2] for i in range(len(padded) - 1)}


def lowercase_words(events: Collection[EventAnchor], topics: Collection[TopicAnchor]) -> frozenset[str]:
    """Words the KB writes in lower case: a name made of them is also an ordinary word ('clay')."""
    texts: list[str] = []
    for event in events:
        texts.extend(t for t in (event.what, event.where, event.outcome) if t)
    for topic in topics:
        texts.append(topic.label)
        texts.extend(topic.keywords)
    return frozenset(w.casefold() for w in offline_text.lowercase_vocabulary(texts))


@dataclass(frozen=True, slots=True)
class _NameEntry:
    entity: int
    alias: bool  # an alias, not the entity's name
    common: bool  # every word of the name is also a common word


#: What a question names: ``(entity position -> score, token position -> entity position, resolved forms)``.
NameMatch = tuple[dict[int, float], dict[int, int], list[str]]


class NameTable:
    """The names and aliases of a KB's entities (by position), and the relations linking them.

    Args:
        entities: The KB's entities, in the order of their positions.
        entity_pos: Entity id -> position.
        lowercase: Words the KB writes in lower case (:func:`lowercase_words`).
        keywords: The stems the KB's keyword indexes hold: ordinary words, never read as misspelt names.
        stemmer: The lexicon's stemmer.
    """

    def __init__(
        self,
        entities: Collection[EntityAnchor],
        entity_pos: Mapping[str, int],
        lowercase: frozenset[str],
        keywords: Iterable[str],
        stemmer: Stemmer,
    ) -> None:
        self._stem = stemmer
        self._build_names(entities, lowercase)
        self._build_vocabulary(keywords)
        self._build_relations(entities, entity_pos)
        self._fuzzy_cache: dict[str, tuple[str, float] | None] = {}

    def _build_names(self, entities: Collection[EntityAnchor], lowercase: frozenset[str]) -> None:
        names: dict[tuple[str, ...], list[_NameEntry]] = defaultdict(list)
        partial: dict[str, list[tuple[int, int]]] = defaultdict(list)
        commons = STOP_WORDS | offline_text.STOP_WORDS | offline_text.COMMON_WORDS | lowercase
        for pos, entity in enumerate(entities):
            forms = [(entity.name, False)] + [(a, True) for a in entity.aliases]
            for form, alias in forms:
                key = name_key(form)
                if not key:
                    continue
                common = all(t in commons for t in key)
                if all(e.entity != pos for e in names[key]):
                    names[key].append(_NameEntry(pos, alias, common))
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

    def _build_vocabulary(self, keywords: Iterable[str]) -> None:
        # Words known to be ordinary words are never fuzzy-matched to names. The indexes hold
        # stems, and names occur in the texts they index ('caroline' -> 'carolin').
        vocab: set[str] = set(STOP_WORDS | offline_text.STOP_WORDS | offline_text.COMMON_WORDS)
        vocab.update(keywords)
        self._vocabulary = frozenset(vocab - self._name_words - {stem(w) for w in self._name_words})

    def _build_relations(self, entities: Collection[EntityAnchor], entity_pos: Mapping[str, int]) -> None:
        unique_names = {key: entries[0].entity for key, entries in self._names.items() if len(entries) == 1}
        holders: dict[int, set[int]] = defaultdict(set)
        objects: dict[int, set[int]] = defaultdict(set)
        for pos, entity in enumerate(entities):
            for rel in entity.relations:
                target = entity_pos.get(rel.object_id) if rel.object_id else None
                if target is None:
                    target = unique_names.get(name_key(rel.object))
                if target is not None and target != pos:
                    holders[target].add(pos)
                    objects[pos].add(target)
        self._holders = {k: tuple(sorted(v)) for k, v in holders.items()}
        self._objects = {k: tuple(sorted(v)) for k, v in objects.items()}
        self._unique_names = unique_names

    def unique(self, name: str) -> int | None:
        """The position of the one entity called ``name`` (None if none or several are)."""
        return self._unique_names.get(name_key(name))

    def holders(self, entity: int) -> tuple[int, ...]:
        """Positions of the entities holding a relation to ``entity``."""
        return self._holders.get(entity, ())

    def objects(self, entity: int) -> tuple[int, ...]:
        """Positions of the objects of ``entity``'s relations."""
        return self._objects.get(entity, ())

    def _closest(self, word: str) -> tuple[str, float] | None:
        """The name word closest to ``word`` by difflib ratio (first of the best), cached per table."""
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
            if best is None or ratio > best[1]:
                best = (cand, ratio)
        if len(self._fuzzy_cache) >= _FUZZY_CACHE_SIZE:
            self._fuzzy_cache.clear()
        self._fuzzy_cache[word] = best
        return best

    def _resolve_token(self, word: str, weights: MatchWeights) -> tuple[str, float]:
        """The name-vocabulary form of a question word and the confidence of that reading."""
        if word in self._name_words:
            return word, 1.0
        if len(word) > 3 and word.endswith("s") and word[:-1] in self._name_words:
            return word[:-1], weights.plural
        if len(word) < _MIN_FUZZY_LEN or word in self._vocabulary or self._stem(word) in self._vocabulary:
            return word, 1.0
        hit = self._closest(word)
        if hit is None or hit[1] < weights.fuzzy_cutoff:
            return word, 1.0
        return hit[0], hit[1] * weights.fuzzy

    def match(self, raw: list[tuple[str, bool]], weights: MatchWeights) -> NameMatch:
        """The entities ``raw`` (:func:`name_tokens`) names, with their scores.

        Also the token positions they used, and the resolved forms of the tokens.
        """
        resolved = [self._resolve_token(w, weights) for w, _ in raw]
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
                    score = (weights.alias if entry.alias else weights.name) * factor
                    if entry.common and lowercase:
                        score *= weights.lowercase_common
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
            named[pos] = max(named.get(pos, 0.0), weights.partial * len(words) / sizes[pos])
        return named, consumed, forms
