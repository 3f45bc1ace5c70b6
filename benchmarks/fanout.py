"""Benchmark 2: GRAVITY's retriever (question + up to 9 expanded queries) against one plain host search.

Both sides search the same langchain-chroma store of the seed conversation's real turns, embedded
with MiniLM. GRAVITY side: ``GravityRetriever(engine, vector_store=store, k=4).invoke(question)``:
it embeds the question once (shared with the engine, whose embedder is the store's), runs the
engine, embeds the expansions in one batch, searches by vector for each of the 1 + 9 queries and
fuses the lists by reciprocal rank. Host side: ``store.similarity_search(question, k=4)``.
Embedding calls are counted on the shared encoder (one ``embed`` call, whatever its batch size).
"""

from __future__ import annotations

import logging
from typing import Any

from benchmarks.common import (
    BenchSettings,
    CountingEmbedder,
    Result,
    latency,
    profile_top,
    ratio,
    time_interleaved,
)
from benchmarks.prototypes import PrecomputedEmbedder
from benchmarks.workspace import Workspace

__all__ = ["EMBED_CALLS_TARGET", "TIME_TARGET", "run"]

logger = logging.getLogger(__name__)

TIME_TARGET = 2.0
EMBED_CALLS_TARGET = 2.0
_K = 4
_PROFILED_QUESTIONS = 30
_WARMUP = 10


def run(settings: BenchSettings, workspace: Workspace) -> Result:
    """Time the retriever against one search, interleaved per question; count embedding calls."""
    from gravity_langchain import GravityEmbeddings, GravityRetriever

    result = Result(
        name="fanout",
        title="2. Expansion fan-out: GravityRetriever (1 + 9 queries) vs one plain host search",
        sides={
            "retriever": f"GravityRetriever.invoke(question), k={_K}: 1 embed_query + engine query + 1 "
            "embed_documents of the expansions + one similarity_search_by_vector per query + RRF",
            "retriever_precomputed": "prototype of the proposed fix (benchmarks/prototypes.py, not GRAVITY): "
            "the same retriever with the expansions' vectors known beforehand (as if stored by the build), "
            "so only the question is embedded",
            "host": f"langchain-chroma similarity_search(question, k={_K}) (embeds the question inside)",
        },
    )
    # One counter per side, so the timed runs also give the embedding calls of each.
    counters = {side: CountingEmbedder(workspace.embedder) for side in ("retriever", "precomputed", "host")}
    kb, vectors = workspace.seed
    engine = workspace.engine(kb, vectors, counters["retriever"])
    questions, question_vectors = workspace.questions
    items = list(range(len(questions)))
    warmup = min(_WARMUP, len(items))
    with workspace.chroma(*workspace.turns) as collection:
        expansions = [
            engine.query(q, query_embedding=v).expansions
            for q, v in zip(questions, question_vectors, strict=True)
        ]
        precomputed = PrecomputedEmbedder(counters["precomputed"])
        precomputed.precompute([text for texts in expansions for text in texts])
        counters["precomputed"].reset()
        retriever = GravityRetriever(
            engine=engine, vector_store=collection.store(GravityEmbeddings(counters["retriever"])), k=_K
        )
        fixed = GravityRetriever(
            engine=engine, vector_store=collection.store(GravityEmbeddings(precomputed)), k=_K
        )
        store = collection.store(GravityEmbeddings(counters["host"]))

        def gravity(i: int) -> object:
            return retriever.invoke(questions[i])

        def gravity_precomputed(i: int) -> object:
            return fixed.invoke(questions[i])

        def host(i: int) -> object:
            return store.similarity_search(questions[i], k=_K)

        samples = time_interleaved(
            {"retriever": gravity, "retriever_precomputed": gravity_precomputed, "host": host},
            items,
            repeats=settings.fanout_repeats,
            warmup=warmup,
        )
        invocations = warmup + settings.fanout_repeats * len(items)
        per_question = {side: c.calls / invocations for side, c in counters.items()}
        figures: dict[str, Any] = {side: latency(values) for side, values in samples.items()}
        figures.update(
            questions=len(questions),
            host_rows=len(workspace.turns[0]),
            mean_expansions=round(sum(map(len, expansions)) / len(expansions), 2),
            embedding_calls_per_question={side: round(v, 3) for side, v in per_question.items()},
            embedded_texts_per_question=round(counters["retriever"].texts / invocations, 3),
        )
        host_p50 = figures["host"]["p50_ms"]
        time_ratio = figures["retriever"]["p50_ms"] / host_p50
        fixed_ratio = figures["retriever_precomputed"]["p50_ms"] / host_p50
        result.ratios += [
            ratio("retriever/host p50", time_ratio, TIME_TARGET),
            ratio("retriever/host p95", figures["retriever"]["p95_ms"] / figures["host"]["p95_ms"], None),
            ratio("embedding calls per question", per_question["retriever"], EMBED_CALLS_TARGET),
            ratio(
                "retriever(precomputed expansion vectors)/host p50",
                fixed_ratio,
                None,
                note=f"prototype of the fix; {per_question['precomputed']:.2g} embedding calls per question",
            ),
        ]
        result.figures = figures
        if settings.profile and time_ratio > TIME_TARGET:
            profiled = items[:_PROFILED_QUESTIONS]
            result.profiles["GravityRetriever.invoke"] = profile_top(gravity, profiled)
            result.profiles["GravityRetriever.invoke, precomputed expansion vectors"] = profile_top(
                gravity_precomputed, profiled
            )
    return result
