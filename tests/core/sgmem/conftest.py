"""Fixtures of the SGMem tests: the sample conversation and an index of it on the hashing embedder."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gravity_core.embeddings import HashingEmbedder
from gravity_core.loaders import load_conversation
from gravity_core.schema import Utterance
from gravity_core.sgmem import SGMem

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "examples" / "sample_conversation.jsonl"
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"


def utterance(uid: str, speaker: str, text: str, session: str = "s1", minute: int = 0) -> Utterance:
    """A tiny utterance for hand-made conversations."""
    start = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)
    return Utterance(
        id=uid, speaker=speaker, text=text, session=session, timestamp=start + timedelta(minutes=minute)
    )


def conversation(lines: Sequence[tuple[str, str, str]], session: str = "s1") -> list[Utterance]:
    """Utterances from ``(id, speaker, text)`` triples, one minute apart."""
    return [utterance(uid, who, text, session, n) for n, (uid, who, text) in enumerate(lines)]


@pytest.fixture(scope="session")
def hashing() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture(scope="session")
def sample() -> list[Utterance]:
    return load_conversation(SAMPLE)


@pytest.fixture(scope="session")
def sample_memory(hashing: HashingEmbedder, sample: list[Utterance]) -> SGMem:
    """SGMem over the sample conversation (hashing embedder); tests must not add to it."""
    memory = SGMem(hashing)
    memory.add(sample)
    return memory
