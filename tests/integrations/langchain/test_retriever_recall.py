"""The README's LangChain retriever with its default arguments never makes the user's own store find
less gold evidence: recall@5 and recall@10 on every LoCoMo dev conversation, against the plain store.

Run with ``-s`` to see the figures.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import default_embedder
from gravity_core.eval.datasets import load_locomo_eval
from gravity_core.eval.hosts import render_turn
from gravity_core.eval.metrics import evidence_recall
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.query.engine import GravityEngine
from gravity_langchain import GravityEmbeddings, GravityRetriever

LOCOMO = Path(__file__).resolve().parents[4] / "shared" / "data" / "locomo" / "locomo_dev.json"
KS = (5, 10)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


@pytest.mark.parametrize("sample", [s.id for s in load_locomo_eval(LOCOMO)])
def test_default_retriever_recall_is_at_least_the_plain_stores(sample: str) -> None:
    (data,) = load_locomo_eval(LOCOMO, samples=[sample])
    embedder = default_embedder()
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder)
    builder.add(data.utterances)
    engine = GravityEngine.from_builder(builder)
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
    figures = "  ".join(f"@{k}: store {mean(plain[k]):.3f} GRAVITY {mean(ours[k]):.3f}" for k in KS)
    sys.stdout.write(f"\n{sample} ({len(questions)} questions) {figures}\n")
    for k in KS:
        assert mean(ours[k]) >= mean(plain[k]), (sample, k, mean(ours[k]), mean(plain[k]))
