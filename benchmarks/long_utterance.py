"""Benchmark 10: one long utterance costs time linear in its length (100 KB against 1 MB).

Each side builds one utterance of that many characters from scratch, in memory:
``AnchorBuilder(OfflineExtractor(hashing), hashing).add([utterance])``, parse included (spaCy
parses a text over 100,000 characters in pieces cut after a sentence, joined into one doc). The
text is the LoCoMo file's turns, shuffled with the run's seed and joined until it is long enough,
so it names people, places and dates as a conversation does. The time per character should not
grow with the length: the ratio of 1 MB's to 100 KB's has target 2. (Before each parse's entities
were read once, 100,000 characters took 43 s and 200,000 took 186 s; 1 MB would have run for
over an hour, and spaCy refused a text over 1,000,000 characters.)

The 100 KB build runs three times, before, between and after the 1 MB one (the median counts).
"""

from __future__ import annotations

import logging
import random
import statistics
from datetime import UTC, datetime
from typing import Any

from benchmarks.common import BenchSettings, Result, make_embedder, profile_top, ratio, timed
from benchmarks.workspace import Workspace
from gravity_core.build.builder import AnchorBuilder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders.locomo import load_locomo, locomo_sample_ids
from gravity_core.schema import Utterance

__all__ = ["SIZES", "TARGET", "long_text", "run"]

logger = logging.getLogger(__name__)

#: Characters of the utterances built: 100 KB and 1 MB.
SIZES = (100_000, 1_000_000)
TARGET = 2.0
_SCHEDULE = (0, 1, 0, 0)  # indexes into SIZES: the small one around the large one
_STAMP = datetime(2023, 5, 8, 14, 0, tzinfo=UTC)


def long_text(settings: BenchSettings, chars: int) -> str:
    """``chars`` characters of the LoCoMo file's turns, shuffled with ``settings.seed``, space-joined."""
    texts = [
        u.text
        for sample in locomo_sample_ids(settings.locomo)
        for u in load_locomo(settings.locomo, sample)
        if u.text.strip()
    ]
    random.Random(settings.seed).shuffle(texts)
    parts: list[str] = []
    size = 0
    while size < chars:
        text = texts[len(parts) % len(texts)]
        parts.append(text)
        size += len(text) + 1
    return " ".join(parts)[:chars]


def _utterance(text: str) -> Utterance:
    return Utterance(id="D1:1", speaker="Caroline", text=text, session="session_1", timestamp=_STAMP)


def _build(text: str, workspace: Workspace) -> AnchorBuilder:
    embedder = make_embedder("hashing")
    builder = AnchorBuilder(OfflineExtractor(embedder, pipeline=workspace.nlp), embedder)
    builder.add([_utterance(text)])
    return builder


def run(settings: BenchSettings, workspace: Workspace) -> Result:
    """Build one utterance of each size, seconds per character, the largest over the smallest."""
    small, large = SIZES
    side = "offline build (hashing embedder, in memory) of one {:,}-character utterance of LoCoMo turns"
    result = Result(
        name="long_utterance",
        title=f"10. Long utterance: time per character of one utterance of {small:,} and {large:,} chars",
        sides={str(size): side.format(size) + ", parse included" for size in SIZES},
    )
    text = long_text(settings, large)
    texts = {size: text[:size] for size in SIZES}
    _build(text[:2_000], workspace)  # pipeline and regex first use
    seconds: dict[int, list[float]] = {size: [] for size in SIZES}
    built: dict[int, AnchorBuilder] = {}
    for index in _SCHEDULE:
        size = SIZES[index]
        built[size], elapsed = timed(lambda: _build(texts[size], workspace))  # noqa: B023 - called at once
        seconds[size].append(elapsed)
        logger.info("one utterance of %d characters: %.1f s", size, elapsed)
    per_char = {size: statistics.median(seconds[size]) / size for size in SIZES}
    figures: dict[str, Any] = {}
    for size in SIZES:
        kb = built[size].kb
        figures[str(size)] = {
            "seconds": [round(s, 2) for s in seconds[size]],
            "us_per_character": round(1e6 * per_char[size], 3),
            "entities": len(kb.entities),
            "events": len(kb.events),
            "topics": len(kb.topics),
        }
    result.figures = {"sizes": list(SIZES), "by_size": figures}
    for size in SIZES:
        result.ratios.append(
            ratio(f"seconds, one {size:,}-character utterance", statistics.median(seconds[size]), None)
        )
    value = per_char[large] / per_char[small]
    result.ratios.append(ratio(f"time per character, {large:,} / {small:,} characters", value, TARGET))
    if settings.profile and value > TARGET:
        result.profiles[f"build of {large:,} characters"] = profile_top(
            lambda chars: _build(texts[chars], workspace), [large]
        )
    return result
