"""Benchmarks 4 and 5: offline build speed against the encoder alone, and incremental add against a rebuild.

One loop serves both. For each repetition and each sample (sides alternating), it times:

- ``encoder``: ``embedder.embed`` of the sample's turns (``speaker: text``), the floor of any build
  that embeds its input;
- ``parse``: ``nlp.pipe`` of the same turns' texts with the offline extractor's spaCy pipeline, the
  floor of any build that parses its input;
- ``build``: ``AnchorBuilder(OfflineExtractor.kept_in(cache, MiniLM), MiniLM).add(turns)`` plus the
  anchor vectors (in memory; the parses and answers written to the folder's ``cache/`` as ``gravity
  build`` writes them), then ``save`` of the KB to that folder: together the rebuild from scratch;
- ``add``: open a saved KB of the sample without its last session (load), add that session (its
  parses and answers kept too), save.

Benchmark 5 also times an add into a 100k-anchor KB saved as a delta generation against the same
add saved as a full one (:mod:`benchmarks.delta_save`).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from benchmarks import delta_save
from benchmarks.common import BenchSettings, CountingEmbedder, Result, profile_top, ratio, timed
from benchmarks.workspace import Workspace, build_offline, turn_text
from gravity_core.build.builder import AnchorBuilder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders.locomo import load_locomo, locomo_sample_ids
from gravity_core.schema import Utterance
from gravity_core.storage.store import AnchorStore

__all__ = ["ADD_TARGET", "BUILD_TARGET", "PARSED_BUILD_TARGET", "run"]

logger = logging.getLogger(__name__)

BUILD_TARGET = 1.5
PARSED_BUILD_TARGET = 2.0
ADD_TARGET = 0.05


def run(settings: BenchSettings, workspace: Workspace) -> list[Result]:
    """Time encoder, build and add per sample, alternating; returns results 4 and 5."""
    speed = Result(
        name="offline_build",
        title="4. Offline build speed: offline build vs the encoder alone",
        sides={
            "build": "AnchorBuilder(OfflineExtractor.kept_in(cache, MiniLM), MiniLM).add(turns) + anchor "
            "vectors, in memory, parses and answers kept in cache/ as gravity build keeps them",
            "encoder": "MiniLM embed of the same turns (speaker: text), one call per sample",
            "parse": "spaCy nlp.pipe of the same turns' texts (the offline extractor's pipeline)",
        },
    )
    incremental = Result(
        name="incremental_add",
        title="5. Incremental add: one new session into a built KB vs rebuilding from scratch",
        sides={
            "add": "load the saved KB without its last session, add that session (offline extractor), save",
            "rebuild": "build all sessions from scratch (as in 4) and save the KB to a fresh folder",
            "add at scale": "add one session to a 100k-anchor KB (loaded first, untimed), saved as a delta "
            "generation (the default) or as a full generation (delta_share=0)",
        },
    )
    embedder = workspace.embedder
    samples = {
        s: load_locomo(settings.locomo, s)
        for s in settings.build_samples or locomo_sample_ids(settings.locomo)
    }
    root = workspace.root / "builds"
    bases = {sample: _base(root, sample, turns, workspace) for sample, turns in samples.items()}
    _warm_up(next(iter(samples.values())), workspace)
    times: dict[str, dict[str, list[float]]] = {
        s: {"encoder": [], "parse": [], "build": [], "save": [], "add": [], "add_texts_embedded": []}
        for s in samples
    }
    embedded = CountingEmbedder(embedder)
    for repeat in range(settings.build_repeats):
        for number, (sample, turns) in enumerate(samples.items()):
            steps = [
                partial(_encode, turns, workspace, times[sample]),
                partial(_parse, turns, workspace, times[sample]),
                partial(_rebuild, turns, embedded, root / f"rebuild-{sample}", workspace, times[sample]),
                partial(_add, turns, bases[sample], root / f"add-{sample}", workspace, times[sample]),
            ]
            if (number + repeat) % 2:
                steps.reverse()
            for step in steps:
                step()
    sides = ("encoder", "parse", "build", "save", "add")
    totals = {side: sum(sum(t[side]) for t in times.values()) for side in sides}
    turns_count = sum(len(t) for t in samples.values())
    per_sample = {
        sample: {side: round(sum(v) / max(len(v), 1), 3) for side, v in t.items()}
        for sample, t in times.items()
    }
    speed.figures = {
        "samples": list(samples),
        "utterances": turns_count,
        "repeats": settings.build_repeats,
        "seconds_per_sample": {
            s: {k: v[k] for k in ("encoder", "parse", "build")} for s, v in per_sample.items()
        },
        "texts_embedded_by_build_per_turn": round(embedded.texts / (turns_count * settings.build_repeats), 3),
        "chars_embedded_by_build_over_encoder": round(
            embedded.chars
            / (settings.build_repeats * sum(len(turn_text(u)) for t in samples.values() for u in t)),
            3,
        ),
        "embed_calls_by_build_per_repeat": round(embedded.calls / settings.build_repeats, 1),
        "embed_calls_by_encoder_per_repeat": len(samples),
    }
    build_ratio = totals["build"] / totals["encoder"]
    speed.ratios.append(ratio("offline build / encoder alone", build_ratio, BUILD_TARGET))
    parsed_ratio = totals["build"] / (totals["encoder"] + totals["parse"])
    speed.ratios.append(ratio("offline build / (encoder + parse)", parsed_ratio, PARSED_BUILD_TARGET))
    rebuild = totals["build"] + totals["save"]
    add_ratio = totals["add"] / rebuild
    incremental.figures = {
        "samples": list(samples),
        "new_session_turns": {s: len(t) - len(bases[s][1]) for s, t in samples.items()},
        "seconds_per_sample": {
            s: {"add": v["add"], "rebuild": round(v["build"] + v["save"], 3)} for s, v in per_sample.items()
        },
        "texts_embedded_by_add": {s: v["add_texts_embedded"] for s, v in per_sample.items()},
        "share_of_turns_added": round(
            sum(len(t) - len(bases[s][1]) for s, t in samples.items()) / turns_count, 4
        ),
    }
    incremental.ratios.append(ratio("add one session / rebuild from scratch", add_ratio, ADD_TARGET))
    incremental.figures["add_at_scale"], at_scale = delta_save.run(settings, workspace)
    incremental.ratios.append(at_scale)
    first, turns = next(iter(samples.items()))
    if settings.profile and build_ratio > BUILD_TARGET:
        speed.profiles[f"offline build of {first}"] = profile_top(
            lambda t: build_offline(t, embedder, pipeline=workspace.nlp), [turns]
        )
    if settings.profile and add_ratio > ADD_TARGET:
        target = root / f"profile-add-{first}"
        incremental.profiles[f"add last session of {first}"] = profile_top(
            lambda t: _add(t, bases[first], target, workspace, {"add": [], "add_texts_embedded": []}), [turns]
        )
    return [speed, incremental]


def _encode(turns: Sequence[Utterance], workspace: Workspace, times: dict[str, list[float]]) -> None:
    texts = [turn_text(u) for u in turns]
    _, seconds = timed(lambda: workspace.embedder.embed(texts))
    times["encoder"].append(seconds)


def _parse(turns: Sequence[Utterance], workspace: Workspace, times: dict[str, list[float]]) -> None:
    texts = [u.text for u in turns]
    _, seconds = timed(lambda: list(workspace.nlp.pipe(texts, batch_size=64)))
    times["parse"].append(seconds)


def _rebuild(
    turns: Sequence[Utterance],
    embedder: CountingEmbedder,
    folder: Path,
    workspace: Workspace,
    times: dict[str, list[float]],
) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    caches = AnchorStore(folder).cache_dir  # kept parses and answers, as gravity build writes them
    builder, seconds = timed(lambda: build_offline(turns, embedder, pipeline=workspace.nlp, cache_dir=caches))
    times["build"].append(seconds)
    _, seconds = timed(lambda: AnchorStore(folder).save(builder.kb, builder.vectors))
    times["save"].append(seconds)


def _add(
    turns: Sequence[Utterance],
    base: tuple[Path, list[Utterance]],
    folder: Path,
    workspace: Workspace,
    times: dict[str, list[float]],
) -> None:
    embedder = CountingEmbedder(workspace.embedder)
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(base[0], folder)
    fresh = turns[len(base[1]) :]

    def add() -> None:
        store = AnchorStore(folder)
        extractor = OfflineExtractor.kept_in(store.cache_dir, embedder, pipeline=workspace.nlp)
        AnchorBuilder(extractor, embedder, store=store).add(fresh)

    _, seconds = timed(add)
    times["add"].append(seconds)
    times["add_texts_embedded"].append(embedder.texts)


def _base(
    root: Path, sample: str, turns: list[Utterance], workspace: Workspace
) -> tuple[Path, list[Utterance]]:
    """A saved KB of ``turns`` without the last session (built once, untimed)."""
    last = turns[-1].session
    earlier = [u for u in turns if u.session != last]
    folder = root / f"base-{sample}"
    shutil.rmtree(folder, ignore_errors=True)
    build_offline(earlier, workspace.embedder, AnchorStore(folder), pipeline=workspace.nlp)
    return folder, earlier


def _warm_up(turns: list[Utterance], workspace: Workspace) -> None:
    """One small build and encode, so first-use costs (regex compiles, model load) are not timed."""
    head = [u for u in turns if u.session in dict.fromkeys(t.session for t in turns[:60])][:60]
    build_offline(head, workspace.embedder, pipeline=workspace.nlp)
    workspace.embedder.embed([turn_text(u) for u in head])
    list(workspace.nlp.pipe([u.text for u in head]))
