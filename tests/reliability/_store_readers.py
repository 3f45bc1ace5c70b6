"""KBs whose every file names their version, and a reader that checks a load is one whole version.

Kept apart from the tests so a reader subprocess imports only the store, not pytest or the CLI.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gravity_core.build.merge import apply_update
from gravity_core.embeddings import HashingEmbedder
from gravity_core.schema import (
    AnchorUpdate,
    AttributeObservation,
    EntityObservation,
    EntityType,
    EventObservation,
    KnowledgeBase,
    TopicObservation,
    Utterance,
)
from gravity_core.storage.anchor_vectors import AnchorVectors
from gravity_core.storage.store import AnchorStore, LoadedKB

EMBEDDER = HashingEmbedder(dim=32)


def versioned_kb(k: int) -> tuple[KnowledgeBase, AnchorVectors]:
    """KB number ``k``: k turns; every file says ``v{k}`` somewhere, so a mix is detectable."""
    kb = KnowledgeBase()
    turns = [
        Utterance(
            id=f"u{i}",
            speaker="Maya",
            text=f"turn {i} of v{k}",
            session="s1",
            timestamp=datetime(2024, 3, 1, tzinfo=UTC) + timedelta(minutes=i),
        )
        for i in range(1, k + 1)
    ]
    update = AnchorUpdate(
        entities=[
            EntityObservation(
                name="Maya",
                type=EntityType.PERSON,
                is_speaker=True,
                sources=["u1"],
                attributes=[
                    AttributeObservation(name="version", value=f"v{k}", exclusive=True, sources=["u1"])
                ],
            )
        ],
        events=[
            EventObservation(who=["Maya"], what=f"event {i} of v{k}", sources=[f"u{i}"])
            for i in range(1, k + 1)
        ],
        topics=[TopicObservation(label=f"topic v{k}", session="s1", summary=f"v{k}", sources=["u1"])],
    )
    apply_update(kb, update, turns)
    kb.build.batch_size = k
    vectors = AnchorVectors()
    vectors.refresh(kb, EMBEDDER)
    return kb, vectors


def consistent_version(loaded: LoadedKB) -> int:
    """The version every part of a loaded KB agrees on (AssertionError if they disagree)."""
    kb = loaded.kb
    k = len(kb.utterances)
    assert kb.build.batch_size == k
    assert all(u.text.endswith(f"of v{k}") for u in kb.utterances.values())
    assert [a.value for a in kb.entities["maya"].attributes] == [f"v{k}"]
    assert len(kb.events) == k and all(e.what.endswith(f"of v{k}") for e in kb.events.values())
    assert [t.label for t in kb.topics.values()] == [f"topic v{k}"]
    stale = loaded.vectors.refresh(kb, EMBEDDER)  # 0: the vectors were made from these very anchors
    assert stale == 0, f"{stale} vectors do not belong to v{k}"
    return k


def reader_loop(folder: str, stop: str, report: str) -> None:
    """Load until ``stop`` exists; write how many loads saw which version (run in a subprocess too)."""
    store = AnchorStore(folder)
    seen: dict[int, int] = {}
    Path(report + ".ready").touch()
    while not os.path.exists(stop):
        k = consistent_version(store.load())
        seen[k] = seen.get(k, 0) + 1
    Path(report).write_text(json.dumps(seen))
