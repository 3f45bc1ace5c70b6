"""`gravity eval` measures what the integrations ship: one question through the eval's host path,
LangChain's GravityRetriever and LlamaIndex's GravityFusionRetriever (all with their defaults) gives
the same turns in the same order, the selected anchors' source turns fetched by id among them; and so
does the paper's query expansion (EXPANDING_POLICY), given to all three."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode

from gravity_core.build import AnchorBuilder
from gravity_core.context.policy import DEFAULT_POLICY, EXPANDING_POLICY, ContextPolicy
from gravity_core.context.provenance import pair_sources
from gravity_core.embeddings import default_embedder
from gravity_core.eval.hosts import VectorHost, render_turn
from gravity_core.eval.runner import policy_hits
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.text.tokens import TokenCounter
from gravity_langchain import GravityEmbeddings, GravityRetriever
from gravity_llamaindex import GravityEmbedding, GravityFusionRetriever

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_conversation.jsonl"
QUESTIONS = ["When did Maya start night shifts?", "What happened with Biscuit the dog?"]
# Past the expanding policy's lead, so the expansions' places are part of what is compared.
K = EXPANDING_POLICY.lead + 8
POLICIES = pytest.mark.parametrize("policy", [DEFAULT_POLICY, EXPANDING_POLICY], ids=["shipped", "expanding"])


@pytest.fixture(scope="module")
def setup() -> tuple[list[Utterance], GravityEngine]:
    utterances = load_conversation(SAMPLE)
    embedder = default_embedder()
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder)
    builder.add(utterances)
    return utterances, GravityEngine.from_builder(builder)


def eval_ids(
    utterances: list[Utterance], engine: GravityEngine, question: str, policy: ContextPolicy
) -> list[str]:
    host = VectorHost(utterances, engine.embedder, counter=TokenCounter())
    context = engine.query(question)
    queries = [question, *context.expansions]
    rankings = dict(zip(queries, host.search(queries), strict=True))
    # The selected anchors' source turns, fetched by id as the eval fetches them.
    turns = policy.source_turns(context.sources)
    fetched = host.fetch([turn.utterance_id for turn in turns])
    sourced = pair_sources(turns, fetched, lambda p: p.turn_ids, key=lambda p: p.id)
    return [h.item.id for h in policy_hits(policy, question, context.expansions, rankings, sourced)][:K]


def given(policy: ContextPolicy) -> dict[str, ContextPolicy]:
    """The integrations' arguments: none for the shipped policy (their default), else the policy."""
    return {} if policy is DEFAULT_POLICY else {"policy": policy}


@POLICIES
@pytest.mark.parametrize("question", QUESTIONS)
def test_langchain_retriever_returns_the_evals_ranking(
    setup: tuple[list[Utterance], GravityEngine], question: str, policy: ContextPolicy
) -> None:
    utterances, engine = setup
    store = InMemoryVectorStore(GravityEmbeddings(engine.embedder))
    store.add_documents([Document(page_content=render_turn(u), id=u.id) for u in utterances])
    docs = GravityRetriever(engine=engine, vector_store=store, k=K, **given(policy)).invoke(question)
    expected = eval_ids(utterances, engine, question, policy)
    assert [d.id for d in docs] == expected
    assert engine.query(question).expansions, "the question must have expansions to compare"
    # The expansions take places under the expanding policy only.
    assert any(d.metadata["gravity_slot"] == "expansion" for d in docs) == (policy is EXPANDING_POLICY)
    assert any(d.metadata["gravity_slot"] == "provenance" for d in docs)


@POLICIES
@pytest.mark.parametrize("question", QUESTIONS)
def test_llamaindex_fusion_retriever_returns_the_evals_ranking(
    setup: tuple[list[Utterance], GravityEngine], question: str, policy: ContextPolicy
) -> None:
    utterances, engine = setup
    nodes = [TextNode(id_=u.id, text=render_turn(u)) for u in utterances]
    index = VectorStoreIndex(nodes, embed_model=GravityEmbedding(engine.embedder))
    retriever = GravityFusionRetriever.from_index(index, engine, similarity_top_k=K, **given(policy))
    nodes = retriever.retrieve(question)
    assert [n.node.node_id for n in nodes] == eval_ids(utterances, engine, question, policy)
    assert any(n.node.metadata["gravity_slot"] == "expansion" for n in nodes) == (policy is EXPANDING_POLICY)
    assert any(n.node.metadata["gravity_slot"] == "provenance" for n in nodes)
