"""Extractive batch summaries for the '+Sum' baseline: the most informative sentences, in order."""

from __future__ import annotations

from collections.abc import Sequence

from gravity_core.extract.offline.text import content_words, split_sentences
from gravity_core.schema import SummaryObservation, Utterance

__all__ = ["summarize_batch"]


def summarize_batch(
    batch: Sequence[Utterance], *, max_sentences: int = 5, min_content_words: int = 3
) -> list[SummaryObservation]:
    """One summary per session of ``batch``: its ``max_sentences`` statements with most content words.

    Questions and sentences with fewer than ``min_content_words`` content words (greetings,
    "Nice!") are skipped; the chosen sentences keep conversation order and their speaker.
    """
    by_session: dict[str, list[Utterance]] = {}
    for utterance in batch:
        by_session.setdefault(utterance.session, []).append(utterance)
    summaries: list[SummaryObservation] = []
    for session, utterances in by_session.items():
        scored: list[tuple[int, int, int, str, str]] = []
        for order, utterance in enumerate(utterances):
            for n, sentence in enumerate(split_sentences(utterance.text)):
                text = sentence.text.strip()
                if not text or text.endswith("?"):
                    continue
                weight = len(set(content_words(text)))
                scored.append((weight, order, n, utterance.id, f"{utterance.speaker}: {text}"))
        best = sorted(scored, key=lambda s: (-s[0], s[1], s[2]))[:max_sentences]
        best = [s for s in best if s[0] >= min_content_words]
        if not best:
            continue
        best.sort(key=lambda s: (s[1], s[2]))
        summaries.append(
            SummaryObservation(
                session=session,
                text=" ".join(s[4] for s in best),
                sources=list(dict.fromkeys(s[3] for s in best)),
            )
        )
    return summaries
