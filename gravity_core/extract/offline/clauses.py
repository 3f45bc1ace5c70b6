"""Clauses of a dependency parse: their main verb, subject, span and rendering as said.

A clause is headed by a verb that is the root of its sentence or joined to one (``conj``,
``ccomp``, ``advcl``, ``xcomp`` heads are reached through their own heads). Its text is the verb's
subtree without the subject and without the clauses joined to it, so "I joined the Eastville Runners
and did my first 5k" gives two clauses, "joined the Eastville Runners" and "did my first 5k".
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Sequence
from typing import Any

__all__ = [
    "CLAUSE_DEPS",
    "SUBJECTS",
    "Clause",
    "clauses",
    "phrase",
    "subject_of",
]

Token = Any  # spacy.tokens.Token
Span = Any  # spacy.tokens.Span

SUBJECTS = frozenset({"nsubj", "nsubjpass", "csubj", "expl"})
_JOINED = frozenset({"conj", "advcl", "ccomp", "parataxis", "relcl", "acl"})
CLAUSE_DEPS = frozenset({"ROOT", "conj", "ccomp", "advcl", "parataxis", "relcl", "pcomp"})
# Words that frame an utterance, not its content: dropped from the edges of a rendered phrase.
_EDGE_WORDS = frozenset(
    {"and", "but", "so", "or", "then", "also", "just", "actually", "really", "finally", "even", "too", "well"}
)


class Clause:
    """One clause: ``verb`` heads it, ``tokens`` are its words in order (subject excluded)."""

    def __init__(self, verb: Token, subject: Token | None, tokens: Sequence[Token]) -> None:
        self.verb = verb
        self.subject = subject
        self.tokens = list(tokens)

    @property
    def start_char(self) -> int:
        """Where the clause starts in the text: at its subject's first word when the subject comes first."""
        first = self.subject if self.subject is not None and self.subject.i < self.tokens[0].i else None
        return first.left_edge.idx if first is not None else self.tokens[0].idx

    @property
    def end_char(self) -> int:
        """Where the clause's last token ends in the text."""
        last = self.tokens[-1]
        return last.idx + len(last.text)

    def children(self, *deps: str) -> list[Token]:
        """The verb's children attached by one of the dependency labels ``deps``."""
        return [c for c in self.verb.children if c.dep_ in deps]

    @property
    def negated(self) -> bool:
        """Whether the verb is negated ("did not go", "never went")."""
        return any(c.dep_ == "neg" for c in self.verb.children)

    @property
    def aux_lemmas(self) -> set[str]:
        """The verb's auxiliaries, as casefolded lemmas ("will", "have", "be")."""
        return {c.lemma_.casefold() for c in self.verb.children if c.dep_ in ("aux", "auxpass")}


def subject_of(verb: Token) -> Token | None:
    """The verb's subject, inherited from the verb it is coordinated with ("I went and bought ...")."""
    seen = 0
    while verb is not None and seen < 8:
        for child in verb.children:
            if child.dep_ in SUBJECTS:
                return child
        if verb.dep_ not in ("conj", "xcomp", "pcomp") or verb.head.i == verb.i:
            return None
        verb = verb.head.head if verb.dep_ == "pcomp" else verb.head
        seen += 1
    return None


def _clause_heads(sent: Span) -> Iterator[Token]:
    for token in sent:
        if token.pos_ not in ("VERB", "AUX"):
            continue
        if token.dep_ in CLAUSE_DEPS:
            yield token


def _excluded(verb: Token, subject: Token | None) -> set[int]:
    out: set[int] = set()
    if subject is not None and subject.head.i == verb.i:
        out.update(t.i for t in subject.subtree)
    for child in verb.children:
        if (
            child.dep_ in _JOINED
            and child.pos_ in ("VERB", "AUX")
            and (child.dep_ != "relcl" or verb.dep_ == "relcl")
        ):
            out.update(t.i for t in child.subtree)
        elif child.dep_ in ("cc", "mark", "intj", "discourse") or (
            child.dep_ == "punct" and child.i > verb.i and child.text in {",", ";", ":", "-", "--"}
        ):
            out.add(child.i)
        elif child.dep_ == "npadvmod" and child.i < verb.i:
            out.update(t.i for t in child.subtree)
    return out


def clauses(sent: Span) -> list[Clause]:
    """The clauses of a sentence, in order of their verbs."""
    out: list[Clause] = []
    for verb in _clause_heads(sent):
        subject = subject_of(verb)
        excluded = _excluded(verb, subject)
        tokens = [t for t in verb.subtree if t.i not in excluded]
        tokens = _contiguous(tokens, verb)
        if tokens:
            out.append(Clause(verb, subject, tokens))
    return out


def _contiguous(tokens: list[Token], verb: Token) -> list[Token]:
    """The run of tokens around the verb with no gap (a gap is a joined clause taken out)."""
    if not tokens:
        return tokens
    at = next(k for k, t in enumerate(tokens) if t.i == verb.i)
    lo = at
    while lo > 0 and tokens[lo - 1].i == tokens[lo].i - 1:
        lo -= 1
    hi = at
    while hi + 1 < len(tokens) and tokens[hi + 1].i == tokens[hi].i + 1:
        hi += 1
    return tokens[lo : hi + 1]


def phrase(tokens: Iterable[Token], drop: Container[int] = ()) -> str:
    """The tokens as written (original spacing), without ``drop`` and trimmed at the edges.

    Edge punctuation and framing words ("and", "so", "actually") are trimmed.
    """
    kept = [t for t in tokens if t.i not in drop]
    while kept and (kept[0].is_punct or kept[0].lower_ in _EDGE_WORDS or kept[0].dep_ == "cc"):
        kept.pop(0)
    while kept and (kept[-1].is_punct or kept[-1].lower_ in _EDGE_WORDS or kept[-1].dep_ == "cc"):
        kept.pop()
    text = ""
    for k, token in enumerate(kept):
        gap = k > 0 and (kept[k - 1].i != token.i - 1 or bool(kept[k - 1].whitespace_))
        text += (" " if gap else "") + token.text
    return text.strip()
