"""Load: one engine queried from many threads and asyncio tasks at once answers as it does alone.

Each run starts from a fresh engine (cold lexicon, rendering and token caches), so the lazy fills
race too; one variant shrinks the lexicon's caches to two entries so they are cleared constantly
while other threads read them. The questions mix names, misspellings, dates and relative times,
and the presets mix modules, reranking and expansion. Every concurrent answer must equal the
sequential answer to the same question, anchors, scores, expansions and text alike.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.embeddings.base import Embedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.config import MatchWeights, QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import AnchorIndex, ChromaAnchorIndex
from gravity_core.query.matching import lexicon, names
from gravity_core.query.recipes import PRESETS
from gravity_core.query.types import AnchorContext
from gravity_core.storage.store import AnchorStore

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_conversation.jsonl"
THREADS = 16
TASKS = 50

QUESTIONS = [
    "Where does Maya work now?",
    "What happened with Biscuit?",
    "When did Maya adopt Biscuit?",
    "What did Maya do in March 2024?",
    "Did Jonas ship the game by May?",
    "Who is Jonas's sister?",
    "Where does Mya live?",  # misspelled: the fuzzy name path
    "What did Jonass say about Fernlef?",
    "What happened last month?",
    "What did they talk about before the race?",
    "How did the half marathon go?",
    "What is Maya's job?",
    "Tell me about the children's ward.",
    "Which city did Maya move to?",
    "What happened in January 2024?",
    "Anything about nights?",
    "qwxz zzyq",  # matches nothing
    "",
]
CONFIGS = [PRESETS[name] for name in ("full", "+EV", "+T", "-rerank", "-expansion")]
# Other matching weights: the engine makes the lexicon's variant at the first query that asks for them.
CONFIGS.append(PRESETS["full"].model_copy(update={"weights": MatchWeights(holder=0.7, key_fact=0.6)}))


def jobs() -> list[tuple[str, QueryConfig]]:
    return [(q, c) for q in QUESTIONS for c in CONFIGS]


@pytest.fixture(scope="module")
def hashing() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture(scope="module")
def kb_dir(sample_kb_dir: Path) -> Path:
    return sample_kb_dir


def sequential(engine: GravityEngine, work: Sequence[tuple[str, QueryConfig]]) -> list[AnchorContext]:
    return [engine.query(q, config=c) for q, c in work]


def concurrently(
    engine: GravityEngine, work: Sequence[tuple[str, QueryConfig]], per_thread: int | None = None
) -> list[dict[int, AnchorContext]]:
    """Each thread answers ``per_thread`` jobs (default all), from its own offset; all start at once."""
    start = threading.Barrier(THREADS)
    count = per_thread or len(work)

    def worker(offset: int) -> dict[int, AnchorContext]:
        order = [(offset + i) % len(work) for i in range(count)]
        start.wait()
        return {i: engine.query(work[i][0], config=work[i][1]) for i in order}

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(worker, range(THREADS)))


def assert_same(expected: list[AnchorContext], runs: Sequence[dict[int, AnchorContext]]) -> None:
    for run in runs:
        assert run
        for i, got in run.items():
            want = expected[i]
            assert got == want, f"{got.question!r}: {got.anchors} != {want.anchors}"


def fresh(kb_dir: Path, embedder: Embedder, index: Callable[[], AnchorIndex] | None = None) -> GravityEngine:
    return GravityEngine.from_dir(kb_dir, embedder=embedder, index=index() if index else None)


@pytest.mark.parametrize("caches", ["default caches", "tiny caches"])
def test_threads_get_the_sequential_answers(
    kb_dir: Path, hashing: HashingEmbedder, caches: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if caches == "tiny caches":
        monkeypatch.setattr(names, "_FUZZY_CACHE_SIZE", 2)
        monkeypatch.setattr(lexicon, "_PARSE_CACHE_SIZE", 2)
    work = jobs()
    expected = sequential(fresh(kb_dir, hashing), work)
    assert sum(bool(a.anchors) for a in expected) > len(work) // 2  # the questions do find anchors
    runs = concurrently(fresh(kb_dir, hashing), work)
    assert sum(len(run) for run in runs) == THREADS * len(QUESTIONS) * len(CONFIGS)
    assert_same(expected, runs)


def test_asyncio_tasks_get_the_sequential_answers(kb_dir: Path, hashing: HashingEmbedder) -> None:
    work = [jobs()[i % len(jobs())] for i in range(TASKS)]
    expected = sequential(fresh(kb_dir, hashing), work)
    engine = fresh(kb_dir, hashing)

    async def run() -> list[AnchorContext]:
        return await asyncio.gather(*(engine.aquery(q, config=c) for q, c in work))

    assert_same(expected, [dict(enumerate(asyncio.run(run())))])


def test_threads_with_the_hosts_query_embeddings(kb_dir: Path, hashing: HashingEmbedder) -> None:
    """The ``query_embedding=`` path (the host's vector, normalized by the engine) is shared-safe too."""
    vectors = {q: np.asarray(hashing.embed([q])[0]) * 3.0 for q in QUESTIONS}
    engine = fresh(kb_dir, hashing)
    expected = [engine.query(q, query_embedding=vectors[q]) for q in QUESTIONS]

    def worker(_: int) -> dict[int, AnchorContext]:
        return {i: engine.query(q, query_embedding=vectors[q]) for i, q in enumerate(QUESTIONS)}

    with ThreadPoolExecutor(THREADS) as pool:
        assert_same(expected, list(pool.map(worker, range(THREADS))))


def test_an_embedded_chroma_index_under_threads(
    kb_dir: Path, hashing: HashingEmbedder, tmp_path: Path
) -> None:
    pytest.importorskip("chromadb")
    work = [(q, PRESETS["full"]) for q in QUESTIONS]

    def index() -> AnchorIndex:
        return ChromaAnchorIndex.persistent(tmp_path / "chroma", "sample")

    expected = sequential(fresh(kb_dir, hashing, index), work)
    assert sum(bool(a.anchors) for a in expected) > len(work) // 2
    runs = concurrently(fresh(kb_dir, hashing, index), work)
    assert_same(expected, runs)


def test_langchain_retriever_batch_and_abatch_match_invoke(kb_dir: Path, hashing: HashingEmbedder) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    from gravity_langchain import GravityEmbeddings, GravityRetriever

    turns = load_conversation(SAMPLE)
    store = InMemoryVectorStore(GravityEmbeddings(hashing))
    store.add_documents([Document(f"{t.speaker}: {t.text}", id=t.id) for t in turns])
    retriever = GravityRetriever(engine=fresh(kb_dir, hashing), vector_store=store, k=5)
    questions = [q for q in QUESTIONS if q] * 2
    expected = [[d.id for d in retriever.invoke(q)] for q in questions]
    concurrent = GravityRetriever(engine=fresh(kb_dir, hashing), vector_store=store, k=5)
    batched = concurrent.batch(questions, config={"max_concurrency": THREADS})
    assert [[d.id for d in docs] for docs in batched] == expected
    abatched = asyncio.run(concurrent.abatch(questions, config={"max_concurrency": TASKS}))
    assert [[d.id for d in docs] for docs in abatched] == expected


@pytest.mark.slow
def test_minilm_engine_under_threads_and_tasks(tmp_path: Path) -> None:
    """The packaged MiniLM (onnxruntime session and tokenizer shared by all threads)."""
    pytest.importorskip("onnxruntime")
    from gravity_core.embeddings import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    folder = tmp_path / "kb"
    AnchorBuilder(OfflineExtractor(embedder), embedder, store=AnchorStore(folder)).add(
        load_conversation(SAMPLE)[:48]
    )
    work = [(q, PRESETS["full"]) for q in QUESTIONS]
    expected = sequential(GravityEngine.from_dir(folder, embedder=embedder), work)
    # A fresh embedder: its model is loaded lazily, by whichever of the threads comes first.
    engine = GravityEngine.from_dir(folder, embedder=MiniLMEmbedder())
    assert_same(expected, concurrently(engine, work, per_thread=6))

    async def run() -> list[AnchorContext]:
        return await asyncio.gather(*(engine.aquery(q, config=c) for q, c in work))

    assert_same(expected, [dict(enumerate(asyncio.run(run())))])
