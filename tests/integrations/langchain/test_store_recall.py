"""A LangGraph store wrapped in GravityStore finds at least the gold evidence the store finds alone.

Each LoCoMo dev conversation goes into an ``InMemoryStore`` (MiniLM vector index), one item per
turn keyed by its utterance id, and into a KB built with the offline extractor, as in
``test_retriever_recall.py``. Every question with evidence is searched at limit 5 and 10 in the
plain store and through :class:`GravityStore`; the evidence recall of GRAVITY's results (the
store's hits with the selected anchors' source turns) must be at least the plain store's on every
conversation and, on them taken together, higher.

Run with ``-s`` to see the figures.
"""

from __future__ import annotations

import sys
from typing import cast

from langgraph.store.base import PutOp, SearchItem, SearchOp
from langgraph.store.memory import InMemoryStore

from gravity_core.embeddings.base import Embedder
from gravity_core.eval.datasets import EvalSample
from gravity_core.eval.hosts import render_turn
from gravity_core.eval.metrics import evidence_recall
from gravity_core.query.engine import GravityEngine
from gravity_langchain.store import GravityStore
from tests.integrations.langchain.conftest import LocomoKBs
from tests.integrations.langchain.store_cases import index_config, keys

KS = (5, 10)

Recall = dict[int, list[float]]


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def conversation_recall(data: EvalSample, engine: GravityEngine, embedder: Embedder) -> tuple[Recall, Recall]:
    """Per question, the plain store's and GravityStore's evidence recall at each limit."""
    plain = InMemoryStore(index=index_config(embedder))
    namespace = ("locomo", data.id)
    plain.batch(
        [PutOp(namespace, u.id, {"text": render_turn(u), "session": u.session}) for u in data.utterances]
    )
    store = GravityStore(plain, engine)
    theirs: Recall = {k: [] for k in KS}
    ours: Recall = {k: [] for k in KS}
    for question in (q for q in data.questions if q.evidence):
        # One batch of the plain store, one of GravityStore: each embeds the question once.
        found = plain.batch([SearchOp(namespace, None, k, 0, question.question) for k in KS])
        added = store.batch([SearchOp(namespace, None, k, 0, question.question) for k in KS])
        for k, hits, gravity in zip(
            KS, cast(list[list[SearchItem]], found), cast(list[list[SearchItem]], added), strict=True
        ):
            assert len(gravity) == len(hits) == k
            theirs[k].append(evidence_recall(question.evidence, frozenset(keys(hits))) or 0.0)
            ours[k].append(evidence_recall(question.evidence, frozenset(keys(gravity))) or 0.0)
    return theirs, ours


def test_gravity_store_finds_at_least_the_evidence_the_store_finds(locomo_dev_kbs: LocomoKBs) -> None:
    plain: Recall = {k: [] for k in KS}
    ours: Recall = {k: [] for k in KS}
    for data, engine in locomo_dev_kbs.conversations:
        store_recall, gravity_recall = conversation_recall(data, engine, locomo_dev_kbs.embedder)
        figures = "  ".join(
            f"@{k}: store {mean(store_recall[k]):.3f} GravityStore {mean(gravity_recall[k]):.3f}" for k in KS
        )
        sys.stdout.write(f"\n{data.id} ({len(store_recall[KS[0]])} questions) {figures}")
        for k in KS:
            assert mean(gravity_recall[k]) >= mean(store_recall[k]), (data.id, k)
            plain[k] += store_recall[k]
            ours[k] += gravity_recall[k]
    together = "  ".join(f"@{k}: store {mean(plain[k]):.3f} GravityStore {mean(ours[k]):.3f}" for k in KS)
    sys.stdout.write(f"\nall ({len(plain[KS[0]])} questions) {together}\n")
    for k in KS:
        assert mean(ours[k]) > mean(plain[k]), (k, mean(ours[k]), mean(plain[k]))
