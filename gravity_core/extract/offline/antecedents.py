"""What an object pronoun of a reported clause stands for: "I printed it" after "I finished my screenplay".

An event read as "printed it" tells a reader, and an embedding, nothing. The noun phrase a
listener would take the pronoun for is named beside it ("printed it (my screenplay)"), and the
pronoun is kept, so a guess stays visibly a guess. The guess is cautious, because a wrong one
misleads. Only third-person object pronouns are read (``it``, ``them`` and a pronoun
``this``/``that``/``these``/``those``, not a relative "that"). The phrase comes from the same turn
(the turn before is most often a suggestion the pronoun does not name), before the pronoun's
clause (never its own subject or object: "a friend made it", "spent time on it"); it holds a core
role (subject, object, complement, a conjunct of one, or the object of a preposition such as
*of*, *with*, *to*) and is a common noun of the pronoun's number that stands for something in
particular (not "thing", "time", "while", an exclamation or a question). Idioms whose pronoun
stands for nothing ("hit it off", "made it to the top", "keep it up", "give it a try") name nothing.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Container, Iterable, Sequence
from typing import Any

from gravity_core.extract.offline.text import word_set

__all__ = ["Antecedents", "object_pronoun"]

Token = Any  # spacy.tokens.Token
Span = Any  # spacy.tokens.Span

_SINGULAR = frozenset({"it", "this", "that"})
_PLURAL = frozenset({"them", "these", "those"})
_OBJECT_DEPS = frozenset({"dobj", "pobj", "dative"})
_MAX_WORDS = 5
# Nouns that never name what a pronoun stands for.
_VAGUE = word_set(
    """
thing stuff lot bit kind sort way time day week month year age while moment idea one part something
anything everything nothing fun chance end feeling sense deal matter point question answer reason side
piece effort difference cheer wow yay
"""
)
_TIME_LABELS = frozenset({"DATE", "TIME"})
_CORE_DEPS = frozenset({"nsubj", "nsubjpass", "dobj", "attr", "appos", "conj", "oprd"})
_OBJECT_PREPS = frozenset({"of", "with", "about", "at", "on", "to", "for", "from", "into"})
_WH_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
_EDGE_DETS = frozenset({"a", "an", "some", "any", "another"})
# Verb + particle idioms whose "it" stands for nothing: "made it to the top", "hit it off".
_IDIOMS = {
    "make": frozenset({"to", "through", "back", "home", "there", "here"}),
    "hit": frozenset({"off"}),
    "keep": frozenset({"up"}),
}
# "give it a try": the pronoun is whatever was suggested, seldom said in the speaker's own turn.
_TRIES = word_set("try go shot whirl")


def object_pronoun(tokens: Iterable[Token]) -> Token | None:
    """The first third-person object pronoun among ``tokens``, or ``None``.

    Such as "it" in "printed it" or "them" in "hosted a class for them"; a relative "that" is not one.
    """
    for token in tokens:
        word = token.lower_
        if (
            token.dep_ in _OBJECT_DEPS
            and token.pos_ == "PRON"
            and token.tag_ not in _WH_TAGS
            and (word in _SINGULAR or word in _PLURAL)
        ):
            return token
    return None


class Antecedents:
    """The noun phrase a pronoun most likely stands for, among one parse's noun chunks.

    See the module doc. Each chunk is looked at once per kind of pronoun, not once per pronoun.

    Args:
        chunks: the parse's noun chunks, in text order and none inside another (``doc.noun_chunks``).
    """

    def __init__(self, chunks: Sequence[Span]) -> None:
        self._chunks = chunks
        self._ends = [chunk.end for chunk in chunks]  # ascending
        # (plural, skip) -> for each chunk, the last chunk up to it that fits such a pronoun (-1: none)
        self._last_fit: dict[tuple[bool, frozenset[str]], list[int]] = {}

    def of(self, pronoun: Token, skip: frozenset[str] = frozenset()) -> str | None:
        """The noun phrase ``pronoun`` most likely stands for, or ``None``.

        Args:
            pronoun: an object pronoun (:func:`object_pronoun`) of the parse the chunks are of.
            skip: nouns (lemmas) that cannot be meant, such as places when the verb does not visit one.
        """
        verb = _verb_of(pronoun)
        if _idiom(verb):
            return None
        own = bisect_right(self._ends, verb.left_edge.i)  # the chunks that end before its clause
        if own == 0:
            return None
        last = self._fitting(pronoun.lower_ in _PLURAL, skip)[own - 1]
        return _rendered(self._chunks[last]) if last >= 0 else None

    def _fitting(self, plural: bool, skip: frozenset[str]) -> list[int]:
        table = self._last_fit.get((plural, skip))
        if table is None:
            table, last = [], -1
            for k, chunk in enumerate(self._chunks):
                if _fits(chunk, plural, skip):
                    last = k
                table.append(last)
            self._last_fit[(plural, skip)] = table
        return table


def _verb_of(pronoun: Token) -> Token:
    """The verb whose clause holds ``pronoun``, through the verbs it complements.

    "balance on it" -> "balance", "left class early to do it" -> "left".
    """
    token = pronoun
    while token.dep_ in ("pobj", "prep", "dative", "dobj") and token.head is not token:
        token = token.head
    while token.dep_ == "xcomp" and token.head is not token:
        token = token.head
    return token


def _idiom(verb: Token) -> bool:
    particles = {c.lower_ for c in verb.children if c.dep_ in ("prt", "prep", "advmod")}
    if verb.lemma_.casefold() == "give" and any(c.lemma_.casefold() in _TRIES for c in verb.children):
        return True
    return bool(particles & _IDIOMS.get(verb.lemma_.casefold(), frozenset()))


def _fits(chunk: Span, plural: bool, skip: Container[str]) -> bool:
    root = chunk.root
    if root.pos_ != "NOUN" or root.ent_type_ in _TIME_LABELS or len(chunk) > _MAX_WORDS + 1:
        return False
    if root.lemma_.casefold() in _VAGUE or root.lemma_.casefold() in skip:
        return False
    if any(t.pos_ == "INTJ" or t.tag_ in _WH_TAGS for t in chunk):
        return False
    core = root.dep_ in _CORE_DEPS or (root.dep_ == "pobj" and root.head.lower_ in _OBJECT_PREPS)
    return core and (root.tag_ == "NNS") == plural


def _rendered(chunk: Span) -> str:
    words = [t for t in chunk if not (t.i == chunk.start and t.lower_ in _EDGE_DETS)][-_MAX_WORDS:]
    text = "".join(t.text_with_ws for t in words).strip()
    return text if words[0].pos_ == "PROPN" else text[:1].lower() + text[1:]
