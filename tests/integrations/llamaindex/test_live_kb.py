"""A LlamaIndex query engine built once follows the KB (#16): a session added later reaches its prompt.

The GRAVITY engine follows its KB folder (``GravityEngine.from_dir``); the folder is extended by
``gravity build`` in another process after the query engine was made. Hashing embedding, offline
extractor, ``MockLLM`` (answers with its prompt, so the prompt shows what GRAVITY added).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.query_engine import BaseQueryEngine

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.storage.store import AnchorStore
from gravity_llamaindex import (
    AnchorProvider,
    GravityEmbedding,
    GravityNodePostprocessor,
    nodes_from_utterances,
)

from .conftest import RecordingLLM

BEFORE = "Where did Maya move to?"
AFTER = "What happened with Biscuit the terrier?"


def of_sessions(utterances: list[Utterance], *numbers: int) -> list[Utterance]:
    wanted = {f"session_{n}" for n in numbers}
    return [u for u in utterances if u.session in wanted]


def add_in_another_process(kb: Path, turns: list[Utterance], folder: Path) -> None:
    """``gravity build`` of ``turns`` into ``kb``, in a subprocess."""
    conversation = folder / "added.jsonl"
    records = [
        {"session": u.session, "speaker": u.speaker, "timestamp": u.timestamp.isoformat(), "text": u.text}
        for u in turns
    ]
    conversation.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    command = [sys.executable, "-m", "gravity_core", "build", str(conversation), "-o", str(kb)]
    done = subprocess.run(
        [*command, "--embedder", "hashing", "-q"], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture
def kb_dir(tmp_path: Path, utterances: list[Utterance], hashing: HashingEmbedder) -> Path:
    kb = tmp_path / "kb"
    AnchorBuilder(OfflineExtractor(hashing), hashing, store=AnchorStore(kb)).add(
        of_sessions(utterances, 1, 2)
    )
    return kb


def query_engine(
    anchors: AnchorProvider, utterances: list[Utterance], hashing: HashingEmbedder, llm: RecordingLLM
) -> BaseQueryEngine:
    index = VectorStoreIndex(nodes_from_utterances(utterances), embed_model=GravityEmbedding(hashing))
    return index.as_query_engine(
        llm=llm, similarity_top_k=3, node_postprocessors=[GravityNodePostprocessor(anchors)]
    )


def test_a_query_engine_built_once_serves_anchors_of_a_session_added_later(
    kb_dir: Path, tmp_path: Path, utterances: list[Utterance], hashing: HashingEmbedder
) -> None:
    engine = GravityEngine.from_dir(kb_dir, embedder=hashing)
    llm = RecordingLLM()
    qe = query_engine(AnchorProvider(engine), of_sessions(utterances, 1, 2), hashing, llm)
    qe.query(BEFORE)
    assert "<gravity_anchors>" in llm.prompts[-1] and "session_3:" not in llm.prompts[-1]

    add_in_another_process(kb_dir, of_sessions(utterances, 3), tmp_path)

    qe.query(AFTER)
    assert "session_3:" in llm.prompts[-1] and "Biscuit" in llm.prompts[-1]
    assert engine.generation == AnchorStore(kb_dir).current_generation() == 2


def test_the_same_question_after_the_kb_changed_gets_the_new_anchors(
    kb_dir: Path, tmp_path: Path, utterances: list[Utterance], hashing: HashingEmbedder
) -> None:
    engine = GravityEngine.from_dir(kb_dir, embedder=hashing)
    llm = RecordingLLM()
    qe = query_engine(AnchorProvider(engine), of_sessions(utterances, 1, 2), hashing, llm)
    qe.query(AFTER)
    assert "session_3:" not in llm.prompts[-1]
    add_in_another_process(kb_dir, of_sessions(utterances, 3), tmp_path)
    qe.query(AFTER)
    assert "session_3:" in llm.prompts[-1]
