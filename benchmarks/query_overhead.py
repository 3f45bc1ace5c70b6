"""Benchmark 1: GRAVITY's query path against one host ``similarity_search`` on Chroma, at 1k to 1M anchors.

GRAVITY side: ``GravityEngine.query(question, query_embedding=v)``: native matching, anchor
retrieval and cosine rerank, temporal slots, the nine expansions and the formatted injection,
with the question's vector passed in (the host computes it anyway and shares it).
Host side: ``langchain_chroma.Chroma.similarity_search(question, k=4)`` on embedded chromadb,
which embeds the question with the same encoder (through ``GravityEmbeddings``) inside the call.
The host store holds as many turn rows as the KB has anchors (copies of the seed conversation's
turns with perturbed vectors).

KBs of 1k, 10k and 100k anchors are grown in memory (with a same-names variant, the worst case of
native matching); the 1M one is grown part by part into a folder (``Workspace.saved``: as models it
would take about 22 GB) and loaded with ``GravityEngine.from_dir``, as a user loads it. Where an
inverted file is in use, the anchors selected are compared with those of exact search.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from benchmarks.common import (
    BenchSettings,
    Result,
    count_model_calls,
    latency,
    profile_top,
    ratio,
    time_interleaved,
    timed,
)
from benchmarks.synthetic import grow_rows
from benchmarks.workspace import Workspace
from gravity_core.embeddings.base import Matrix
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import NumpyAnchorIndex
from gravity_core.query.index.numpy_index import DEFAULT_IVF
from gravity_core.schema import AnchorKind, KnowledgeBase
from gravity_core.storage.anchor_vectors import EXPANSION_KIND, AnchorVectors
from gravity_core.storage.store import AnchorStore

if TYPE_CHECKING:
    from langchain_core.vectorstores import VectorStore

__all__ = ["TARGETS", "run"]

logger = logging.getLogger(__name__)

#: Nominal KB size -> target of GRAVITY p50 / host p50.
TARGETS = {10_000: 0.25, 100_000: 0.5, 1_000_000: 0.5}
#: Most questions on which the approximate search may select other anchors than exact search.
MAX_DIFFERENT = 0.02
_HOST_K = 4
_PROFILED_QUESTIONS = 40


def run(settings: BenchSettings, workspace: Workspace) -> Result:
    """Time both sides on every KB size, interleaved per question; count model calls per query."""
    result = Result(
        name="query_overhead",
        title="1. Query overhead: GRAVITY query path vs one Chroma similarity_search",
        sides={
            "gravity": "GravityEngine.query with the question's vector passed in: native matching, anchor "
            "retrieval + rerank, temporal slots, 9 expansions, formatted injection; the engine of "
            "GravityEngine.from_dir(folder) (KB packed; numpy index, kinds of 10k+ anchors held in "
            "float16 and searched through the faiss inverted file of 8-bit codes); KB grown with "
            "made-up names per replica (many conversations); at the sizes of `scale_sizes` (1M) the KB "
            "is saved part by part (never held as models) and no same-names KB is made",
            "gravity_first_ask": "the same engine asked each question once, before the timed passes (its "
            "memos of rendered anchors and expansion texts hold only what earlier questions filled)",
            "gravity_same_names": "the same on a KB whose replicas keep their names (637 separate "
            "'Caroline's at 100k): worst case of native matching, no target",
            "gravity_exact": "reference where the inverted file is in use: the same engine searching every "
            "kind exactly (NumpyAnchorIndex.from_vectors(vectors, approximate=None)); at `scale_sizes` "
            "only compared, not timed",
            "host": f"langchain-chroma similarity_search(question, k={_HOST_K}) on embedded chromadb "
            "holding as many turn rows as the KB has anchors, embedding the question with the same "
            "MiniLM (GravityEmbeddings) inside the call",
            "host_by_vector": "the same search given the vector (similarity_search_by_vector): "
            "the search alone",
        },
    )
    for nominal in settings.kb_sizes:
        _grown_size(result, settings, workspace, nominal)
        workspace.forget(nominal)
    for nominal in settings.scale_sizes:
        _saved_size(result, settings, workspace, nominal)  # kept for the memory benchmark
    return result


def _grown_size(result: Result, settings: BenchSettings, workspace: Workspace, nominal: int) -> None:
    """One size grown in memory: the engine from its saved folder, a same-names engine, the exact one."""
    grown = workspace.grown(nominal)
    same_names = workspace.grown(nominal, rename=False)
    engine, engine_seconds = _timed_engine(workspace, grown.kb, grown.vectors)
    worst = workspace.engine(same_names.kb, same_names.vectors)
    exact = _exact_engine(workspace, grown.kb, grown.vectors)
    figures, sides = _against_host(settings, workspace, engine, worst, exact, grown.anchors, timed_exact=True)
    figures.update(
        anchors=grown.anchors,
        replicas=grown.replicas,
        utterances=len(grown.kb.utterances),
        engine_build_s=round(engine_seconds, 2),
    )
    _report(result, settings, nominal, figures, sides)


def _saved_size(result: Result, settings: BenchSettings, workspace: Workspace, nominal: int) -> None:
    """One size too large to hold as models: saved part by part, loaded as a user loads it."""
    saved = workspace.saved(nominal)
    started = time.perf_counter()
    engine = GravityEngine.from_dir(saved.folder, embedder=workspace.embedder, follow=False)
    engine_seconds = time.perf_counter() - started
    exact = None
    if _approximate(saved.vectors):
        exact = GravityEngine(
            engine.records,
            NumpyAnchorIndex.from_vectors(saved.vectors, approximate=None),
            workspace.embedder,
            expansion_vectors=saved.vectors.get(EXPANSION_KIND),
        )
    figures, sides = _against_host(settings, workspace, engine, None, exact, saved.anchors, timed_exact=False)
    figures.update(anchors=saved.anchors, engine_build_s=round(engine_seconds, 2))
    _report(result, settings, nominal, figures, sides)


def _against_host(
    settings: BenchSettings,
    workspace: Workspace,
    engine: GravityEngine,
    worst: GravityEngine | None,
    exact: GravityEngine | None,
    anchors: int,
    *,
    timed_exact: bool,
) -> tuple[dict[str, Any], dict[str, Callable[[int], object]]]:
    """First asks, then every side interleaved per question against a host of ``anchors`` turn rows."""
    from gravity_langchain import GravityEmbeddings

    questions, vectors = workspace.questions
    turn_ids, turn_texts, turn_vectors = workspace.turns
    items = list(range(len(questions)))
    rows = grow_rows(turn_ids, turn_texts, turn_vectors, anchors, noise=settings.noise, seed=settings.seed)
    started = time.perf_counter()
    with workspace.chroma(*rows) as collection:
        store = collection.store(GravityEmbeddings(workspace.embedder))
        insert_seconds = time.perf_counter() - started
        sides = _sides(engine, worst, exact if timed_exact else None, store, questions, vectors)
        first_asks = [timed(partial(sides["gravity"], i))[1] for i in items]
        samples = time_interleaved(sides, items, repeats=settings.query_repeats)
        calls = count_model_calls(sides["gravity"], items)
    figures: dict[str, Any] = {side: latency(values) for side, values in samples.items()}
    figures["gravity_first_ask"] = latency(first_asks)
    if exact is not None:
        same, same_set = _agreement(exact, engine, questions, vectors)
        figures["same_anchors_as_exact"] = same
        figures["same_anchor_set_as_exact"] = same_set
    figures.update(
        questions=len(items),
        host_rows=len(rows[0]),
        host_insert_s=round(insert_seconds, 2),
        model_calls=calls,
    )
    return figures, sides


def _report(
    result: Result,
    settings: BenchSettings,
    nominal: int,
    figures: dict[str, Any],
    sides: dict[str, Callable[[int], object]],
) -> None:
    """The size's figures and ratios (GRAVITY's sides profiled where the target is missed)."""
    result.figures[str(nominal)] = figures
    host = figures["host"]["p50_ms"]
    target = TARGETS.get(nominal)
    label = f"{figures['anchors']:,} anchors"
    p50 = figures["gravity"]["p50_ms"] / host
    result.ratios += [
        ratio(f"gravity/host p50 at {label}", p50, target),
        ratio(f"gravity/host p95 at {label}", figures["gravity"]["p95_ms"] / figures["host"]["p95_ms"], None),
        ratio(
            f"gravity(first ask)/host p50 at {label}",
            figures["gravity_first_ask"]["p50_ms"] / host,
            None,
            note="each question asked once, before any timed pass: the engine's memos hold only what "
            "earlier questions rendered",
        ),
    ]
    if "gravity_same_names" in figures:
        result.ratios.append(
            ratio(
                f"gravity(same names)/host p50 at {label}",
                figures["gravity_same_names"]["p50_ms"] / host,
                None,
            )
        )
    result.ratios += [
        ratio(
            f"gravity/host-search-by-vector p50 at {label}",
            figures["gravity"]["p50_ms"] / figures["host_by_vector"]["p50_ms"],
            None,
            note="the search alone, without embedding the question",
        ),
        ratio(f"model calls per query at {label}", figures["model_calls"] / figures["questions"], 0),
    ]
    if "gravity_exact" in figures:
        result.ratios.append(
            ratio(
                f"gravity(exact search)/host p50 at {label}",
                figures["gravity_exact"]["p50_ms"] / host,
                None,
                note="reference",
            )
        )
    if "same_anchors_as_exact" in figures:
        result.ratios.append(
            ratio(
                f"share of questions whose anchors differ from exact search at {label}",
                1 - figures["same_anchors_as_exact"],
                MAX_DIFFERENT,
                note=f"same anchors in the same order; as a set they differ on "
                f"{1 - figures['same_anchor_set_as_exact']:.1%}",
            )
        )
    if settings.profile and target is not None and p50 > target:
        profiled = list(range(min(figures["questions"], _PROFILED_QUESTIONS)))
        result.profiles[f"gravity query at {label}"] = profile_top(sides["gravity"], profiled)
        if "gravity_same_names" in sides:
            result.profiles[f"gravity query (same names) at {label}"] = profile_top(
                sides["gravity_same_names"], profiled
            )
    logger.info("query overhead at %s done", label)


def _timed_engine(
    workspace: Workspace, kb: KnowledgeBase, vectors: AnchorVectors
) -> tuple[GravityEngine, float]:
    """The engine a user of the KB folder gets (``from_dir``: the KB packed), and its load time."""
    folder = workspace.root / f"query-kb-{len(kb.entities) + len(kb.events) + len(kb.topics)}"
    AnchorStore(folder).save(kb, vectors)
    started = time.perf_counter()
    engine = GravityEngine.from_dir(folder, embedder=workspace.embedder, follow=False)
    return engine, time.perf_counter() - started


def _exact_engine(workspace: Workspace, kb: KnowledgeBase, vectors: AnchorVectors) -> GravityEngine | None:
    """The same engine searching exactly, when the default one uses an inverted file for some kind."""
    if not _approximate(vectors):
        return None
    index = NumpyAnchorIndex.from_vectors(vectors, approximate=None)
    return GravityEngine(kb, index, workspace.embedder)


def _approximate(vectors: AnchorVectors) -> bool:
    """Whether the default index searches some kind of these vectors through an inverted file."""
    return any(len(vectors.get(kind).ids) >= DEFAULT_IVF.min_rows for kind in AnchorKind)


def _agreement(
    exact: GravityEngine, other: GravityEngine, questions: list[str], vectors: Matrix
) -> tuple[float, float]:
    """Shares of questions for which both engines select the same anchors in the same order, and as a set."""
    ordered = unordered = 0
    for q, v in zip(questions, vectors, strict=True):
        mine = [a.id for a in other.query(q, query_embedding=v).anchors]
        theirs = [a.id for a in exact.query(q, query_embedding=v).anchors]
        ordered += mine == theirs
        unordered += set(mine) == set(theirs)
    return round(ordered / len(questions), 4), round(unordered / len(questions), 4)


def _sides(
    engine: GravityEngine,
    worst: GravityEngine | None,
    exact: GravityEngine | None,
    store: VectorStore,
    questions: list[str],
    vectors: Matrix,
) -> dict[str, Callable[[int], object]]:
    def asks(of: GravityEngine) -> Callable[[int], object]:
        def gravity(i: int) -> object:
            return of.query(questions[i], query_embedding=vectors[i])

        return gravity

    def host(i: int) -> object:
        return store.similarity_search(questions[i], k=_HOST_K)

    def host_by_vector(i: int) -> object:
        return store.similarity_search_by_vector(vectors[i].tolist(), k=_HOST_K)

    engines = {"gravity": engine, "gravity_same_names": worst, "gravity_exact": exact}
    sides = {name: asks(of) for name, of in engines.items() if of is not None}
    sides.update(host=host, host_by_vector=host_by_vector)
    return sides
