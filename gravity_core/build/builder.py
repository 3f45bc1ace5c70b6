"""Incremental build: utterances in batches through an extractor, merged into the KB."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from gravity_core.build.forget import ForgetReport, ForgetRequest, NothingNamedHeld
from gravity_core.build.merge import apply_update
from gravity_core.build.merge_index import MergeIndex
from gravity_core.embeddings.base import Embedder
from gravity_core.errors import (
    AnchorStoreError,
    ConfigurationError,
    InputDataError,
    ProviderError,
    UnexpectedModelOutput,
)
from gravity_core.extract.base import Extractor, FileCaching, SessionSpanning, TurnVectorReader
from gravity_core.schema import AnchorUpdate, FailedBatch, KnowledgeBase, Utterance
from gravity_core.schema.changes import KBChanges
from gravity_core.schema.lineage import lineage_of, next_lineage
from gravity_core.storage.anchor_vectors import ANCHOR_KINDS, TURN_KIND, AnchorVectors
from gravity_core.storage.file_cache import RecordedFiles, prune_folder, refuse_linked_cache
from gravity_core.storage.journal import JournalEncoder
from gravity_core.storage.store import AnchorStore

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "MAX_RAW_OUTPUT_CHARS",
    "AnchorBuilder",
    "BuildReport",
    "anchor_counts",
    "batch_label",
    "plan_batches",
]

logger = logging.getLogger(__name__)

#: Utterances per extractor call. The fused LLM extractor fills its batches across sessions (about
#: 0.026 calls per utterance on LoCoMo); an extractor that keeps sessions apart makes at least one
#: call per session.
DEFAULT_BATCH_SIZE = 40

#: How much of a failed batch's last answer the build log keeps (a runaway answer can be megabytes).
MAX_RAW_OUTPUT_CHARS = 20_000

ProgressCallback = Callable[[int, int], None]


@dataclass
class BuildReport:
    """What one :meth:`AnchorBuilder.add` did."""

    added: int = 0
    skipped: int = 0
    batches: int = 0
    failed_batches: int = 0
    recovered_batches: int = 0
    dropped_observations: int = 0
    embedded: int = 0
    new_events: list[str] = field(default_factory=list)


def batch_label(utterance_ids: Sequence[str]) -> str:
    """How a batch is named in logs and ``gravity stats``: ``first..last`` utterance id."""
    if not utterance_ids:
        return "(empty)"
    first, last = utterance_ids[0], utterance_ids[-1]
    return first if first == last else f"{first}..{last}"


def _cut(text: str) -> str:
    if len(text) <= MAX_RAW_OUTPUT_CHARS:
        return text
    return text[:MAX_RAW_OUTPUT_CHARS] + f"\n[... {len(text) - MAX_RAW_OUTPUT_CHARS} more characters cut]"


def plan_batches(
    utterances: Sequence[Utterance], batch_size: int, *, spans_sessions: bool = False
) -> list[list[Utterance]]:
    """Split into runs of at most ``batch_size`` consecutive utterances.

    A run never holds two sessions unless ``spans_sessions``; then every run but the last is full.
    """
    batches: list[list[Utterance]] = []
    for utterance in utterances:
        if (
            batches
            and len(batches[-1]) < batch_size
            and (spans_sessions or batches[-1][-1].session == utterance.session)
        ):
            batches[-1].append(utterance)
        else:
            batches.append([utterance])
    return batches


class AnchorBuilder:
    """Builds or extends a KB from utterances.

    Utterances already in the KB are skipped, so adding the same conversation twice changes
    nothing. With a store, the build checkpoints every ``checkpoint_every`` batches and saves a
    generation at the end, so an interrupted build resumes from its last checkpoint (and, for LLM
    extractors, replays earlier answers from the response cache). A checkpoint appends what changed
    since the last one to the store's journal, or saves a whole generation once the journal holds
    as much as the current one (:meth:`AnchorStore.checkpoint`): a build's time grows in proportion
    to the conversation's length. When the model's provider fails for good
    (:class:`~gravity_core.errors.ProviderError`), the batches done so far are saved before the
    error is raised.

    A batch whose model output stays invalid after the re-asks is recorded in
    ``kb.build.failed_batches`` (reason and raw answer) and the build goes on; its utterances are
    kept in the KB, so a plain rerun skips them and :meth:`retry_failed` redoes them.

    Args:
        extractor: what turns a batch into observations.
        embedder: embeds the anchors' compact texts for reranking at query time.
        batch_size: utterances per extractor call; a batch keeps to one session unless the
            extractor spans sessions (:class:`~gravity_core.extract.base.SessionSpanning`).
        store: where to save; when it holds a KB, building continues from it.
        checkpoint_every: batches between saves (with a store).

    Attributes:
        last_report: what the last :meth:`add` or :meth:`retry_failed` did (``None`` before the first).
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
        self.last_report: BuildReport | None = None
        # Turn vectors are kept only for an extractor that reads them (the offline one does).
        reads_turns = isinstance(extractor, TurnVectorReader) and extractor.turn_embedder == embedder.name
        self._kinds = (*ANCHOR_KINDS, TURN_KIND) if reads_turns else ANCHOR_KINDS
        self._spans_sessions = isinstance(extractor, SessionSpanning) and extractor.spans_sessions
        self._pending_turns: dict[str, str] = {}
        self._generation: int | None = None
        self._journal_end = 0  # where this builder's last checkpoint ends in the store's journal
        self._changes = KBChanges()  # what changed since the last checkpoint
        # What changed since the current generation, journaled or not (what a delta save writes);
        # None when unknown (a journal of another build was replayed).
        self._since_generation: KBChanges | None = KBChanges()
        self._journal = JournalEncoder()
        self.kb, self.vectors = KnowledgeBase(), AnchorVectors(embedder=embedder.name, dim=embedder.dim)
        self._index = MergeIndex(self.kb)
        self._reload()

    def _reload(self) -> None:
        """Take the store's KB and journal (another builder may have written since this one read it)."""
        store = self.store
        if store is None:
            return
        store.prepare_build()
        loaded = store.resume()
        if loaded is None:
            return
        if loaded.vectors.embedder and loaded.vectors.embedder != self.embedder.name:
            msg = (
                f"this KB was embedded with '{loaded.vectors.embedder}'; "
                "build it further (or forget from it) with the same embedder"
            )
            raise ConfigurationError(msg)
        self.kb, self.vectors, self._generation = loaded.kb, loaded.vectors, loaded.generation
        self._journal_end = loaded.journal_end
        self._changes = KBChanges()
        self._since_generation = KBChanges() if loaded.journal_end == 0 else None
        self._journal = JournalEncoder()
        self._index = MergeIndex(self.kb)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the store's writer lock, starting from the KB as it is on disk now."""
        if self.store is None:
            yield
            return
        with self.store.writer():
            if self.store.state() != (self._generation, self._journal_end):
                logger.info("the KB changed on disk since it was read; reading it again")
                self._reload()
            yield

    def add(
        self, utterances: Iterable[Utterance], *, progress: ProgressCallback | None = None
    ) -> BuildReport:
        """Extract anchors from the utterances not yet in the KB and merge them in.

        Raises:
            AnchorStoreError: another build is writing the same KB folder.
        """
        with self._writing():
            self.last_report = self._add(utterances, progress)
            return self.last_report

    def _add(
        self,
        utterances: Iterable[Utterance],
        progress: ProgressCallback | None,
        *,
        batch_size: int | None = None,
        donor: AnchorVectors | None = None,
    ) -> BuildReport:
        """Build ``utterances`` into the KB.

        With a ``donor`` (a forget's rebuild) nothing is saved and vectors are taken from the donor
        where their text is unchanged.
        """
        report = BuildReport()
        fresh = self._fresh(utterances, report)
        batch_size = batch_size or self.batch_size
        batches = plan_batches(fresh, batch_size, spans_sessions=self._spans_sessions)
        self.kb.build.extractor = self.extractor.name
        self.kb.build.embedder = self.embedder.name
        self.kb.build.batch_size = batch_size
        self._changes.build = True
        self._embed_turns(fresh, report, donor)
        done = 0
        if progress:
            progress(0, len(fresh))
        for number, batch in enumerate(batches, start=1):
            try:
                self._run_batch(batch, report)
            except ProviderError:
                if donor is None:  # a forget's rebuild is all or nothing
                    self._save_before_raising(number, report)
                raise
            done += len(batch)
            if progress:
                progress(done, len(fresh))
            if (
                self.store is not None
                and donor is None
                and number % self.checkpoint_every == 0
                and number < len(batches)
            ):
                self._checkpoint(report)
        if donor is not None:
            report.embedded += self._refresh(donor)
        elif self.store is not None and (batches or not self.store.exists()):
            self.save(report)
        elif batches:
            report.embedded += self._refresh()
        self._pending_turns = {}
        return report

    def forget(self, request: ForgetRequest, *, progress: ProgressCallback | None = None) -> ForgetReport:
        """Remove the utterances ``request`` names and everything the KB knows only from them.

        The KB becomes the one a build of the remaining utterances makes (same extractor,
        embedder and batch size): anchors whose sources were all forgotten are gone, the others
        keep their remaining sources with confidences and counts recomputed. Stored vectors of
        unchanged texts are reused, so only new texts are embedded. With a store the result is
        one new generation and every earlier generation and the journal are deleted, so a
        rollback cannot bring the forgotten text back; the extractor's response cache and the
        store's ``cache/`` keep only the answers the rebuild used. Interrupted before its save
        (a crash, a provider failure), a forget leaves the KB as it was.

        Raises:
            ConfigurationError: the request names an utterance, session or speaker the KB does
                not hold, or the KB was built by another extractor or embedder.
            AnchorStoreError: another build is writing the KB folder.
            ProviderError: the model's provider failed during the rebuild (nothing changed).
        """
        with self._writing():
            return self._forget(request, progress)

    def _forget(self, request: ForgetRequest, progress: ProgressCallback | None) -> ForgetReport:
        built = self.kb.build
        for what, built_with, mine in (
            ("extractor", built.extractor, self.extractor.name),
            ("embedder", built.embedder, self.embedder.name),
        ):
            if built_with and built_with != mine:
                raise ConfigurationError(
                    f"this KB was built with {what} '{built_with}'; forget with the same {what} "
                    f"(not '{mine}'), so what remains is what a build of the remaining utterances makes"
                )
        report = ForgetReport(before=anchor_counts(self.kb))
        try:
            ids = set(request.select(self.kb))
        except NothingNamedHeld as exc:
            if not (exc.all_missing and self.store is not None and self.store.last_save_was_forget()):
                raise
            # A forget run again once it completed (its first run may have been killed after its save).
            logger.info("nothing to forget: %s (the KB's last save was a forget)", exc)
            report.already_gone = exc.missing
            ids = set()
        if not ids:
            report.remaining, report.after = len(self.kb.utterances), report.before
            return report
        remaining = [u for u in self.kb.utterances.values() if u.id not in ids]
        old = self.kb, self.vectors
        self.kb = KnowledgeBase()
        self.vectors = AnchorVectors(embedder=old[1].embedder or self.embedder.name, dim=old[1].dim)
        self._index, self._changes = MergeIndex(self.kb), KBChanges()
        caches = self.extractor.caches() if isinstance(self.extractor, FileCaching) else []
        own, report.caches_not_pruned = self._own_cache_folders(caches)
        try:
            with contextlib.ExitStack() as recording:
                used = [recording.enter_context(cache.recording()) for cache in caches]
                rebuilt = self._add(remaining, progress, batch_size=built.batch_size or None, donor=old[1])
        except BaseException:
            self.kb, self.vectors = old
            self._index, self._changes = MergeIndex(self.kb), KBChanges()
            raise
        report.forgotten, report.remaining = len(ids), len(remaining)
        report.after, report.embedded = anchor_counts(self.kb), rebuilt.embedded
        # The caches first: a forget killed after its save could not be run again to finish it (the
        # request would name what the KB no longer holds); killed before, it runs again in full.
        # Under the KB's cache/ nothing but what the rebuild used stays, whichever cache wrote it.
        kept: set[Path] = set().union(*used)
        if self.store is not None:
            root = self.store.directory
            report.cache_entries_removed = sum(prune_folder(f, kept, root=root) for f in sorted(own))
        for folder in report.caches_not_pruned:
            logger.warning(
                "%s is outside the KB folder (a cache other KBs may share): a forget deletes nothing "
                "there, so it may still hold prompts of the forgotten turns",
                folder,
            )
        if self.store is not None:
            report.generation = self._generation = self.store.save(self.kb, self.vectors, keep_history=False)
            self._journal_end = 0
            self._journal.rebase(self.kb, self._changes)
            self._changes.clear()
            self._since_generation = KBChanges()
        logger.info(
            "forgot %d utterances (%d remain); anchors %s -> %s",
            len(ids),
            len(remaining),
            report.before,
            report.after,
        )
        return report

    def _own_cache_folders(self, caches: list[RecordedFiles]) -> tuple[set[Path], list[Path]]:
        """The cache folders a forget prunes, and the extractor's cache folders it leaves as they are.

        The first are the store's ``cache/`` and those inside it; the second, the extractor's cache
        folders outside the KB folder.

        Raises:
            AnchorStoreError: a cache folder inside the KB folder is reached through a symbolic link
                (checked before anything is rebuilt).
        """
        folders = {Path(os.path.abspath(cache.directory)) for cache in caches}
        if self.store is None:
            return set(), sorted(folders)
        root = Path(os.path.abspath(self.store.directory))
        own = {Path(os.path.abspath(self.store.cache_dir))}  # refuses a linked cache/
        for folder in folders:
            if folder.is_relative_to(root):
                refuse_linked_cache(folder, root)
                own.add(folder)
        return own, sorted(folders - own)

    def retry_failed(self, *, progress: ProgressCallback | None = None) -> BuildReport:
        """Extract again the batches recorded as failed, and only those.

        A batch that succeeds now is merged and leaves ``kb.build.failed_batches``; one that fails
        again keeps its place there with the new reason and answer. Saved like :meth:`add`.

        Returns:
            ``batches`` retried, ``recovered_batches``, and ``failed_batches`` still failing.

        Raises:
            AnchorStoreError: a failed batch names an utterance the KB does not hold.
            ProviderError: the model's provider failed (the batches redone so far are saved).
        """
        with self._writing():
            self.last_report = self._retry_failed(progress)
            return self.last_report

    def _retry_failed(self, progress: ProgressCallback | None) -> BuildReport:
        report = BuildReport()
        pending = list(self.kb.build.failed_batches)
        total = sum(len(f.utterance_ids) for f in pending)
        self.kb.build.extractor = self.extractor.name
        self._changes.build = True
        done = 0
        if progress:
            progress(0, total)
        for number, failed in enumerate(pending, start=1):
            batch = self._utterances_of(failed)
            report.batches += 1
            lineage = lineage_of(self.kb)
            try:
                outcome = self._extract(batch, report)
            except ProviderError:
                self._save_before_raising(number, report)
                raise
            position = next(i for i, f in enumerate(self.kb.build.failed_batches) if f is failed)
            self._changes.build = True
            if isinstance(outcome, FailedBatch):
                self.kb.build.failed_batches[position] = outcome
                report.failed_batches += 1
            else:
                del self.kb.build.failed_batches[position]
                self._merge(outcome, batch, report)
                report.recovered_batches += 1
                logger.info("failed batch %s recovered", batch_label(failed.utterance_ids))
                # Only a recovery changes what later batches meet: a batch failing again leaves the KB
                # as it was, so a retry resumed after a crash ends with the lineage of one uninterrupted.
                self.kb.build.lineage = next_lineage(lineage, batch, outcome)
            done += len(batch)
            if progress:
                progress(done, total)
            if self.store is not None and number % self.checkpoint_every == 0 and number < len(pending):
                self._checkpoint(report)
        if self.store is not None and pending:
            self.save(report)
        return report

    def save(self, report: BuildReport | None = None) -> None:
        """Embed changed anchors and, with a store, write the KB as a new generation."""
        embedded = self._refresh()
        if report is not None:
            report.embedded += embedded
        if self.store is not None:
            if self._since_generation is not None:
                self._since_generation.add(self._changes)
            self._generation = self.store.save(self.kb, self.vectors, changed=self._since_generation)
            self._journal_end = 0
            self._journal.rebase(self.kb, self._changes)
            self._changes.clear()
            self._since_generation = KBChanges()

    def _checkpoint(self, report: BuildReport) -> None:
        """Journal what changed since the last checkpoint, or save a generation once the journal is large.

        Vectors are not embedded at a journaled checkpoint: the next generation embeds every
        anchor changed since the last one once (a resumed build embeds again what its journal
        changed).
        """
        assert self.store is not None
        if not self._changes:
            return
        if self.store.journal_outgrows_generation(self._journal_end):
            self.save(report)
            return
        line, written = self._journal.encode(
            self.kb,
            self._changes,
            base=self._generation,
            embedder=self.vectors.embedder or self.embedder.name,
            dim=self.vectors.dim or self.embedder.dim,
        )
        self._journal_end = self.store.checkpoint(line, base=self._generation, at=self._journal_end)
        written()
        if self._since_generation is not None:
            self._since_generation.add(self._changes)
        self._changes.clear()

    def _refresh(self, donor: AnchorVectors | None = None) -> int:
        extra = {TURN_KIND: self._pending_turns} if TURN_KIND in self._kinds else None
        return self.vectors.refresh(self.kb, self.embedder, self._kinds, extra, donor)

    def _embed_turns(self, fresh: list[Utterance], report: BuildReport, donor: AnchorVectors | None) -> None:
        """Embed the new turns in one call (the encoder's best case); hand the extractor all turn vectors."""
        if TURN_KIND not in self._kinds:
            return
        self._pending_turns = {u.id: u.full_text() for u in fresh}
        report.embedded += self.vectors.refresh(
            self.kb, self.embedder, (TURN_KIND,), {TURN_KIND: self._pending_turns}, donor
        )
        texts = {u.id: u.full_text() for u in self.kb.utterances.values()} | self._pending_turns
        assert isinstance(self.extractor, TurnVectorReader)
        self.extractor.use_turn_vectors(self.vectors.by_text(TURN_KIND, texts))

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
        lineage = lineage_of(self.kb)
        outcome = self._extract(batch, report)
        if isinstance(outcome, FailedBatch):
            for utterance in batch:
                self.kb.utterances[utterance.id] = utterance
            self._changes.note("utterances", (u.id for u in batch))
            self.kb.build.failed_batches.append(outcome)
            report.failed_batches += 1
        else:
            self._merge(outcome, batch, report)
        self.kb.build.lineage = next_lineage(lineage, batch, outcome)
        self._changes.build = True

    def _extract(self, batch: list[Utterance], report: BuildReport) -> AnchorUpdate | FailedBatch:
        """The batch's observations, or the record of its failure (the KB is not touched)."""
        # Extractors that validate the model's observations (LLMExtractor) count what they drop.
        dropped_before = getattr(self.extractor, "dropped_observations", 0)
        try:
            update = self.extractor.extract(batch, self.kb)
        except UnexpectedModelOutput as exc:
            label = batch_label([u.id for u in batch])
            logger.error("batch %s failed, recorded in the build log: %s", label, exc)
            return FailedBatch(
                utterance_ids=[u.id for u in batch],
                reason=str(exc),
                raw_output=_cut(exc.last_completion),
                failed_at=datetime.now(UTC),
            )
        report.dropped_observations += getattr(self.extractor, "dropped_observations", 0) - dropped_before
        return update

    def _merge(self, update: AnchorUpdate, batch: list[Utterance], report: BuildReport) -> None:
        result = apply_update(self.kb, update, batch, index=self._index, changes=self._changes)
        report.dropped_observations += result.dropped
        report.new_events.extend(result.events)

    def _utterances_of(self, failed: FailedBatch) -> list[Utterance]:
        missing = [i for i in failed.utterance_ids if i not in self.kb.utterances]
        if missing:
            label = batch_label(failed.utterance_ids)
            raise AnchorStoreError(f"failed batch {label} names utterances the KB lacks: {missing[:5]}")
        return [self.kb.utterances[i] for i in failed.utterance_ids]

    def _save_before_raising(self, number: int, report: BuildReport) -> None:
        """Save a generation of what was done since the last one, as the provider gave up on batch ``number``.

        A whole generation, not a journal record: the build stops here, and readers see it all.
        """
        # On the first batch nothing was done: a new KB folder stays as it was (no empty generation).
        if self.store is not None and (number > 1 and self._changes or self._journal_end):
            logger.error("the model's provider failed; saving the %d batch(es) done first", number - 1)
            self.save(report)


def anchor_counts(kb: KnowledgeBase) -> dict[str, int]:
    """Anchors of each kind: ``{"entity": n, "event": n, "topic": n}``."""
    return {"entity": len(kb.entities), "event": len(kb.events), "topic": len(kb.topics)}
