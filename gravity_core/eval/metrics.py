"""Per-question scores: evidence recall, answer coverage, and LoCoMo's token F1.

Evidence recall and answer coverage need no model: they measure what an answering model would see.
Token F1 follows the LoCoMo benchmark's own scorer (normalization, Porter stemming, the multi-hop
and open-domain rules), written anew here.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from functools import lru_cache

from gravity_core.errors import MissingDependencyError

__all__ = [
    "COVERAGE_STOP_WORDS",
    "answer_covered",
    "content_words",
    "evidence_recall",
    "locomo_f1",
    "normalize_answer",
    "text_words",
    "token_f1",
]

_STOP_TEXT = """
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers
herself it its itself they them their theirs themselves what which who whom this that these those am is
are was were be been being have has had having do does did doing a an the and but if or because as
until while of at by for with about against between into through during before after above below to
from up down in out on off over under again further then once here there when where why how all any
both each few more most other some such no nor not only own same so than too very s t can will just
don should now d ll m o re ve y
"""

COVERAGE_STOP_WORDS: frozenset[str] = frozenset(_STOP_TEXT.split())
"""Function words left out of the gold answer before checking coverage (NLTK's English list, without
its apostrophe forms, which the tokenizer splits anyway)."""

_WORD = re.compile(r"[a-z0-9]+")
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
_NUMBERS_TEXT = """
zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
seventeen eighteen nineteen twenty
"""
_NUMBER_WORDS = {word: str(value) for value, word in enumerate(_NUMBERS_TEXT.split())}
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def _canonical(word: str) -> str:
    """'three' -> '3', '21st' -> '21'; other words unchanged."""
    ordinal = _ORDINAL.match(word)
    if ordinal:
        return ordinal.group(1)
    return _NUMBER_WORDS.get(word, word)


def text_words(text: str) -> set[str]:
    """The distinct words of ``text``: lower-cased runs of letters and digits, numbers canonical.

    Number words up to twenty become digits and ordinals lose their suffix, so "three" matches "3"
    and "21st" matches "21". Apostrophes and hyphens split words ("Melanie's" gives "melanie", "s").
    """
    return {_canonical(w) for w in _WORD.findall(text.lower())}


def content_words(answer: str, stop_words: Collection[str] = COVERAGE_STOP_WORDS) -> set[str]:
    """The words of a gold answer that a context must contain to cover it.

    Lower-cased, stop words removed, numbers canonical (see :func:`text_words`). When the answer has
    only stop words ("No", "Yes"), all its words are kept rather than none.

    Example:
        >>> sorted(content_words("The week before 7 May, 2023"))
        ['2023', '7', 'may', 'week']
    """
    words = text_words(answer)
    kept = {w for w in words if w not in stop_words}
    return kept or words


def answer_covered(answer: str, context_words: Collection[str], question: str = "") -> bool:
    """Whether every content word of ``answer`` not already in ``question`` is among ``context_words``.

    The answering model reads the question, so a word the answer repeats from it ("you suggested
    ...", "the recommended ratio is ...") need not come from the context; when every content word
    of the answer is in the question ("Is it A or B?" - "A"), all of them are needed. Words are
    compared as :func:`text_words` gives them. An answer without any word is never covered.
    """
    needed = content_words(answer)
    new = needed - text_words(question)
    needed = new or needed
    return bool(needed) and needed <= set(context_words)


def evidence_recall(evidence: Iterable[str], context_ids: Collection[str]) -> float | None:
    """The share of the gold evidence ids present in the context as raw turns.

    Returns:
        A value in [0, 1], or ``None`` when the question has no evidence (it is then left out of
        the average rather than counted as 0 or 1).
    """
    gold = list(dict.fromkeys(evidence))
    if not gold:
        return None
    return sum(1 for e in gold if e in context_ids) / len(gold)


def normalize_answer(text: str) -> str:
    """LoCoMo's answer normalization: commas out, lower case, punctuation out, articles and "and" out."""
    lowered = text.replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", lowered).split())


@lru_cache(maxsize=1)
def _stemmer() -> Callable[[str], str]:
    try:
        from nltk.stem.porter import PorterStemmer
    except ImportError as exc:
        raise MissingDependencyError("nltk", "eval", "LoCoMo's token F1 (Porter stemming)") from exc
    stem: Callable[[str], str] = PorterStemmer().stem
    return stem


def _stems(text: str) -> list[str]:
    stem = _stemmer()
    return [stem(w) for w in normalize_answer(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    """Token F1 between a prediction and a gold answer, after normalization and Porter stemming.

    Raises:
        MissingDependencyError: ``nltk`` (the ``eval`` extra) is not installed.
    """
    predicted, expected = _stems(prediction), _stems(gold)
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


def locomo_f1(prediction: str, gold: str, category: str) -> float:
    """LoCoMo's F1 for one question, with the benchmark's per-category rules.

    Multi-hop answers list several items separated by commas: each gold item takes its best F1
    against the comma-separated parts of the prediction, and the item scores are averaged.
    Open-domain gold answers keep only what comes before the first ``;`` (the rest is a rationale).
    Other categories use plain :func:`token_f1`.

    Args:
        prediction: the model's answer.
        gold: the gold answer.
        category: the LoCoMo category label (``"multi-hop"``, ``"open-domain"``, ...).
    """
    if category == "open-domain":
        gold = gold.split(";")[0].strip()
    if category != "multi-hop":
        return token_f1(prediction, gold)
    parts = [p.strip() for p in prediction.split(",")]
    items = [g.strip() for g in gold.split(",")]
    return sum(max(token_f1(p, g) for p in parts) for g in items) / len(items)
