"""Benchmark 7: a build is linear in the conversation's length (time per utterance at 2k, 8k and 32k).

Each side builds a synthetic conversation (:mod:`benchmarks.conversation`) of one size from
scratch into a fresh KB folder: ``AnchorBuilder(OfflineExtractor(hashing), hashing,
store=AnchorStore(folder)).add(turns)``, checkpoints every 5 batches and the final save included.
Its time per utterance should not grow with the length: the ratio of the largest size's to the
smallest's has target 2. (Before the journaled checkpoints and the merge index, 8,000 utterances
took 11-20 ms each against 2.6 ms at 2,000, and 50,000 did not finish in 600 s.)

The smaller sizes are built more than once, interleaved with the larger ones (the median counts),
so load that drifts during the run falls on every size.
"""

from __future__ import annotations

import logging
import shutil
import statistics
from pathlib import Path
from typing import Any

from benchmarks.common import BenchSettings, Result, make_embedder, profile_top, ratio, timed
from benchmarks.conversation import synthetic_conversation
from benchmarks.workspace import Workspace
from gravity_core.build.builder import AnchorBuilder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.schema import Utterance
from gravity_core.schema.changes import KBChanges
from gravity_core.storage.store import AnchorStore, SavableKB

__all__ = ["TARGET", "run", "schedule"]

logger = logging.getLogger(__name__)

TARGET = 2.0


class _CountingStore(AnchorStore):
    """An AnchorStore that counts its generations and journal records (and their bytes)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.generations_saved = 0
        self.records = 0
        self.record_bytes = 0

    def save(
        self, kb: SavableKB, vectors: Any, *, keep_history: bool = True, changed: KBChanges | None = None
    ) -> int:
        self.generations_saved += 1
        return super().save(kb, vectors, keep_history=keep_history, changed=changed)

    def checkpoint(self, line: bytes, *, base: int | None, at: int) -> int:
        self.records += 1
        self.record_bytes += len(line)
        return super().checkpoint(line, base=base, at=at)


def schedule(sizes: tuple[int, ...]) -> list[int]:
    """The builds to run: each size once, the smaller ones more often, spread between the larger.

    A size is built about ``largest / size / 4`` times (at least once, at most 4), so the smallest
    gets a median of several runs while the run stays dominated by the largest build.
    """
    largest = max(sizes)
    counts = {size: max(1, min(4, round(largest / size / 4))) for size in sizes}
    order: list[int] = []
    while any(counts.values()):
        for size in sorted(sizes):
            if counts[size]:
                order.append(size)
                counts[size] -= 1
    return order


def _build(
    turns: list[Utterance], folder: Path, workspace: Workspace
) -> tuple[_CountingStore, AnchorBuilder]:
    shutil.rmtree(folder, ignore_errors=True)
    embedder = make_embedder("hashing")
    store = _CountingStore(folder)
    builder = AnchorBuilder(OfflineExtractor(embedder, pipeline=workspace.nlp), embedder, store=store)
    builder.add(turns)
    return store, builder


def run(settings: BenchSettings, workspace: Workspace) -> Result:
    """Build each size of synthetic conversation, time per utterance, the largest over the smallest."""
    sizes = tuple(sorted(settings.long_build_sizes))
    result = Result(
        name="long_build",
        title=f"7. Long build: time per utterance at {', '.join(f'{s:,}' for s in sizes)} utterances",
        sides={
            str(size): f"offline build (hashing embedder) of a {size:,}-utterance synthetic conversation "
            "into a fresh KB folder, checkpoints and final save included"
            for size in sizes
        },
    )
    conversations = {size: synthetic_conversation(size) for size in sizes}
    root = workspace.root / "long_build"
    _build(conversations[sizes[0]][:200], root / "warm-up", workspace)  # pipeline and regex first use
    seconds: dict[int, list[float]] = {size: [] for size in sizes}
    last: dict[int, tuple[_CountingStore, AnchorBuilder]] = {}
    for size in schedule(sizes):
        turns, folder = conversations[size], root / str(size)
        built, elapsed = timed(lambda: _build(turns, folder, workspace))  # noqa: B023 - called at once
        seconds[size].append(elapsed)
        last[size] = built
        logger.info(
            "long build of %d utterances: %.1f s (%.3f ms each)", size, elapsed, 1000 * elapsed / size
        )
    per_utterance = {size: statistics.median(seconds[size]) / size for size in sizes}
    figures: dict[str, Any] = {}
    for size in sizes:
        store, builder = last[size]
        checkpoints = store.generations_saved + store.records
        figures[str(size)] = {
            "seconds": [round(s, 2) for s in seconds[size]],
            "ms_per_utterance": round(1000 * per_utterance[size], 3),
            "entities": len(builder.kb.entities),
            "events": len(builder.kb.events),
            "topics": len(builder.kb.topics),
            "checkpoints_and_final_save": checkpoints,
            "generations_saved": store.generations_saved,
            "journal_records": store.records,
            "mean_journal_record_kb": round(store.record_bytes / max(store.records, 1) / 1024, 1),
        }
    result.figures = {"sizes": list(sizes), "by_size": figures}
    smallest, largest = sizes[0], sizes[-1]
    value = per_utterance[largest] / per_utterance[smallest]
    result.ratios.append(ratio(f"time per utterance, {largest:,} / {smallest:,} utterances", value, TARGET))
    if len(sizes) > 2:
        middle = sizes[len(sizes) // 2]
        result.ratios.append(
            ratio(
                f"time per utterance, {middle:,} / {smallest:,} utterances",
                per_utterance[middle] / per_utterance[smallest],
                None,
            )
        )
    if settings.profile and value > TARGET:
        middle = sizes[len(sizes) // 2]
        result.profiles[f"build of {middle:,} utterances"] = profile_top(
            lambda turns: _build(turns, root / "profile", workspace), [conversations[middle]]
        )
    shutil.rmtree(root, ignore_errors=True)
    return result
