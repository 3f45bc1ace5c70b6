"""GravityRetriever embeds only the question when the build stored the expansions' vectors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.storage.store import AnchorStore
from gravity_langchain import GravityRetriever
from tests.integrations.langchain.conftest import EVERY_SEARCHED, CountingGravityEmbeddings, SpyStore


def test_stored_expansion_vectors_replace_embedding_calls(
    tmp_path: Path,
    embedder: HashingEmbedder,
    utterances: list[Utterance],
    documents: list,
    question: str,
    make_store: Callable[..., SpyStore],
) -> None:
    AnchorBuilder(OfflineExtractor(embedder), embedder, store=AnchorStore(tmp_path)).add(utterances)
    engine = GravityEngine.from_dir(tmp_path, embedder=embedder)
    embeddings = CountingGravityEmbeddings(embedder)
    store = make_store(embeddings, documents)
    embeddings.document_calls.clear()
    expansions = engine.query(question).expansions
    known = engine.known_expansion_vectors(expansions)
    missing = [t for t, v in zip(expansions, known, strict=True) if v is None]
    assert len(missing) < len(expansions)

    GravityRetriever(policy=EVERY_SEARCHED, engine=engine, vector_store=store, k=4).invoke(question)

    assert embeddings.query_calls == [question]
    assert embeddings.document_calls == ([missing] if missing else [])
    searched = np.asarray(store.searched)
    assert np.allclose(searched, embedder.embed([question, *expansions]), atol=1e-6)

    # Without stored vectors the same searches happen, with all expansions embedded in one call.
    bare = GravityEngine(engine.kb, engine.index, embedder)
    assert all(v is None for v in bare.known_expansion_vectors(expansions))
    embeddings.document_calls.clear()
    store.searched.clear()
    GravityRetriever(policy=EVERY_SEARCHED, engine=bare, vector_store=store, k=4).invoke(question)
    assert embeddings.document_calls == [expansions]
    assert np.allclose(np.asarray(store.searched), searched, atol=1e-6)
