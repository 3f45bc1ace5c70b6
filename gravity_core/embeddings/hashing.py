"""A deterministic, dependency-free embedder whose similarities mean something: for tests.

Texts that share words (after a light stemming) or spellings get higher cosine; the vectors are
the same on every machine and in every process, because features are hashed with blake2b rather
than Python's salted ``hash()``. It is shipped so that applications can test their GRAVITY
pipelines without a model::

    from gravity_core.embeddings import HashingEmbedder

    embedder = HashingEmbedder()          # name "hashing-256", dim 256
    vectors = embedder.embed(["Caroline paints", "She painted a lake"])

It is not a semantic model: "puppy" and "dog" share nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from gravity_core.embeddings._texts import text_list
from gravity_core.embeddings.base import Matrix
from gravity_core.errors import ConfigurationError

__all__ = ["HashingEmbedder", "STOP_WORDS"]

_STOP_WORDS_TEXT = """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me
    more most my myself no nor not now of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves also get got oh yeah yes ok okay really
    im ive id ill youre youve youll hes shes weve theyre theyve dont doesnt didnt isnt arent
    wasnt werent cant couldnt wont wouldnt shouldnt thats whats theres lets s t m d ll ve re
"""
#: English function words ignored as features (apostrophes are removed before matching).
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())

_TOKEN_RE = re.compile(r"[^\W_]+")
_APOSTROPHES_RE = re.compile(r"['\u2019]")
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.25
_EMPTY_FEATURE = "\x00empty"
_HASH_PERSON = b"gravity-hash"


class HashingEmbedder:
    """Signed feature hashing of word stems and character trigrams into ``dim`` buckets.

    Each text is lower-cased and split into words; stop words are dropped (unless nothing else is
    left). Every remaining word contributes its stem (a light suffix strip, so "painting", "paints"
    and "painted" share "paint") with weight 1 and its character trigrams (with word boundaries)
    with weight 0.25. Features are hashed with blake2b into a bucket and a sign; rows are
    L2-normalized. A text with no word at all (empty, punctuation) maps to one fixed vector.

    Args:
        dim: number of buckets (the vector dimension).

    Raises:
        ConfigurationError: ``dim`` is below 1.
    """

    def __init__(self, dim: int = 256) -> None:
        if dim < 1:
            raise ConfigurationError(f"dim must be >= 1, got {dim}")
        self._dim = dim

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim})"

    @property
    def name(self) -> str:
        """``hashing-<dim>``."""
        return f"hashing-{self._dim}"

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts``.

        Args:
            texts: the texts; empty strings are allowed.

        Returns:
            float32 array of shape ``(len(texts), dim)``, rows L2-normalized, in input order.

        Raises:
            ConfigurationError: ``texts`` is not a sequence of strings.
        """
        items = text_list(texts)
        out = np.zeros((len(items), self._dim), dtype=np.float64)
        for row, text in enumerate(items):
            for feature, weight in _features(text):
                bucket, sign = self._slot(feature)
                out[row, bucket] += sign * weight
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        # Opposite signs can cancel every bucket of a tiny text; the fixed vector keeps rows unit-norm.
        zero = norms[:, 0] == 0.0
        if zero.any():
            bucket, sign = self._slot(_EMPTY_FEATURE)
            out[zero, bucket] = sign
            norms[zero] = 1.0
        return (out / norms).astype(np.float32)

    def _slot(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=_HASH_PERSON).digest()
        value = int.from_bytes(digest, "big")
        return value % self._dim, 1.0 if value >> 63 else -1.0


def _features(text: str) -> list[tuple[str, float]]:
    """The weighted features of ``text``: ``w:<stem>`` for each word and ``c:<trigram>`` for its trigrams."""
    words = _TOKEN_RE.findall(_APOSTROPHES_RE.sub("", text.lower()))
    content = [word for word in words if word not in STOP_WORDS] or words
    if not content:
        return [(_EMPTY_FEATURE, 1.0)]
    out: list[tuple[str, float]] = []
    for word in content:
        out.append(("w:" + _stem(word), _WORD_WEIGHT))
        padded = f"#{word}#"
        out.extend(("c:" + padded[i : i + 3], _TRIGRAM_WEIGHT) for i in range(len(padded) - 2))
    return out


def _stem(word: str) -> str:
    """A light English suffix strip: painting, paints, painted -> paint; parties -> party; likes -> lik.

    Not a linguistic stemmer: it only has to map the usual inflections of a word to one key.
    """
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s", "ly"):
        if not word.endswith(suffix) or len(word) - len(suffix) < 3:
            continue
        if suffix == "s" and word.endswith(("ss", "us", "is")):
            continue
        word = word[: -len(suffix)]
        # running -> runn -> run; stopped -> stopp -> stop
        if suffix in ("ing", "ed") and len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "lsz":
            word = word[:-1]
        break
    # make/making/makes -> mak: the silent e is dropped with or without a suffix
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word
