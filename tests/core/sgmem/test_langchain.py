"""SGMem in LangChain: the thin retriever (standard suite), and GRAVITY + SGMem end to end.

``GravityRetriever(retriever=SGMemRetriever(...))`` wraps SGMem unchanged: the question and every
expansion go through SGMem's retriever, and a full LCEL chain puts the anchors and SGMem's chunks
into the prompt.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.messages import BaseMessage  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_tests.integration_tests import RetrieversIntegrationTests  # noqa: E402

from gravity_core.context.policy import ContextPolicy
from gravity_core.embeddings import HashingEmbedder  # noqa: E402
from gravity_core.errors import ConfigurationError  # noqa: E402
from gravity_core.loaders import load_conversation  # noqa: E402
from gravity_core.prompts.injection import PRIORITY_INSTRUCTION  # noqa: E402
from gravity_core.query.engine import GravityEngine  # noqa: E402
from gravity_core.schema import Utterance  # noqa: E402
from gravity_core.sgmem import SGMem  # noqa: E402
from gravity_langchain import GravityRetriever, build_gravity_chain  # noqa: E402
from gravity_langchain.fusion import document_key  # noqa: E402
from gravity_langchain.sgmem import SGMemRetriever  # noqa: E402
from tests.core.sgmem.conftest import SAMPLE  # noqa: E402
from tests.core.sgmem.test_gravity import QUESTION, engine_for  # noqa: E402


@cache
def shared_memory() -> SGMem:
    memory = SGMem(HashingEmbedder())
    memory.add(load_conversation(SAMPLE))
    return memory


class TestSGMemRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's own retriever suite (k as constructor argument and as invoke kwarg, async)."""

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return SGMemRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"sgmem": shared_memory(), "granularity": "round"}

    @property
    def retriever_query_example(self) -> str:
        return "Where did Maya find a flat?"


@pytest.fixture(scope="module")
def engine(hashing: HashingEmbedder, sample: list[Utterance]) -> GravityEngine:
    return engine_for(hashing, sample)


def test_documents_carry_granularity_score_and_source_ids(sample_memory: SGMem) -> None:
    retriever = SGMemRetriever(sgmem=sample_memory, k=3, granularity="round")
    docs = retriever.invoke(QUESTION)
    result = sample_memory.retrieve(QUESTION, granularity="round", max_chunks=3, token_budget=None)
    assert [d.id for d in docs] == [c.id for c in result.chunks]
    for doc, chunk in zip(docs, result.chunks, strict=True):
        assert doc.page_content == chunk.text
        assert doc.metadata["granularity"] == "round"
        assert doc.metadata["score"] == pytest.approx(chunk.score)
        assert doc.metadata["utterance_ids"] == list(chunk.utterance_ids)
    budgeted = retriever.invoke(QUESTION, k=10, token_budget=120, granularity="turn")
    assert sum(len(d.page_content) for d in budgeted) < 1000 and budgeted[0].metadata["granularity"] == "turn"
    with pytest.raises(ConfigurationError, match="SGMemRetriever takes"):
        retriever.invoke(QUESTION, filter={"x": 1})
    with pytest.raises(ConfigurationError):
        SGMemRetriever(sgmem=sample_memory, k=0)


def test_memories_can_be_returned_after_the_chunks(hashing: HashingEmbedder, sample: list[Utterance]) -> None:
    from gravity_core.testing import RecordedModel
    from tests.core.sgmem.test_memories import SESSION_1, SESSION_2

    model = RecordedModel(
        {
            ("SessionMemories", "--- session session_1 ---"): SESSION_1,
            ("SessionMemories", "--- session session_2 ---"): SESSION_2,
        }
    )
    memory = SGMem(hashing, memory_model=model)
    memory.add(sample[:31])
    docs = SGMemRetriever(sgmem=memory, k=2, include_memories=True).invoke("ward manager at Harbourside")
    assert [d.metadata["kind"] for d in docs][:2] == ["chunk", "chunk"]
    assert docs[2].id == "session_2:fact:1" and docs[2].metadata["kind"] == "fact"


def test_gravity_retriever_wraps_sgmem_unchanged(engine: GravityEngine, sample_memory: SGMem) -> None:
    host = SGMemRetriever(sgmem=sample_memory, k=5)
    # Expansions take places early (the shipped policy places none); no source turn, to see them alone.
    policy = ContextPolicy(lead=1, every=2, source_every=0)
    docs = GravityRetriever(engine=engine, retriever=host, k=6, policy=policy).invoke(QUESTION)
    expansions = engine.query(QUESTION).expansions
    lists = [host.invoke(q) for q in [QUESTION, *expansions]]
    expected = [
        h.item for h in policy.merge(QUESTION, lists[0], expansions, lists[1:], document_key, top_n=6)
    ]
    assert [d.id for d in docs] == [d.id for d in expected]
    assert all(d.metadata["source"] == "sgmem" for d in docs)
    alone = {d.id for d in host.invoke(QUESTION, k=6)}
    assert {d.id for d in docs} != alone  # the expansions brought in other chunks


class PromptCapture(BaseCallbackHandler):
    def __init__(self) -> None:
        self.prompts: list[list[BaseMessage]] = []

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], **kwargs: Any) -> None:
        self.prompts.extend(messages)


async def test_full_chain_puts_anchors_and_sgmem_chunks_in_the_prompt(
    engine: GravityEngine, sample_memory: SGMem
) -> None:
    host = SGMemRetriever(sgmem=sample_memory, k=4, granularity="round")
    chain = build_gravity_chain(engine, host, FakeListChatModel(responses=["fine", "fine"]), k=4)
    capture = PromptCapture()
    assert chain.invoke(QUESTION, config={"callbacks": [capture]}) == "fine"
    assert await chain.ainvoke(QUESTION, config={"callbacks": [capture]}) == "fine"
    sync_prompt, async_prompt = capture.prompts
    system = sync_prompt[0].content
    assert isinstance(system, str)
    assert PRIORITY_INSTRUCTION in system and "<gravity_anchors>" in system
    retrieved = GravityRetriever(engine=engine, retriever=host, k=4).invoke(QUESTION)
    assert all(line in system for doc in retrieved for line in doc.page_content.splitlines())
    assert all("/r" in doc.id for doc in retrieved if doc.id)
    assert [m.content for m in async_prompt] == [m.content for m in sync_prompt]


def test_sgmem_hands_back_the_chunks_holding_turns(sample_memory: SGMem, sample: list[Utterance]) -> None:
    rounds = SGMemRetriever(sgmem=sample_memory, granularity="round")
    first, second, later = sample[0].id, sample[1].id, sample[40].id
    docs = rounds.fetch_turns([later, "no-such-turn", first, second])
    assert [later in d.metadata["gravity_utterance_ids"] for d in docs] == [True, False]
    assert {first, second} <= set(docs[1].metadata["gravity_utterance_ids"])  # one round holds both
    turns = SGMemRetriever(sgmem=sample_memory).fetch_turns([second, first])
    assert [d.id for d in turns] == [second, first]


def test_gravity_retriever_fetches_source_turns_through_sgmem(
    engine: GravityEngine, sample_memory: SGMem
) -> None:
    host = SGMemRetriever(sgmem=sample_memory, k=8, granularity="round")
    docs = GravityRetriever(engine=engine, retriever=host, k=8).invoke(QUESTION)
    fetched = [d for d in docs if d.metadata["gravity_slot"] == "provenance"]
    assert fetched, "no source turn came through SGMem"
    sources = {f"{s.kind.value}:{s.anchor_id}": set(s.utterance_ids) for s in engine.query(QUESTION).sources}
    for doc in fetched:
        (why,) = [f for f in doc.metadata["gravity_found_by"] if f["query"] == "provenance"]
        assert sources[why["text"]] & set(doc.metadata["gravity_utterance_ids"])
    assert len({d.id for d in docs}) == len(docs)
