"""Grow a real KB to a given number of anchors, and a host store to a given number of rows.

A replica copies every utterance, anchor and summary of the seed KB under new ids (``r<n>/`` in
front of every id, session id and cross-reference), so the grown KB is a consistent KB the engine
can load, render and expand. Each replica's vectors are the seed's plus Gaussian noise,
re-normalized, so embedding search has to tell them apart. Words and dates are kept.

Names: with ``rename=True`` each replica's entities get made-up names (``Kalomiru``...) wherever
a name stands (entity names and aliases, relation objects, event participants, topic
participants, speakers): the KB of many different conversations. With ``rename=False`` every
replica's "Caroline" is a separate entity named Caroline, a KB GRAVITY's builder never makes (it
merges entities by name) and the worst case of native matching: a question naming Caroline
matches every replica's Caroline and all their events.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gravity_core.embeddings.base import Matrix
from gravity_core.schema import KnowledgeBase
from gravity_core.storage.anchor_vectors import TURN_KIND, VECTOR_KINDS, AnchorVectors, KindVectors

__all__ = ["GrownKB", "StreamedKB", "anchor_count", "grow_kb", "grow_rows", "grow_streamed", "perturb"]


@dataclass
class GrownKB:
    """A KB grown from a seed: the KB, its vectors and how many copies of the seed it holds."""

    kb: KnowledgeBase
    vectors: AnchorVectors
    replicas: int

    @property
    def anchors(self) -> int:
        """Entities, events and topics."""
        return anchor_count(self.kb)


def anchor_count(kb: KnowledgeBase) -> int:
    """Entities + events + topics of a KB."""
    return len(kb.entities) + len(kb.events) + len(kb.topics)


def perturb(matrix: Matrix, noise: float, rng: np.random.Generator) -> Matrix:
    """Unit rows of ``matrix`` plus N(0, noise^2/dim) per coordinate, re-normalized.

    The cosine of a row to its copy is about ``1/sqrt(1 + noise^2)``.
    """
    if matrix.size == 0:
        return np.asarray(matrix, dtype=np.float32)
    dim = matrix.shape[1]
    moved = matrix + rng.standard_normal(matrix.shape).astype(np.float32) * (noise / math.sqrt(dim))
    norms = np.linalg.norm(moved, axis=1, keepdims=True)
    return (moved / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def grow_kb(
    kb: KnowledgeBase,
    vectors: AnchorVectors,
    anchors: int,
    *,
    rename: bool = True,
    noise: float = 0.3,
    seed: int = 0,
) -> GrownKB:
    """A KB of about ``anchors`` anchors: the seed (replica 0, unchanged) plus copies of it.

    The number of copies is rounded, so the size is within half a seed KB of ``anchors``.
    """
    per_seed = anchor_count(kb)
    if per_seed == 0:
        raise ValueError("the seed KB has no anchor to replicate")
    replicas = max(1, round(anchors / per_seed))
    seed_data = kb.to_dict()
    merged: dict[str, Any] = {key: dict(seed_data[key]) for key in _PARTS}
    for number in range(1, replicas):
        names = _made_up_names(seed_data, number) if rename else {}
        copy = _replica(seed_data, f"r{number}/", names)
        for key in _PARTS:
            merged[key].update(copy[key])
    grown = KnowledgeBase.from_dict(
        {**merged, "schema_version": kb.schema_version, "build": seed_data["build"]}
    )
    return GrownKB(grown, _grow_vectors(vectors, replicas, noise, seed), replicas)


class StreamedKB:
    """A grown KB that is never held as models: each part's JSON is made replica by replica when the
    store saves it (:class:`gravity_core.storage.store.SavableKB`), for KBs too large to hold whole (a
    grown :class:`~gravity_core.schema.KnowledgeBase` takes about 22 KB per anchor, 22 GB at 1M)."""

    def __init__(self, kb: KnowledgeBase, replicas: int, *, rename: bool = True) -> None:
        self._seed = kb.to_dict()
        self._build = kb.part_json("build")
        self.replicas = replicas
        self._rename = rename
        counts = {part: len(self._seed[part]) * replicas for part in _PARTS}
        # The store reads only len() of these.
        self.utterances, self.entities, self.events, self.topics, self.summaries = (
            range(counts[part]) for part in _PARTS
        )

    @property
    def anchors(self) -> int:
        """Entities, events and topics."""
        return len(self.entities) + len(self.events) + len(self.topics)

    def part_json(self, part: str) -> bytes:
        """The part as one JSON object of records by id (what ``KnowledgeBase.part_json`` gives)."""
        if part == "build":
            return self._build
        if part not in _PARTS:
            raise KeyError(part)
        members: list[bytes] = []
        for number in range(self.replicas):
            if number == 0:
                records = self._seed[part]
            else:
                names = _made_up_names(self._seed, number) if self._rename else {}
                records = _replica(self._seed, f"r{number}/", names)[part]
            if records:
                members.append(json.dumps(records, separators=(",", ":")).encode("utf-8")[1:-1])
        return b"{" + b",".join(members) + b"}"


def grow_streamed(
    kb: KnowledgeBase, vectors: AnchorVectors, anchors: int, *, noise: float = 0.3, seed: int = 0
) -> tuple[StreamedKB, AnchorVectors]:
    """What :func:`grow_kb` makes (renamed replicas), as a :class:`StreamedKB` and its vectors.

    The vectors leave out the turn vectors (2.4M rows at 1M anchors; only a build reads them, and a
    KB without them loads as one saved before they existed).
    """
    per_seed = anchor_count(kb)
    if per_seed == 0:
        raise ValueError("the seed KB has no anchor to replicate")
    replicas = max(1, round(anchors / per_seed))
    return StreamedKB(kb, replicas), _grow_vectors(vectors, replicas, noise, seed, skip=(TURN_KIND,))


def grow_rows(
    ids: Sequence[str], texts: Sequence[str], matrix: Matrix, rows: int, *, noise: float = 0.3, seed: int = 0
) -> tuple[list[str], list[str], Matrix]:
    """``rows`` host rows: copies of the given ones (ids ``r<n>/<id>``, same text, perturbed vectors)."""
    rng = np.random.default_rng(seed + 1)
    out_ids: list[str] = []
    out_texts: list[str] = []
    blocks: list[Matrix] = []
    number = 0
    while len(out_ids) < rows:
        take = min(len(ids), rows - len(out_ids))
        prefix = f"r{number}/" if number else ""
        out_ids.extend(prefix + i for i in ids[:take])
        out_texts.extend(texts[:take])
        block = matrix[:take]
        blocks.append(block.astype(np.float32) if number == 0 else perturb(block, noise, rng))
        number += 1
    return out_ids, out_texts, np.vstack(blocks)


_PARTS = ("utterances", "entities", "events", "topics", "summaries")


def _grow_vectors(
    vectors: AnchorVectors, replicas: int, noise: float, seed: int, skip: Sequence[str] = ()
) -> AnchorVectors:
    rng = np.random.default_rng(seed)
    grown = AnchorVectors(embedder=vectors.embedder, dim=vectors.dim)
    for kind in VECTOR_KINDS:
        if kind in skip:
            continue
        base = vectors.get(kind)
        ids = list(base.ids)
        digests = list(base.digests)
        blocks = [np.asarray(base.matrix, dtype=np.float32).reshape(len(base.ids), vectors.dim)]
        for number in range(1, replicas):
            ids.extend(f"r{number}/{i}" for i in base.ids)
            digests.extend(base.digests)
            blocks.append(perturb(blocks[0], noise, rng))
        grown.kinds[kind] = KindVectors(ids=ids, digests=digests, matrix=np.vstack(blocks))
    return grown


_SYLLABLES = (
    "ka",
    "lo",
    "mi",
    "ru",
    "te",
    "vo",
    "zan",
    "bel",
    "dor",
    "fi",
    "gu",
    "ny",
    "pe",
    "sha",
    "tor",
    "wen",
)


def _made_up_name(number: int) -> str:
    syllables: list[str] = []
    while number or len(syllables) < 3:
        number, digit = divmod(number, len(_SYLLABLES))
        syllables.append(_SYLLABLES[digit])
    return "".join(syllables).capitalize()


_NAMES_PER_REPLICA = 100_003


def _made_up_names(data: dict[str, Any], replica: int) -> dict[str, str]:
    """Casefolded name or alias of each seed entity -> a made-up name unique to ``replica``."""
    names: dict[str, str] = {}
    count = 0
    for entity in data["entities"].values():
        for name in (entity["name"], *entity["aliases"]):
            if name.casefold() not in names:
                names[name.casefold()] = _made_up_name(replica * _NAMES_PER_REPLICA + count)
                count += 1
    return names


def _replica(data: dict[str, Any], tag: str, names: dict[str, str]) -> dict[str, Any]:
    """The seed KB's dict with every id, session id and cross-reference prefixed by ``tag``.

    Names found in ``names`` (casefolded) are replaced by their made-up name.
    """

    def n(name: str) -> str:
        return names.get(name.casefold(), name)

    def ns(values: Sequence[str]) -> list[str]:
        return [n(v) for v in values]

    def p(value: str) -> str:
        return tag + value

    def ps(values: Sequence[str]) -> list[str]:
        return [tag + v for v in values]

    def opt(value: str | None) -> str | None:
        return None if value is None else tag + value

    def trail(key: str) -> str:
        kind, _, target = key.partition(":")
        return f"{kind}:{tag}{target}"

    utterances = {
        p(k): {**u, "id": p(u["id"]), "session": p(u["session"]), "speaker": n(u["speaker"])}
        for k, u in data["utterances"].items()
    }
    entities = {
        p(k): {
            **e,
            "id": p(e["id"]),
            "name": n(e["name"]),
            "aliases": ns(e["aliases"]),
            "attributes": [{**a, "sources": ps(a["sources"])} for a in e["attributes"]],
            "relations": [
                {**r, "object": n(r["object"]), "object_id": opt(r["object_id"]), "sources": ps(r["sources"])}
                for r in e["relations"]
            ],
            "transitions": [{**t, "sources": ps(t["sources"])} for t in e["transitions"]],
            "co_occurrence": {p(other): n for other, n in e["co_occurrence"].items()},
            "sources": ps(e["sources"]),
        }
        for k, e in data["entities"].items()
    }
    events = {
        p(k): {
            **ev,
            "id": p(ev["id"]),
            "who": ns(ev["who"]),
            "who_ids": ps(ev["who_ids"]),
            "session": p(ev["session"]),
            "topic_id": opt(ev["topic_id"]),
            "trails": [
                {"trail": trail(t["trail"]), "prev": opt(t["prev"]), "next": opt(t["next"])}
                for t in ev["trails"]
            ],
            "sources": ps(ev["sources"]),
        }
        for k, ev in data["events"].items()
    }
    topics = {
        p(k): {
            **t,
            "id": p(t["id"]),
            "participants": ns(t["participants"]),
            "sessions": ps(t["sessions"]),
            "arc": [{**a, "session": p(a["session"]), "sources": ps(a["sources"])} for a in t["arc"]],
            "key_facts": [{**f, "sources": ps(f["sources"])} for f in t["key_facts"]],
            "sources": ps(t["sources"]),
        }
        for k, t in data["topics"].items()
    }
    summaries = {
        p(k): {**s, "id": p(s["id"]), "session": p(s["session"]), "sources": ps(s["sources"])}
        for k, s in data["summaries"].items()
    }
    return {
        "utterances": utterances,
        "entities": entities,
        "events": events,
        "topics": topics,
        "summaries": summaries,
    }
