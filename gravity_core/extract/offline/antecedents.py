"""What an object pronoun of a reported clause stands for: "I printed it" after "Look at this photo".

An event read as "printed it" tells a reader, and an embedding, nothing. The nearest noun phrase
said before the pronoun, in the same turn or else in the turn before it, is what a listener would
take it for; events name it beside the pronoun ("printed it (this photo)"), and keep the pronoun, so
a wrong guess stays visibly a guess. Only third-person object pronouns are read (``it``, ``them`` and
a pronoun ``this``/``that``/``these``/``those``); ``them`` and the plural demonstratives take a
plural noun. Candidates are common nouns: a person is named by the event's ``who`` and a time by its
``when``, and nouns that stand for nothing in particular ("thing", "lot", "time") are skipped.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from typing import Any

from gravity_core.extract.offline.text import word_set

__all__ = ["antecedent", "object_pronoun"]

Token = Any  # spacy.tokens.Token
Doc = Any  # spacy.tokens.Doc

_SINGULAR = frozenset({"it", "this", "that"})
_PLURAL = frozenset({"them", "these", "those"})
_OBJECT_DEPS = frozenset({"dobj", "pobj", "dative"})
_MAX_WORDS = 5
# Nouns that never name what a pronoun stands for.
_VAGUE = word_set(
    """
thing things stuff lot lots bit kind sort way ways time times day days week weeks month months year years
moment moments idea ideas one ones part parts something anything everything nothing fun chance end
feeling feelings sense deal matter point question answer reason side piece
"""
)
_TIME_LABELS = frozenset({"DATE", "TIME"})
_ARRIVED = frozenset({"to", "through", "back", "home", "there", "here", "out"})
_EDGE_DETS = frozenset({"a", "an", "some", "any", "another"})


def object_pronoun(tokens: Iterable[Token]) -> Token | None:
    """The first third-person object pronoun among ``tokens`` ("printed it", "hosted a class for
    them"), or ``None``."""
    for token in tokens:
        word = token.lower_
        if token.dep_ in _OBJECT_DEPS and token.pos_ == "PRON" and (word in _SINGULAR or word in _PLURAL):
            return token
    return None


def antecedent(pronoun: Token, before: Sequence[Doc] = (), skip: Container[str] = ()) -> str | None:
    """The noun phrase ``pronoun`` most likely stands for: the nearest fitting one said before it
    in its own turn, else the last fitting one of ``before`` (earlier turns, nearest last).

    ``skip``: nouns (lemmas) that cannot be meant, such as places when the verb does not visit one
    ("took it at the lake"). "Made it to the top" has no antecedent: *make it* there is arriving.
    """
    verb = pronoun.head
    if verb.lemma_ == "make" and any(c.lower_ in _ARRIVED for c in verb.children):
        return None
    plural = pronoun.lower_ in _PLURAL
    own = [chunk for chunk in pronoun.doc.noun_chunks if chunk.end <= pronoun.i]
    for chunk in reversed(own):
        if _fits(chunk, plural, skip):
            return _rendered(chunk)
    for doc in reversed(before):
        for chunk in reversed(list(doc.noun_chunks)):
            if _fits(chunk, plural, skip):
                return _rendered(chunk)
    return None


def _fits(chunk: Any, plural: bool, skip: Container[str]) -> bool:
    root = chunk.root
    if root.pos_ != "NOUN" or root.lower_ in _VAGUE or root.ent_type_ in _TIME_LABELS:
        return False
    if root.lemma_.lower() in skip:
        return False
    if len(chunk) > _MAX_WORDS + 1:
        return False
    return (root.tag_ == "NNS") == plural


def _rendered(chunk: Any) -> str:
    words = [t for t in chunk if not (t.i == chunk.start and t.lower_ in _EDGE_DETS)][-_MAX_WORDS:]
    text = "".join(t.text_with_ws for t in words).strip()
    return text if words[0].pos_ == "PROPN" else text[:1].lower() + text[1:]
