"""One parse per turn: the spaCy docs and time expressions that entity and event extraction share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gravity_core.extract.offline.parse_cache import ParseCache
from gravity_core.extract.offline.text import normalize_quotes
from gravity_core.schema import Utterance
from gravity_core.temporal import TimeMention, find_time_expressions

__all__ = ["ParsedTurn", "noun_phrases", "parse_batch", "parsed_texts"]

_BATCH = 64
_PHRASE_DROPS = frozenset({"det", "poss", "predet", "punct", "case", "nummod", "quantmod"})
_VAGUE = frozenset({"thing", "things", "stuff", "lot", "bit", "kind", "way", "time", "day", "one", "ones"})


@dataclass(frozen=True)
class ParsedTurn:
    """An utterance with its parse (``doc.text`` is the text with straight quotes) and time phrases."""

    utterance: Utterance
    doc: Any  # spacy.tokens.Doc
    times: tuple[TimeMention, ...]

    def times_in(self, start: int, end: int) -> list[TimeMention]:
        """The time phrases that begin inside the character span ``[start, end)``."""
        return [m for m in self.times if start <= m.start < end]


def parsed_texts(batch: Sequence[Utterance]) -> list[str]:
    """The texts of ``batch`` as they are parsed (and as the parse cache knows them)."""
    return [normalize_quotes(u.text) for u in batch]


def parse_batch(
    nlp: Any, batch: Sequence[Utterance], cache: ParseCache | None = None, pipeline: str = ""
) -> list[ParsedTurn]:
    """Parse every utterance of ``batch`` in one ``nlp.pipe`` pass (or read the parses from
    ``cache``, kept under the pipeline's id ``pipeline``)."""
    texts = parsed_texts(batch)
    docs = cache.get(nlp, pipeline, texts) if cache is not None else None
    if docs is None:
        docs = list(nlp.pipe(texts, batch_size=_BATCH))
        if cache is not None:
            cache.put(pipeline, texts, docs)
    speakers = {u.speaker.casefold() for u in batch}
    return [
        ParsedTurn(u, _without_greeting_words(doc, speakers), tuple(find_time_expressions(text, u.timestamp)))
        for u, text, doc in zip(batch, texts, docs, strict=True)
    ]


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
    """The turn's noun phrases as written, without determiners and possessives ("the pottery class"
    -> "pottery class"); pronouns and vague heads ("things", "a lot") are left out."""
    out: list[str] = []
    for chunk in turn.doc.noun_chunks:
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
