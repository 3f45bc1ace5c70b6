"""Incremental build: utterances in batches through an extractor, merged into the KB."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gravity_core.anchor_vectors import AnchorVectors
from gravity_core.build.merge import apply_update
from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError, InputDataError, UnexpectedModelOutput
from gravity_core.extract.base import Extractor
from gravity_core.schema import FailedBatch, KnowledgeBase, Utterance
from gravity_core.store import AnchorStore

__all__ = ["DEFAULT_BATCH_SIZE", "AnchorBuilder", "BuildReport", "plan_batches"]

logger = logging.getLogger(__name__)

#: Utterances per extractor call. A LoCoMo session (about 20-35 turns) fits in one batch, so the
#: fused LLM extractor makes roughly one call per session (well under 0.05 calls per utterance).
DEFAULT_BATCH_SIZE = 40

ProgressCallback = Callable[[int, int], None]


@dataclass
class BuildReport:
    """What one :meth:`AnchorBuilder.add` did."""

    added: int = 0
    skipped: int = 0
    batches: int = 0
    failed_batches: int = 0
    dropped_observations: int = 0
    embedded: int = 0
    new_events: list[str] = field(default_factory=list)


def plan_batches(utterances: Sequence[Utterance], batch_size: int) -> list[list[Utterance]]:
    """Split into runs of at most ``batch_size`` consecutive utterances, never across sessions."""
    batches: list[list[Utterance]] = []
    for utterance in utterances:
        if batches and batches[-1][-1].session == utterance.session and len(batches[-1]) < batch_size:
            batches[-1].append(utterance)
        else:
            batches.append([utterance])
    return batches


class AnchorBuilder:
    """Builds or extends a KB from utterances.

    Utterances already in the KB are skipped, so adding the same conversation twice changes
    nothing. With a store, the KB is saved every ``checkpoint_every`` batches and at the end, so an
    interrupted build resumes from its last checkpoint (and, for LLM extractors, replays earlier
    answers from the response cache).

    Args:
        extractor: what turns a batch into observations.
        embedder: embeds the anchors' compact texts for reranking at query time.
        batch_size: utterances per extractor call.
        store: where to save; when it holds a KB, building continues from it.
        checkpoint_every: batches between saves (with a store).
    """

    def __init__(
        self,
        extractor: Extractor,
        embedder: Embedder,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        store: AnchorStore | None = None,
        checkpoint_every: int = 5,
    ) -> None:
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be at least 1, got {batch_size}")
        if checkpoint_every < 1:
            raise ConfigurationError(f"checkpoint_every must be at least 1, got {checkpoint_every}")
        self.extractor = extractor
        self.embedder = embedder
        self.batch_size = batch_size
        self.store = store
        self.checkpoint_every = checkpoint_every
        if store is not None and store.exists():
            loaded = store.load()
            self.kb, self.vectors = loaded.kb, loaded.vectors
        else:
            self.kb, self.vectors = KnowledgeBase(), AnchorVectors()
        if self.vectors.embedder and self.vectors.embedder != embedder.name:
            msg = (
                f"this KB was embedded with '{self.vectors.embedder}'; "
                "build it further with the same embedder"
            )
            raise ConfigurationError(msg)

    def add(
        self, utterances: Iterable[Utterance], *, progress: ProgressCallback | None = None
    ) -> BuildReport:
        """Extract anchors from the utterances not yet in the KB and merge them in."""
        report = BuildReport()
        fresh = self._fresh(utterances, report)
        batches = plan_batches(fresh, self.batch_size)
        self.kb.build.extractor = self.extractor.name
        self.kb.build.embedder = self.embedder.name
        self.kb.build.batch_size = self.batch_size
        done = 0
        if progress:
            progress(0, len(fresh))
        for number, batch in enumerate(batches, start=1):
            self._run_batch(batch, report)
            done += len(batch)
            if progress:
                progress(done, len(fresh))
            if self.store is not None and number % self.checkpoint_every == 0 and number < len(batches):
                self.save(report)
        if self.store is not None and (batches or not self.store.exists()):
            self.save(report)
        elif batches:
            report.embedded += self.vectors.refresh(self.kb, self.embedder)
        return report

    def save(self, report: BuildReport | None = None) -> None:
        """Embed changed anchors and, with a store, write the KB."""
        embedded = self.vectors.refresh(self.kb, self.embedder)
        if report is not None:
            report.embedded += embedded
        if self.store is not None:
            self.store.save(self.kb, self.vectors)

    def _fresh(self, utterances: Iterable[Utterance], report: BuildReport) -> list[Utterance]:
        fresh: list[Utterance] = []
        seen: set[str] = set()
        for utterance in utterances:
            known = self.kb.utterances.get(utterance.id)
            if known is not None:
                if known != utterance:
                    raise InputDataError(
                        "differs from the utterance with this id already in the KB "
                        f"(KB: {known.speaker}: {known.text[:60]!r})",
                        record=utterance.id,
                    )
                report.skipped += 1
                continue
            if utterance.id in seen:
                raise InputDataError("appears twice in the input", record=utterance.id)
            seen.add(utterance.id)
            fresh.append(utterance)
        report.added = len(fresh)
        return fresh

    def _run_batch(self, batch: list[Utterance], report: BuildReport) -> None:
        report.batches += 1
        try:
            update = self.extractor.extract(batch, self.kb)
        except UnexpectedModelOutput as exc:
            logger.error("batch %s..%s failed: %s", batch[0].id, batch[-1].id, exc)
            for utterance in batch:
                self.kb.utterances[utterance.id] = utterance
            self.kb.build.failed_batches.append(
                FailedBatch(
                    utterance_ids=[u.id for u in batch],
                    reason=str(exc),
                    raw_output=exc.last_completion,
                    failed_at=datetime.now(UTC),
                )
            )
            report.failed_batches += 1
            return
        result = apply_update(self.kb, update, batch)
        report.dropped_observations += result.dropped
        report.new_events.extend(result.events)
