"""Benchmark 2: the paper's query expansion (question + up to 9 expanded queries) against one host search.

The shipped policy searches no expansion (``DEFAULT_POLICY.every`` is 0); this benchmark measures
the fan-out of the paper's query expansion, :data:`~gravity_core.context.policy.EXPANDING_POLICY`,
given explicitly, and beside it the shipped default path.

Both sides search the same langchain-chroma store of the seed conversation's real turns, embedded
with MiniLM. GRAVITY side: ``GravityRetriever(engine, vector_store=store, k=30,
policy=EXPANDING_POLICY).invoke(question)`` (30 results, past the policy's lead of 25, so that the
expansions are searched; at ``k=4`` the retriever makes only the question's search): it embeds the
question once (shared with the engine, whose embedder is the store's), runs the engine, takes the
expansions' vectors stored by the build (embedding in one batch only those the build did not
store), searches the question's vector and then the expansions' in order, while the policy's merge
can still place their hits, through the store's own ``similarity_search_by_vector`` (so a store
subclass or wrapper sees every search), and merges the lists by the context policy. Host side:
``store.similarity_search(question, k=30)``. Side by side: the same retriever given
``batched_search=ChromaBatchedSearch(collection)``, the opt-in path that sends all vectors in one
``Collection.query`` of chromadb's public API; for reference, the retriever over an engine without
stored expansion vectors; and the shipped default (``GravityRetriever(engine, vector_store=store,
k=30)``: the question's search and the selected anchors' source turns fetched by id).
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
from benchmarks.workspace import Workspace
from gravity_core.context.policy import EXPANDING_POLICY
from gravity_core.query.engine import GravityEngine

__all__ = ["EMBED_CALLS_TARGET", "TIME_TARGET", "run"]

logger = logging.getLogger(__name__)

TIME_TARGET = 2.0
EMBED_CALLS_TARGET = 2.0
# Past the expanding policy's lead: with fewer results the expansions are not searched at all.
_K = EXPANDING_POLICY.lead + 5
_PROFILED_QUESTIONS = 30
_WARMUP = 10


def run(settings: BenchSettings, workspace: Workspace) -> Result:
    """Time the retriever against one search, interleaved per question; count embedding calls and searches."""
    from langchain_chroma import Chroma

    from gravity_langchain import ChromaBatchedSearch, GravityEmbeddings, GravityRetriever

    class CountingChroma(Chroma):
        """Counts the retriever's searches of the store."""

        searches = 0

        def similarity_search_by_vector(self, *args: Any, **kwargs: Any) -> Any:
            type(self).searches += 1
            return super().similarity_search_by_vector(*args, **kwargs)

    class CountingDefaultChroma(CountingChroma):
        """Counts the shipped default retriever's searches apart."""

        searches = 0

    result = Result(
        name="fanout",
        title="2. Expansion fan-out: the paper's query expansion (EXPANDING_POLICY: question + up to 9 "
        "expansions) vs one host search; the shipped default (no expansion searched) beside it",
        sides={
            "retriever": f"GravityRetriever(policy=EXPANDING_POLICY).invoke(question), k={_K}: 1 embed_query "
            "+ engine query + stored expansion vectors (the rest embedded in 1 call) + one store "
            "similarity_search_by_vector for the question and for each expansion, in order, while the "
            "policy's merge can place its hits + the merge",
            "retriever_batched": "the same retriever with batched_search=ChromaBatchedSearch(collection): "
            "all vectors in one chromadb Collection.query (opt-in; bypasses the store object)",
            "retriever_unstored": "the same retriever over an engine without the build's expansion vectors: "
            "all expansions embedded at query time (1 embed_documents call)",
            "retriever_default": f"GravityRetriever.invoke(question), k={_K}, the shipped DEFAULT_POLICY: "
            "1 embed_query + engine query + the question's similarity_search_by_vector + the selected "
            "anchors' source turns fetched by id (get_by_ids) + the merge; no expansion embedded or searched",
            "host": f"langchain-chroma similarity_search(question, k={_K}) (embeds the question inside)",
        },
    )
    # One counter per side, so the timed runs also give the embedding calls of each.
    counters = {
        side: CountingEmbedder(workspace.embedder)
        for side in ("retriever", "batched", "unstored", "default", "host")
    }
    kb, vectors = workspace.seed
    engine = workspace.engine(kb, vectors, counters["retriever"])
    batched_engine = workspace.engine(kb, vectors, counters["batched"])
    unstored = GravityEngine(kb, engine.index, counters["unstored"])
    default_engine = workspace.engine(kb, vectors, counters["default"])
    questions, question_vectors = workspace.questions
    items = list(range(len(questions)))
    warmup = min(_WARMUP, len(items))
    with workspace.chroma(*workspace.turns) as collection:
        expansions = [
            engine.query(q, query_embedding=v).expansions
            for q, v in zip(questions, question_vectors, strict=True)
        ]
        stored = sum(v is not None for texts in expansions for v in engine.known_expansion_vectors(texts))
        retriever = GravityRetriever(
            engine=engine,
            vector_store=collection.store(GravityEmbeddings(counters["retriever"]), CountingChroma),
            k=_K,
            policy=EXPANDING_POLICY,
        )
        batched = GravityRetriever(
            engine=batched_engine,
            vector_store=collection.store(GravityEmbeddings(counters["batched"])),
            k=_K,
            policy=EXPANDING_POLICY,
            batched_search=ChromaBatchedSearch(collection.client.get_collection(collection.name)),
        )
        plain = GravityRetriever(
            engine=unstored,
            vector_store=collection.store(GravityEmbeddings(counters["unstored"])),
            k=_K,
            policy=EXPANDING_POLICY,
        )
        shipped = GravityRetriever(
            engine=default_engine,
            vector_store=collection.store(GravityEmbeddings(counters["default"]), CountingDefaultChroma),
            k=_K,
        )
        store = collection.store(GravityEmbeddings(counters["host"]))

        def gravity(i: int) -> object:
            return retriever.invoke(questions[i])

        def gravity_batched(i: int) -> object:
            return batched.invoke(questions[i])

        def gravity_unstored(i: int) -> object:
            return plain.invoke(questions[i])

        def gravity_default(i: int) -> object:
            return shipped.invoke(questions[i])

        def host(i: int) -> object:
            return store.similarity_search(questions[i], k=_K)

        samples = time_interleaved(
            {
                "retriever": gravity,
                "retriever_batched": gravity_batched,
                "retriever_unstored": gravity_unstored,
                "retriever_default": gravity_default,
                "host": host,
            },
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
            share_of_expansions_stored_by_the_build=round(stored / max(sum(map(len, expansions)), 1), 3),
            embedding_calls_per_question={side: round(v, 3) for side, v in per_question.items()},
            embedded_texts_per_question=round(counters["retriever"].texts / invocations, 3),
            retriever_store_searches_per_question=round(CountingChroma.searches / invocations, 3),
            default_store_searches_per_question=round(CountingDefaultChroma.searches / invocations, 3),
        )
        host_p50 = figures["host"]["p50_ms"]
        time_ratio = figures["retriever"]["p50_ms"] / host_p50
        unstored_ratio = figures["retriever_unstored"]["p50_ms"] / host_p50
        result.ratios += [
            ratio("retriever/host p50", time_ratio, TIME_TARGET),
            ratio("retriever/host p95", figures["retriever"]["p95_ms"] / figures["host"]["p95_ms"], None),
            ratio(
                "retriever(batched_search=ChromaBatchedSearch)/host p50",
                figures["retriever_batched"]["p50_ms"] / host_p50,
                None,
                note="opt-in; one Chroma request for all vectors",
            ),
            ratio("embedding calls per question", per_question["retriever"], EMBED_CALLS_TARGET),
            ratio(
                "retriever(no stored expansion vectors)/host p50",
                unstored_ratio,
                None,
                note=f"reference; {per_question['unstored']:.2g} embedding calls per question",
            ),
            ratio(
                "retriever(shipped DEFAULT_POLICY)/host p50",
                figures["retriever_default"]["p50_ms"] / host_p50,
                None,
                note=f"the default path: {per_question['default']:.2g} embedding calls and "
                f"{figures['default_store_searches_per_question']:.2g} searches per question",
            ),
        ]
        result.figures = figures
        if settings.profile and time_ratio > TIME_TARGET:
            profiled = items[:_PROFILED_QUESTIONS]
            result.profiles["GravityRetriever.invoke"] = profile_top(gravity, profiled)
            result.profiles["GravityRetriever.invoke, no stored expansion vectors"] = profile_top(
                gravity_unstored, profiled
            )
    return result
