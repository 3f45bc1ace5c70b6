"""One parse per turn: the spaCy docs and time expressions that entity and event extraction share.

What the extractors look up in a parse again and again (the entity a token is part of, the noun
chunk a token heads, the sentence a token is in, the time phrases in a stretch of text) is read
off the doc once per turn (:class:`ParsedTurn`), so a long utterance costs time linear in its
length: spaCy builds a new tuple of spans on every read of ``doc.ents``, ``doc.noun_chunks`` and
``token.sent``. A text longer than :data:`MAX_PARSE_CHARS` is parsed in pieces cut after a
sentence, joined back into one doc of the whole text.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from gravity_core.extract.offline.parse_cache import ParseCache
from gravity_core.extract.offline.text import normalize_quotes
from gravity_core.schema import Utterance
from gravity_core.temporal import TimeMention, find_time_expressions

__all__ = ["MAX_PARSE_CHARS", "ParsedTurn", "noun_phrases", "parse_batch", "parsed_texts"]

_BATCH = 64
_PHRASE_DROPS = frozenset({"det", "poss", "predet", "punct", "case", "nummod", "quantmod"})
_VAGUE = frozenset({"thing", "things", "stuff", "lot", "bit", "kind", "way", "time", "day", "one", "ones"})

#: The longest text parsed in one piece. spaCy refuses a text over ``nlp.max_length`` (1,000,000
#: characters by default), and its parser's working memory grows with the text parsed at once; a
#: longer text is parsed in pieces of at most this many characters, each cut after a sentence.
MAX_PARSE_CHARS = 100_000
# A piece ends after a sentence's end (".", "!" or "?", closing quotes or brackets) and its spaces,
# else after a line break, else after any space.
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_LINE_END = re.compile(r"\n\s*")
_SPACE = re.compile(r"\s+")
_CUTS = (_SENTENCE_END, _LINE_END, _SPACE)


@dataclass(frozen=True)
class ParsedTurn:
    """An utterance with its parse (``doc.text`` is the text with straight quotes) and time phrases.

    The lookups below read the doc once, on first use, and answer from what they kept.
    """

    utterance: Utterance
    doc: Any  # spacy.tokens.Doc
    times: tuple[TimeMention, ...]

    def times_in(self, start: int, end: int) -> list[TimeMention]:
        """The time phrases that begin inside the character span ``[start, end)``."""
        return list(self.times[bisect_left(self._time_starts, start) : bisect_left(self._time_starts, end)])

    @cached_property
    def _time_starts(self) -> list[int]:
        return [m.start for m in self.times]  # in text order (find_time_expressions)

    @cached_property
    def ents(self) -> tuple[Any, ...]:
        """``doc.ents``, read once."""
        return tuple(self.doc.ents)

    @cached_property
    def _entity_by_token(self) -> list[Any | None]:
        out: list[Any | None] = [None] * len(self.doc)
        for ent in self.ents:
            out[ent.start : ent.end] = [ent] * (ent.end - ent.start)
        return out

    def entity_at(self, i: int) -> Any | None:
        """The entity span (of :attr:`ents`) holding token ``i``, if any."""
        return self._entity_by_token[i]

    @cached_property
    def noun_chunks(self) -> tuple[Any, ...]:
        """``doc.noun_chunks``, read once: in text order, none inside another."""
        return tuple(self.doc.noun_chunks)

    @cached_property
    def _chunk_by_root(self) -> dict[int, Any]:
        out: dict[int, Any] = {}
        for chunk in self.noun_chunks:
            out.setdefault(chunk.root.i, chunk)
        return out

    def chunk_headed_by(self, i: int) -> Any | None:
        """The first noun chunk whose root is token ``i``, if any."""
        return self._chunk_by_root.get(i)

    @cached_property
    def sentences(self) -> tuple[Any, ...]:
        """``doc.sents``, read once."""
        return tuple(self.doc.sents)

    @cached_property
    def _sentence_by_token(self) -> list[int]:
        out = [0] * len(self.doc)
        for k, sent in enumerate(self.sentences):
            out[sent.start : sent.end] = [k] * (sent.end - sent.start)
        return out

    def sentence_of(self, i: int) -> Any:
        """The sentence holding token ``i`` (what ``doc[i].sent`` is, without walking the doc)."""
        return self.sentences[self._sentence_by_token[i]]

    @cached_property
    def _questions(self) -> list[bool]:
        return [sent.text.rstrip().endswith("?") for sent in self.sentences]

    def in_question(self, i: int) -> bool:
        """Whether token ``i`` is in a sentence that ends with a question mark."""
        return self._questions[self._sentence_by_token[i]]


def parsed_texts(batch: Sequence[Utterance]) -> list[str]:
    """The texts of ``batch`` as they are parsed (and as the parse cache knows them)."""
    return [normalize_quotes(u.text) for u in batch]


def parse_batch(
    nlp: Any, batch: Sequence[Utterance], cache: ParseCache | None = None, pipeline: str = ""
) -> list[ParsedTurn]:
    """Parse every utterance of ``batch`` in one ``nlp.pipe`` pass, or read the parses from ``cache``.

    The cache keeps them under the pipeline's id ``pipeline``.
    """
    texts = parsed_texts(batch)
    docs = cache.get(nlp, pipeline, texts) if cache is not None else None
    if docs is None:
        docs = _parse(nlp, texts)
        if cache is not None:
            cache.put(pipeline, texts, docs)
    speakers = {u.speaker.casefold() for u in batch}
    return [
        ParsedTurn(u, _without_greeting_words(doc, speakers), tuple(find_time_expressions(text, u.timestamp)))
        for u, text, doc in zip(batch, texts, docs, strict=True)
    ]


def _parse(nlp: Any, texts: Sequence[str]) -> list[Any]:
    """The docs of ``texts``, parsed in one ``nlp.pipe`` pass.

    A text over :data:`MAX_PARSE_CHARS` (or ``nlp.max_length``) is parsed piece by piece and joined
    back (``doc.text`` is the whole text).
    """
    limit = min(MAX_PARSE_CHARS, nlp.max_length)
    parsed = iter(list(nlp.pipe((t for t in texts if len(t) <= limit), batch_size=_BATCH)))
    return [next(parsed) if len(text) <= limit else _parse_long(nlp, text, limit) for text in texts]


def _parse_long(nlp: Any, text: str, limit: int) -> Any:
    """One doc of a long text, parsed one piece at a time (the parser's memory is one piece's)."""
    from spacy.tokens import Doc  # the local extra; parse_batch only runs with it installed

    return Doc.from_docs(list(nlp.pipe(_pieces(text, limit), batch_size=1)), ensure_whitespace=False)


def _pieces(text: str, limit: int) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` characters that join back into it.

    Each piece ends after a sentence in its second half (else after a line break, else after a space).
    """
    out: list[str] = []
    start = 0
    while len(text) - start > limit:
        window = text[start : start + limit]
        cut = next(filter(None, (_last_cut(pattern, window) for pattern in _CUTS)), limit)
        out.append(window[:cut])
        start += cut
    out.append(text[start:])
    return out


def _last_cut(pattern: re.Pattern[str], window: str) -> int:
    """Where the last match of ``pattern`` in the second half of ``window`` ends (0 if none).

    A match running to the window's end is not one (its spaces may go on after it).
    """
    ends = [m.end() for m in pattern.finditer(window, len(window) // 2) if m.end() < len(window)]
    return ends[-1] if ends else 0


def _without_greeting_words(doc: Any, speakers: set[str]) -> Any:
    """``doc`` with "Yep John", "Woah Joanna" at the start of a sentence cut to the speaker's name.

    The small pipeline tags an interjection before a name as part of it when the two open a
    sentence and a comma follows ("Yep John, ..."); when the last word is a speaker's name, the
    span is that speaker addressed.
    """
    from spacy.tokens import Span  # the local extra; parse_batch only runs with it installed

    changed = False
    ents = []
    for ent in doc.ents:
        after = doc[ent.end] if ent.end < len(doc) else None
        if (
            ent.label_ == "PERSON"
            and len(ent) > 1
            and ent.start == ent.sent.start
            and ent[-1].lower_ in speakers
            and (after is None or after.is_punct)
        ):
            ent = Span(doc, ent.end - 1, ent.end, label="PERSON")
            changed = True
        ents.append(ent)
    if changed:
        doc.ents = ents
    return doc


def noun_phrases(turn: ParsedTurn) -> list[str]:
    """The turn's noun phrases as written, without determiners and possessives.

    "the pottery class" -> "pottery class"; pronouns and vague heads ("things", "a lot") are left out.
    """
    out: list[str] = []
    for chunk in turn.noun_chunks:
        root = chunk.root
        if root.pos_ == "PRON" or root.lower_ in _VAGUE or root.like_num:
            continue
        words = [
            t.text if t.pos_ == "PROPN" else t.lower_
            for t in chunk
            if t.dep_ not in _PHRASE_DROPS and not t.is_stop or t.i == root.i
        ]
        if words:
            out.append(" ".join(words))
    return out
