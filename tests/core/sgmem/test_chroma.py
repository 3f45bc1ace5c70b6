"""SGMem's seed search in Chroma: embedded (ephemeral, on disk) and on a real ``chroma run`` server."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from gravity_core.embeddings import HashingEmbedder
from gravity_core.schema import Utterance
from gravity_core.sgmem import ChromaSGMemStore, SGMem
from gravity_core.testing import RecordedModel
from tests.core.sgmem.test_memories import SESSION_1, SESSION_2

chromadb = pytest.importorskip("chromadb")

QUESTIONS = ["When did Maya adopt Biscuit?", "How did Jonas's race go?", "Who is Carol Hughes?"]


def ephemeral_store() -> ChromaSGMemStore:
    # chromadb keeps one in-memory system per process and refuses a second EphemeralClient with
    # other settings: use the ones every GRAVITY test uses (telemetry off).
    from chromadb.config import Settings

    client = chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))
    return ChromaSGMemStore.from_client(client, f"test-{uuid.uuid4().hex[:8]}")


def model() -> RecordedModel:
    return RecordedModel(
        {
            ("SessionMemories", "--- session session_1 ---"): SESSION_1,
            ("SessionMemories", "--- session session_2 ---"): SESSION_2,
        }
    )


def test_chroma_seeds_give_the_numpy_results(
    hashing: HashingEmbedder, sample: list[Utterance], sample_memory: SGMem
) -> None:
    store = ephemeral_store()
    memory = SGMem(hashing, store=store)
    memory.add(sample)
    assert store.count("sentence") == len(memory.units.sentences)
    for question in QUESTIONS:
        for granularity in ("turn", "round"):
            expected = [c.id for c in sample_memory.retrieve(question, granularity=granularity).chunks]
            got = [c.id for c in memory.retrieve(question, granularity=granularity).chunks]
            # Chroma's search is approximate and its distances are float32: a near tie at the 20th
            # seed may go the other way, so the best chunks must agree and the rest nearly.
            assert got[:5] == expected[:5]
            assert len(set(got) & set(expected)) >= 0.8 * len(expected)


def test_the_store_follows_adds_and_regenerated_memories(
    hashing: HashingEmbedder, sample: list[Utterance]
) -> None:
    store = ephemeral_store()
    memory = SGMem(hashing, store=store, memory_model=model())
    memory.add(sample[:20])
    assert store.count("sentence") == len(memory.units.sentences)
    assert store.count("memory") == len(memory.memories) > 0
    memory.add(sample[20:31])
    assert store.count("sentence") == len(memory.units.sentences)
    assert store.count("memory") == len(memory.memories)
    hits = store.top("memory", memory.embed_queries(["ward manager at Harbourside"])[0], 1)
    assert hits[0][0] == "session_2:fact:1"
    result = memory.retrieve("Who is the ward manager at Harbourside?")
    assert result.memories[0].id == "session_2:fact:1"


def test_a_loaded_index_syncs_a_persistent_store(
    hashing: HashingEmbedder, sample: list[Utterance], tmp_path: Path
) -> None:
    memory = SGMem(hashing)
    memory.add(sample)
    memory.save(tmp_path / "idx")
    store = ChromaSGMemStore.persistent(str(tmp_path / "chroma"), "sample")
    loaded = SGMem.load(tmp_path / "idx", store=store)
    assert store.count("sentence") == len(sample_sentences(loaded))
    assert [c.id for c in loaded.retrieve(QUESTIONS[1]).chunks][:5] == [
        c.id for c in memory.retrieve(QUESTIONS[1]).chunks
    ][:5]
    # A second process opening the same database finds the rows already there and writes nothing.
    again = ChromaSGMemStore.persistent(str(tmp_path / "chroma"), "sample")
    state = loaded.state
    written = again.sync(
        "sentence",
        [s.id for s in state.units.sentences],
        state.vectors["sentence"],
        [s.text for s in state.units.sentences],
        state.embedder,
    )
    assert written == 0


def sample_sentences(memory: SGMem) -> list[str]:
    return [s.id for s in memory.units.sentences]


@pytest.mark.server
def test_chroma_server(
    chroma_server: tuple[str, int], hashing: HashingEmbedder, sample: list[Utterance]
) -> None:
    host, port = chroma_server
    store = ChromaSGMemStore.server(host, port, f"server-{uuid.uuid4().hex[:8]}")
    memory = SGMem(hashing, store=store)
    memory.add(sample)
    reference = SGMem(hashing)
    reference.add(sample)
    assert [c.id for c in memory.retrieve(QUESTIONS[1]).chunks][:5] == [
        c.id for c in reference.retrieve(QUESTIONS[1]).chunks
    ][:5]


def test_a_failed_store_sync_is_redone_by_the_next_add_or_retrieve(
    hashing: HashingEmbedder, sample: list[Utterance], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gravity_core.errors import ProviderError

    store = ephemeral_store()
    memory = SGMem(hashing, store=store)
    first_session = [u for u in sample if u.session == sample[0].session]
    memory.add(first_session)
    real_sync = ChromaSGMemStore.sync

    def server_down(*args: object, **kwargs: object) -> int:
        raise ProviderError("failed to upsert", provider="Chroma server at http://127.0.0.1:1")

    monkeypatch.setattr(ChromaSGMemStore, "sync", server_down)
    with pytest.raises(ProviderError):
        memory.add(sample)  # the index takes the turns; the store does not
    monkeypatch.setattr(ChromaSGMemStore, "sync", real_sync)
    assert store.count("sentence") < len(memory.units.sentences)

    assert memory.add(sample).added == 0  # nothing new, yet the store is brought up to date
    assert store.count("sentence") == len(memory.units.sentences)

    monkeypatch.setattr(ChromaSGMemStore, "sync", server_down)
    more = [sample[-1].model_copy(update={"id": "extra-1", "text": "One more sentence here."})]
    with pytest.raises(ProviderError):
        memory.add(more)
    monkeypatch.setattr(ChromaSGMemStore, "sync", real_sync)
    memory.retrieve(QUESTIONS[0])  # a retrieval redoes it too
    assert store.count("sentence") == len(memory.units.sentences)
