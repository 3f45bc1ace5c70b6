"""A small conversation and a deterministic, well-behaved fake model answer, for the fault tests.

The answer depends only on the prompt (the batch's utterance ids and the known entities the
prompt lists), as a real model at temperature 0 would, so an interrupted and resumed build must end
with the KB of an uninterrupted one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from gravity_core.llm.base import Message
from gravity_core.schema import KnowledgeBase, Utterance
from gravity_core.storage.anchor_vectors import VECTOR_KINDS
from gravity_core.storage.store import AnchorStore

START = datetime(2024, 1, 8, 18, 0, tzinfo=UTC)
_PEOPLE = ("Maya", "Jonas")
_PLACES = ("Leeds", "Bristol", "York", "Bath", "Hull", "Derby", "Ely", "Wells")
_IDS = re.compile(r"^\[(S\d+:\d+)\]", flags=re.MULTILINE)


def conversation(sessions: int = 3, turns: int = 4) -> list[Utterance]:
    """``sessions`` sessions of ``turns`` turns, ids ``S<session>:<turn>``, two weeks apart."""
    out = []
    for s in range(1, sessions + 1):
        for t in range(1, turns + 1):
            out.append(
                Utterance(
                    id=f"S{s}:{t}",
                    speaker=_PEOPLE[t % 2],
                    text=f"Session {s} turn {t}: I moved to {_PLACES[s % len(_PLACES)]} and went running.",
                    session=f"session_{s}",
                    timestamp=START + timedelta(days=14 * s, minutes=t),
                )
            )
    return out


def batch_ids(messages: Sequence[Message]) -> list[str]:
    """Utterance ids of the batch a fused-extraction prompt shows."""
    return _IDS.findall(messages[1]["content"] if len(messages) > 1 else messages[-1]["content"])


def good_answer(messages: Sequence[Message]) -> str:
    """A valid fused answer citing the batch: a moved city (state change), a pet, an event, a topic."""
    ids = batch_ids(messages)
    first, last = ids[0], ids[-1]
    session = int(first[1:].split(":")[0])
    known_jonas = "- Jonas (person" in messages[1]["content"]
    entities: list[dict[str, Any]] = [
        {
            "name": "Maya",
            "type": "person",
            "is_speaker": True,
            "sources": [first],
            "attributes": [
                {
                    "name": "city",
                    "value": _PLACES[session % len(_PLACES)],
                    "exclusive": True,
                    "sources": [first],
                }
            ],
            "relations": [{"relation": "pet", "object": "Biscuit", "object_type": "pet", "sources": [first]}],
        },
        {
            "name": "Jonas",
            "type": "person",
            "is_speaker": True,
            "sources": [last],
            # Depends on the KB state the prompt shows, so a resumed build must restore it exactly.
            "attributes": [
                {"name": "mood", "value": "returning" if known_jonas else "new", "sources": [last]}
            ],
        },
    ]
    return json.dumps(
        {
            "entities": entities,
            "events": [
                {
                    "who": ["Maya"],
                    "what": f"moved to {_PLACES[session % len(_PLACES)]}",
                    "when": "yesterday",
                    "sources": [first],
                },
                {"who": ["Maya", "Jonas"], "what": f"went running in session {session}", "sources": ids},
            ],
            "topics": [
                {
                    "label": "running",
                    "keywords": ["running", "fitness"],
                    "summary": f"running in session {session}",
                    "facts": [f"they ran in session {session}"],
                    "sources": ids,
                }
            ],
        }
    )


def comparable(kb: KnowledgeBase) -> dict[str, Any]:
    """The KB's content: everything but the wall-clock time at which a batch failed."""
    data = kb.to_dict()
    for failed in data["build"]["failed_batches"]:
        failed.pop("failed_at")
    return data


def stored_state(folder: Path) -> tuple[dict[str, Any], dict[str, dict[str, tuple[str, bytes]]]]:
    """What the folder's KB holds: its comparable content and its vectors by id."""
    return comparable(AnchorStore(folder).load().kb), vectors_by_id(folder)


def vectors_by_id(folder: Path) -> dict[str, dict[str, tuple[str, bytes]]]:
    """Per vector kind: anchor id -> (text digest, raw float32 bytes of its vector)."""
    loaded = AnchorStore(folder).load().vectors
    out: dict[str, dict[str, tuple[str, bytes]]] = {}
    for kind in VECTOR_KINDS:
        kv = loaded.get(kind)
        assert len(set(kv.ids)) == len(kv.ids), f"duplicate {kind} rows"
        out[kind] = {
            i: (d, np.ascontiguousarray(kv.matrix[n], dtype=np.float32).tobytes())
            for n, (i, d) in enumerate(zip(kv.ids, kv.digests, strict=True))
        }
    return out
