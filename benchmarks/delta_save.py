"""Benchmark 5's figure at scale: one session added to a 100k-anchor KB, saved as a delta or whole.

The base is the seed KB grown to ``delta_save_anchors`` anchors (copies with the same names, so
the build's own text digests hold and nothing is embedded again), saved once by a builder. Each
side copies that folder, opens an :class:`AnchorBuilder` on it (loading is not timed) and times
``add`` of one new session: the seed's last session again, as later turns with new ids (the same
people, so their entities change as a real session changes them). The sides differ only in the
store's ``delta_share``: the default (a delta generation) against ``0`` (a full generation).
The save inside the add is timed apart (what item 4 changes); bytes written are the new
generation's files that are not links to its base's.
"""

from __future__ import annotations

import logging
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks.common import BenchSettings, ratio, timed
from benchmarks.workspace import Workspace
from gravity_core.build.builder import AnchorBuilder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.schema import Utterance
from gravity_core.schema.changes import KBChanges
from gravity_core.storage.anchor_vectors import AnchorVectors
from gravity_core.storage.generation_delta import MAX_SHARE
from gravity_core.storage.store import AnchorStore, SavableKB

__all__ = ["run"]

logger = logging.getLogger(__name__)


def run(settings: BenchSettings, workspace: Workspace) -> tuple[dict[str, Any], dict[str, Any]]:
    """Time the add with each kind of save, alternating; returns (figures, ratio)."""
    root = workspace.root / "delta-save"
    base = root / "base"
    shutil.rmtree(root, ignore_errors=True)
    grown = workspace.grown(settings.delta_save_anchors, rename=False)
    AnchorStore(base, delta_share=0).save(grown.kb, grown.vectors)
    anchors = grown.anchors
    del grown
    workspace.forget(settings.delta_save_anchors)
    # A builder's own save, so the base holds the vectors a build keeps (expansions by their text).
    _builder(base, workspace, 0).save()
    session = _new_session(workspace.utterances)
    times: dict[str, list[float]] = {"delta": [], "full": []}
    saves: dict[str, list[float]] = {"delta": [], "full": []}
    written: dict[str, int] = {}
    for repeat in range(settings.incremental_repeats):
        sides = [("delta", MAX_SHARE), ("full", 0.0)]
        if repeat % 2:
            sides.reverse()
        for side, share in sides:
            folder = root / side
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(base, folder)
            builder = _builder(folder, workspace, share)
            _, seconds = timed(lambda b=builder: b.add(session))  # type: ignore[misc]
            times[side].append(seconds)
            assert isinstance(builder.store, _TimedStore)
            saves[side].append(builder.store.seconds)
            written[side] = _bytes_written(folder)
            del builder
    shutil.rmtree(root, ignore_errors=True)
    add = {side: sum(t) / len(t) for side, t in times.items()}
    save = {side: sum(t) / len(t) for side, t in saves.items()}
    figures = {
        "anchors": anchors,
        "new_session_turns": len(session),
        "add_seconds": {side: round(v, 3) for side, v in add.items()},
        "save_seconds": {side: round(v, 3) for side, v in save.items()},
        "bytes_written": written,
        "bytes_written_share": round(written["delta"] / written["full"], 6),
    }
    logger.info("add at %d anchors: %s", anchors, figures)
    return figures, ratio(
        f"save of a one-session add at {round(anchors, -3) // 1000}k anchors: delta / full generation",
        save["delta"] / save["full"],
        None,
        note="no target: what item 4 changes at scale (the whole add is in the figures)",
    )


class _TimedStore(AnchorStore):
    """An AnchorStore that adds up the seconds its saves take."""

    seconds = 0.0

    def save(
        self,
        kb: SavableKB,
        vectors: AnchorVectors,
        *,
        keep_history: bool = True,
        changed: KBChanges | None = None,
    ) -> int:
        generation, seconds = timed(
            lambda: super(_TimedStore, self).save(kb, vectors, keep_history=keep_history, changed=changed)
        )
        self.seconds += seconds
        return generation


def _builder(folder: Path, workspace: Workspace, share: float) -> AnchorBuilder:
    store = _TimedStore(folder, delta_share=share)
    extractor = OfflineExtractor.kept_in(store.cache_dir, workspace.embedder, pipeline=workspace.nlp)
    return AnchorBuilder(extractor, workspace.embedder, store=store)


def _new_session(turns: list[Utterance]) -> list[Utterance]:
    """The sample's last session again, starting a month after the conversation's end, under new ids."""
    last = turns[-1].session
    session = [u for u in turns if u.session == last]
    later = timedelta(days=30) + (session[-1].timestamp - session[0].timestamp)
    return [
        u.model_copy(
            update={"id": f"new/{u.id}", "session": f"new/{u.session}", "timestamp": u.timestamp + later}
        )
        for u in session
    ]


def _bytes_written(folder: Path) -> int:
    """Bytes of the current generation's files that are not links to another generation's."""
    current = AnchorStore(folder).current_generation()
    generation = folder / f"g{current:06d}"
    return sum(p.stat().st_size for p in generation.iterdir() if p.is_file() and p.stat().st_nlink == 1)
