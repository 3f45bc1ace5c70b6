"""Both integrations plan the same searches: same queries, same vectors embedded or reused, same results.

A LangChain ``InMemoryVectorStore`` and a LlamaIndex ``VectorStoreIndex`` hold the same turns under
the same ids, embedded by the same model (GRAVITY's hashing embedder, wrapped by each framework's
adapter, so both share the engine's vectors). For the same question, policy and sizes, each
retriever must embed the same texts in the same requests, search the host with the same vectors and
return the same turns in the same order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402
from llama_index.core import StorageContext, VectorStoreIndex  # noqa: E402
from llama_index.core.bridge.pydantic import PrivateAttr  # noqa: E402
from llama_index.core.vector_stores import SimpleVectorStore  # noqa: E402
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryResult  # noqa: E402

from gravity_core.build import AnchorBuilder  # noqa: E402
from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy  # noqa: E402
from gravity_core.embeddings import HashingEmbedder  # noqa: E402
from gravity_core.query.engine import GravityEngine  # noqa: E402
from gravity_core.schema import Utterance  # noqa: E402
from gravity_langchain import GravityEmbeddings, GravityRetriever  # noqa: E402
from gravity_llamaindex import GravityEmbedding, GravityFusionRetriever  # noqa: E402
from gravity_llamaindex.messages import nodes_from_utterances  # noqa: E402
from tests.spies import EmbedderSpy  # noqa: E402

QUESTION = "Where does Maya work now, and what happened with Biscuit?"
EARLY = ContextPolicy(lead=1, every=2)  # expansions may take places from the second on


class _SpyLangChainStore(InMemoryVectorStore):
    def __init__(self, embedding: Embeddings) -> None:
        super().__init__(embedding)
        self.searched: list[list[float]] = []

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[Document]:
        self.searched.append(list(embedding))
        return super().similarity_search_by_vector(embedding, k, **kwargs)


class _SpyLlamaIndexStore(SimpleVectorStore):
    _searched: list[list[float]] = PrivateAttr(default_factory=list)

    @property
    def searched(self) -> list[list[float]]:
        return self._searched

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        self._searched.append(list(query.query_embedding or []))
        return super().query(query, **kwargs)


@pytest.fixture
def utterances(sample_utterances: list[Utterance]) -> list[Utterance]:
    return sample_utterances


@pytest.fixture
def engine(sample_kb: AnchorBuilder) -> GravityEngine:
    return GravityEngine.from_builder(sample_kb)  # with the expansion vectors the build stored


@pytest.fixture
def spy() -> EmbedderSpy:
    return EmbedderSpy(HashingEmbedder())


def _langchain(
    engine: GravityEngine, spy: EmbedderSpy, utterances: list[Utterance], policy: ContextPolicy
) -> tuple[GravityRetriever, _SpyLangChainStore]:
    store = _SpyLangChainStore(GravityEmbeddings(spy))
    store.add_documents([Document(page_content=f"{u.speaker}: {u.full_text()}", id=u.id) for u in utterances])
    return GravityRetriever(engine=engine, vector_store=store, k=6, fetch_k=6, policy=policy), store


def _llamaindex(
    engine: GravityEngine, spy: EmbedderSpy, utterances: list[Utterance], policy: ContextPolicy
) -> tuple[GravityFusionRetriever, _SpyLlamaIndexStore]:
    store = _SpyLlamaIndexStore()
    model = GravityEmbedding(spy)
    index = VectorStoreIndex(
        nodes_from_utterances(utterances),
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=model,
    )
    retriever = GravityFusionRetriever.from_index(
        index, engine, similarity_top_k=6, per_query_top_k=6, embed_model=model, policy=policy
    )
    return retriever, store


def _rounded(vectors: list[list[float]]) -> list[tuple[float, ...]]:
    return [tuple(np.round(np.asarray(v, dtype=np.float64), 5)) for v in vectors]


@pytest.mark.parametrize("policy", [EARLY, DEFAULT_POLICY], ids=["expansions-placed", "shipped-policy"])
async def test_both_integrations_plan_the_same_searches(
    engine: GravityEngine, spy: EmbedderSpy, utterances: list[Utterance], policy: ContextPolicy
) -> None:
    context = engine.query(QUESTION)
    assert len(context.expansions) > 2
    assert any(v is not None for v in engine.known_expansion_vectors(context.expansions))

    lc, lc_store = _langchain(engine, spy, utterances, policy)
    spy.calls.clear()
    documents = lc.invoke(QUESTION)
    lc_embedded = list(spy.calls)

    li, li_store = _llamaindex(engine, spy, utterances, policy)
    spy.calls.clear()
    nodes = li.retrieve(QUESTION)
    li_embedded = list(spy.calls)

    assert lc_embedded == li_embedded
    assert lc_embedded[0] == [QUESTION]  # the question once, its vector shared with the engine
    known = engine.known_expansion_vectors(context.expansions)
    reused = {text for text, vector in zip(context.expansions, known, strict=True) if vector is not None}
    assert not any(set(call) & reused for call in lc_embedded)  # stored vectors are not embedded again
    assert _rounded(lc_store.searched) == _rounded(li_store.searched)
    assert (len(lc_store.searched) == 1) == (policy is DEFAULT_POLICY)  # shipped policy: the question only
    if policy is DEFAULT_POLICY:
        assert lc_embedded == [[QUESTION]]  # and no expansion embedded
    assert [d.id for d in documents] == [n.node.node_id for n in nodes]
    # The same source turns, fetched by id, at the same places, for the same anchors.
    assert [d.metadata["gravity_slot"] for d in documents] == [n.node.metadata["gravity_slot"] for n in nodes]
    assert any(d.metadata["gravity_slot"] == "provenance" for d in documents)
    assert [d.metadata["gravity_found_by"] for d in documents] == [
        n.node.metadata["gravity_found_by"] for n in nodes
    ]

    # Async: every placeable query searched at once, the same vectors and results on both sides.
    lc_store.searched.clear()
    li_store.searched.clear()
    spy.calls.clear()
    adocuments = await lc.ainvoke(QUESTION)
    lc_async_embedded = list(spy.calls)
    spy.calls.clear()
    anodes = await li.aretrieve(QUESTION)
    assert lc_async_embedded == list(spy.calls)
    assert sorted(_rounded(lc_store.searched)) == sorted(_rounded(li_store.searched))
    assert [d.id for d in adocuments] == [n.node.node_id for n in anodes]
    assert [d.metadata["gravity_slot"] for d in adocuments] == [
        n.node.metadata["gravity_slot"] for n in anodes
    ]
