"""BM25 over the turns as a lexical host of the harness, built on the ``bm25s`` library.

Beside plain vector retrieval (:class:`~gravity_core.eval.hosts.VectorHost`) and SGMem, a keyword
host shows what GRAVITY adds to a memory that matches words rather than meanings. Each turn is one
document, indexed as its :func:`~gravity_core.eval.hosts.render_turn` text (the session date and the
speaker included, like the vector host embeds it).

Tokenization (one function for the turns and the queries): lower case, bm25s's word pattern (runs of
two or more word characters), bm25s's English stopwords (``"en"``, Lucene's short list), and the
Snowball English stemmer from ``nltk``. That stemmer is the algorithm bm25s recommends through
PyStemmer; ``nltk`` is already in the ``eval`` extra (LoCoMo's token F1 stems with it) and is pure
Python, so the host adds no compiled dependency and needs no download. Scoring: bm25s's Lucene
variant with ``k1 = 1.5`` and ``b = 0.75``, pinned here rather than left to the library's defaults.

``bm25s`` and ``nltk`` come with the ``eval`` extra (``pip install 'gravity-memory[eval]'``); they
are imported when the first host is built, not with this module.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from gravity_core.embeddings.base import Matrix
from gravity_core.errors import MissingDependencyError
from gravity_core.eval.datasets import EvalSample
from gravity_core.eval.hosts import Host, Passage, passages_by_turn, render_turn
from gravity_core.schema import Utterance
from gravity_core.text.tokens import TokenCounter

__all__ = ["BM25Host", "bm25_available", "bm25_host_factory"]

logger = logging.getLogger(__name__)

K1 = 1.5
"""BM25's term-frequency saturation."""
B = 0.75
"""BM25's document-length normalization."""
METHOD = "lucene"
"""bm25s's scoring variant (Lucene's BM25: IDF never negative, so no turn scores below zero)."""
STOPWORDS = "en"
"""bm25s's English stopword list."""

_PACKAGES = ("bm25s", "nltk")


def bm25_available() -> bool:
    """Whether this installation has the BM25 host's packages (``bm25s``, and ``nltk`` for stemming)."""
    return all(importlib.util.find_spec(package) is not None for package in _PACKAGES)


class _Library:
    """The imported ``bm25s`` module and the stemmer, loaded once."""

    def __init__(self) -> None:
        try:
            import bm25s
        except ImportError as exc:
            raise MissingDependencyError("bm25s", "eval", "the bm25 host") from exc
        try:
            from nltk.stem.snowball import SnowballStemmer
        except ImportError as exc:
            raise MissingDependencyError("nltk", "eval", "the bm25 host's stemming") from exc
        # bm25s sets its own logger to DEBUG on import, which puts a line per index on the
        # application's handlers; NOTSET hands the level back to the application's logging set-up.
        logging.getLogger("bm25s").setLevel(logging.NOTSET)
        self.bm25s: Any = bm25s
        stem: Callable[[str], str] = SnowballStemmer("english").stem
        self.stem = lru_cache(maxsize=65536)(stem)

    def stem_words(self, words: list[str]) -> list[str]:
        """The stems of ``words``, in order (bm25s calls it with the distinct words of a batch)."""
        return [self.stem(word) for word in words]

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's terms: lower-cased words, English stopwords out, stemmed."""
        tokens: list[list[str]] = self.bm25s.tokenize(
            list(texts),
            lower=True,
            stopwords=STOPWORDS,
            stemmer=self.stem_words,
            return_ids=False,
            show_progress=False,
        )
        return [[term for term in terms if term] for terms in tokens]


@lru_cache(maxsize=1)
def _library() -> _Library:
    return _Library()


class BM25Host:
    """BM25 retrieval of turns: each turn a document of its :func:`render_turn` text.

    A ranking holds every turn up to ``limit``: the matching turns by score, then the turns that
    share no term with the query (score 0), so the harness can read as deep as any budget needs.
    Equal scores keep conversation order, so rankings are deterministic. A query with no indexed
    term (only stopwords, or words the conversation never uses) scores every turn 0 and so ranks
    the conversation in its own order.

    Args:
        utterances: the conversation.
        counter: token counter for the passages' costs.

    Raises:
        MissingDependencyError: ``bm25s`` or ``nltk`` (the ``eval`` extra) is not installed; the
            message names the pip command.
    """

    def __init__(self, utterances: Sequence[Utterance], *, counter: TokenCounter) -> None:
        self._library = _library()
        texts = [render_turn(u) for u in utterances]
        self.passages = [
            Passage(u.id, text, counter.count(text + "\n"), (u.id,), i)
            for i, (u, text) in enumerate(zip(utterances, texts, strict=True))
        ]
        corpus = self._library.tokenize(texts)
        # bm25s cannot index a corpus without a single term; such a host scores every turn 0.
        self._retriever: Any = None
        if any(corpus):
            self._retriever = self._library.bm25s.BM25(k1=K1, b=B, method=METHOD)
            self._retriever.index(corpus, show_progress=False)
        logger.debug("bm25 host: %d turns indexed", len(self.passages))

    @property
    def name(self) -> str:
        """``"bm25"``."""
        return "bm25"

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every turn for ``query``, in conversation order (0 where no term matches)."""
        (terms,) = self._library.tokenize([query])
        known = self._retriever.get_tokens_ids(terms) if self._retriever is not None and terms else []
        if not known:
            return np.zeros(len(self.passages), dtype=np.float32)
        return np.asarray(self._retriever.get_scores_from_ids(known), dtype=np.float32)

    def search(
        self, queries: Sequence[str], *, vectors: Matrix | None = None, limit: int = 200
    ) -> list[list[Passage]]:
        """Rank every turn by BM25 for each query, best first, equal scores in conversation order.

        Args:
            queries: the queries.
            vectors: ignored (BM25 reads only the words).
            limit: turns per query at most.

        Returns:
            One ranking per query, each ``min(limit, turns)`` long.
        """
        del vectors
        if not self.passages:
            return [[] for _ in queries]
        depth = min(limit, len(self.passages))
        order = np.arange(len(self.passages))
        rankings: list[list[Passage]] = []
        for query in queries:
            ranked = np.lexsort((order, -self.scores(query)))[:depth]
            rankings.append([self.passages[i] for i in ranked])
        return rankings

    def fetch(self, turn_ids: Sequence[str]) -> list[Passage]:
        """The turns with these ids, in the ids' order, each once; unknown ids are skipped."""
        return passages_by_turn(self.passages, turn_ids)


def bm25_host_factory(*, counter: TokenCounter) -> Callable[[EvalSample], Host]:
    """A factory of :class:`BM25Host`, one per sample.

    Raises:
        MissingDependencyError: ``bm25s`` or ``nltk`` (the ``eval`` extra) is not installed, so a run
            stops before any sample is read.
    """
    _library()

    def make(sample: EvalSample) -> Host:
        return BM25Host(sample.utterances, counter=counter)

    return make
