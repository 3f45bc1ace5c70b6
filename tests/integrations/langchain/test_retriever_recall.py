"""The README's LangChain retriever with its default arguments finds more gold evidence than the
user's own store: recall@5 and recall@10 on the LoCoMo dev conversations, against the plain store,
at least 0.03 more on them taken together (the selected anchors' source turns, fetched by id) and
never less on any one.

Run with ``-s`` to see the figures.
"""

from __future__ import annotations

import sys

from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore

from gravity_core.embeddings.base import Embedder
from gravity_core.eval.datasets import EvalSample
from gravity_core.eval.hosts import render_turn
from gravity_core.eval.metrics import evidence_recall
from gravity_core.query.engine import GravityEngine
from gravity_langchain import GravityEmbeddings, GravityRetriever
from tests.integrations.langchain.conftest import LocomoKBs

KS = (5, 10)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def conversation_recall(
    data: EvalSample, engine: GravityEngine, embedder: Embedder
) -> tuple[dict[int, list[float]], dict[int, list[float]]]:
    """Per question, the plain store's and GRAVITY's evidence recall at each k."""
    store = InMemoryVectorStore(GravityEmbeddings(embedder))
    store.add_documents([Document(page_content=render_turn(u), id=u.id) for u in data.utterances])
    retriever = GravityRetriever(engine=engine, vector_store=store)  # the README's defaults
    questions = [q for q in data.questions if q.evidence]
    vectors = embedder.embed([q.question for q in questions])
    plain: dict[int, list[float]] = {k: [] for k in KS}
    ours: dict[int, list[float]] = {k: [] for k in KS}
    for question, vector in zip(questions, vectors, strict=True):
        hits = [d.id for d in store.similarity_search_by_vector(vector.tolist(), k=max(KS))]
        for k in KS:
            plain[k].append(evidence_recall(question.evidence, frozenset(hits[:k])) or 0.0)
            docs = retriever.invoke(question.question, k=k)
            ours[k].append(evidence_recall(question.evidence, frozenset(d.id for d in docs if d.id)) or 0.0)
    return plain, ours


def test_default_retriever_recall_beats_the_plain_stores(locomo_dev_kbs: LocomoKBs) -> None:
    plain: dict[int, list[float]] = {k: [] for k in KS}
    ours: dict[int, list[float]] = {k: [] for k in KS}
    for data, engine in locomo_dev_kbs.conversations:
        store_recall, gravity_recall = conversation_recall(data, engine, locomo_dev_kbs.embedder)
        figures = "  ".join(
            f"@{k}: store {mean(store_recall[k]):.3f} GRAVITY {mean(gravity_recall[k]):.3f}" for k in KS
        )
        sys.stdout.write(f"\n{data.id} ({len(store_recall[KS[0]])} questions) {figures}")
        for k in KS:
            assert mean(gravity_recall[k]) >= mean(store_recall[k]), (data.id, k)
            plain[k] += store_recall[k]
            ours[k] += gravity_recall[k]
    together = "  ".join(f"@{k}: store {mean(plain[k]):.3f} GRAVITY {mean(ours[k]):.3f}" for k in KS)
    sys.stdout.write(f"\nall ({len(plain[KS[0]])} questions) {together}\n")
    for k in KS:
        assert mean(ours[k]) >= mean(plain[k]) + 0.03, (k, mean(ours[k]), mean(plain[k]))
