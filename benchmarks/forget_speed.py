"""Benchmark 8: forgetting one session against rebuilding the KB without it.

For each of a few sessions of the benchmark's conversation (the first, middle and last ones, and
every ``forget_every``-th; sides alternating), it times:

- ``forget``: open a saved KB of the whole conversation (a copy, untimed), then
  ``AnchorBuilder(OfflineExtractor.kept_in(store.cache_dir, MiniLM), MiniLM, store).forget(...)``,
  which rebuilds from the remaining turns reusing the stored vectors, the parses kept under the
  KB's ``cache/parses`` and the answers to the batches before the forgotten session kept under
  ``cache/updates`` (as ``gravity build`` keeps them), saves one generation and deletes the older
  ones;
- ``rebuild``: build the remaining turns from scratch into a fresh folder, as ``gravity build``
  does (what a forget would cost without one).

The two KBs are compared too: a forget that is fast but wrong is no result.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path

from benchmarks.common import BenchSettings, CountingEmbedder, Result, profile_top, ratio, timed
from benchmarks.workspace import Workspace
from gravity_core.build.builder import AnchorBuilder
from gravity_core.build.forget import ForgetReport, ForgetRequest
from gravity_core.embeddings.base import Embedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.schema import Utterance
from gravity_core.storage.store import AnchorStore

__all__ = ["FORGET_TARGET", "run"]

logger = logging.getLogger(__name__)

FORGET_TARGET = 0.1


def run(settings: BenchSettings, workspace: Workspace) -> Result:
    """Time forget and rebuild for each chosen session, alternating; one result."""
    result = Result(
        name="forget",
        title="8. Forget one session of a conversation vs rebuilding the KB without it",
        sides={
            "forget": "open the saved KB (offline extractor with its kept parses, MiniLM), "
            "forget(sessions=[s]), save (older generations deleted)",
            "rebuild": "build the remaining turns from scratch into a fresh folder, as gravity build does",
        },
    )
    turns = workspace.utterances
    sessions = list(dict.fromkeys(u.session for u in turns))
    chosen = _chosen(sessions, settings.forget_every)
    root = workspace.root / "forget"
    base = root / "base"
    shutil.rmtree(root, ignore_errors=True)
    _build(turns, base, workspace)
    times: dict[str, dict[str, list[float]]] = {s: {"forget": [], "rebuild": []} for s in chosen}
    embedded: dict[str, int] = {}
    same: dict[str, bool] = {}
    for repeat in range(settings.forget_repeats):
        for number, session in enumerate(chosen):
            folder = root / f"forget-{session}"
            rest = [u for u in turns if u.session != session]
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(base, folder)  # untimed: the KB as it stood
            order: list[tuple[str, Callable[[], object]]] = [
                ("forget", partial(_forget, folder, session, workspace)),
                ("rebuild", partial(_rebuild, rest, root / f"rebuild-{session}", workspace)),
            ]
            if (number + repeat) % 2:
                order.reverse()
            outcome: dict[str, object] = {}
            for side, step in order:
                outcome[side], seconds = timed(step)
                times[session][side].append(seconds)
            report = outcome["forget"]
            assert isinstance(report, ForgetReport)
            embedded[session] = report.embedded
            same[session] = (
                AnchorStore(folder).load().kb.to_dict()
                == AnchorStore(root / f"rebuild-{session}").load().kb.to_dict()
            )
    totals = {side: sum(sum(t[side]) for t in times.values()) for side in ("forget", "rebuild")}
    value = totals["forget"] / totals["rebuild"]
    result.figures = {
        "sample": settings.sample,
        "sessions": len(sessions),
        "utterances": len(turns),
        "forgotten_sessions": chosen,
        "repeats": settings.forget_repeats,
        "seconds_per_session": {
            s: {side: round(sum(v) / len(v), 3) for side, v in t.items()} for s, t in times.items()
        },
        "texts_embedded_by_forget": embedded,
        "forget_equals_rebuild": same,
    }
    result.ratios.append(
        ratio(
            "forget one session / rebuild without it",
            value,
            FORGET_TARGET,
            note="mean over the forgotten sessions; the KBs are compared (forget_equals_rebuild)",
        )
    )
    if settings.profile and value > FORGET_TARGET:
        session = chosen[len(chosen) // 2]
        target = root / "profile"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(base, target)
        result.profiles[f"forget {session} of {settings.sample}"] = profile_top(
            lambda s: _forget(target, s, workspace), [session]
        )
    return result


def _chosen(sessions: list[str], every: int) -> list[str]:
    """The first, middle and last sessions, and every ``every``-th one, in conversation order."""
    picked = {0, len(sessions) // 2, len(sessions) - 1, *range(0, len(sessions), max(every, 1))}
    return [sessions[i] for i in sorted(picked)]


def _extractor(embedder: Embedder, store: AnchorStore, workspace: Workspace) -> OfflineExtractor:
    """The offline extractor as ``gravity build`` and ``gravity forget`` make it (parses and answers
    kept in the KB)."""
    return OfflineExtractor.kept_in(store.cache_dir, embedder, pipeline=workspace.nlp)


def _build(turns: list[Utterance], folder: Path, workspace: Workspace) -> None:
    store = AnchorStore(folder)
    AnchorBuilder(_extractor(workspace.embedder, store, workspace), workspace.embedder, store=store).add(
        turns
    )


def _forget(folder: Path, session: str, workspace: Workspace) -> ForgetReport:
    """Open the KB in ``folder`` and forget ``session``."""
    embedder = CountingEmbedder(workspace.embedder)
    extractor = _extractor(embedder, AnchorStore(folder), workspace)
    return AnchorBuilder(extractor, embedder, store=AnchorStore(folder)).forget(
        ForgetRequest(sessions=(session,))
    )


def _rebuild(turns: list[Utterance], folder: Path, workspace: Workspace) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    _build(turns, folder, workspace)
