"""What a KB folder holds: the names of its files, and what is saved into it and loaded from it.

Layout of a KB folder::

    manifest.json            schema version, current generation, counts, embedder
                             (gravity_core.storage.manifest)
    g000007/                 one complete generation of the KB (.gravity-generation.json marks it as ours)
        utterances.json  entities.json  events.json  topics.json  summaries.json  build.json
        vectors.json             ids and text digests of each kind's rows
        vectors-entity.npy  vectors-event.npy  vectors-topic.npy  vectors-summary.npy
        checksums.json           a digest of every file (gravity_core.storage.checksums)
    g000008/                 a delta generation over g000007: what an add changed (delta-*.json,
                             delta-vectors-*.npy, delta.json), the rest hard links to g000007's
                             files (base-*), see gravity_core.storage.generation_delta
    journal.jsonl            a build's checkpoints since the current generation (gravity_core.storage.journal)
    cache/                   model response cache (LLM extractors)
    anchors.html             the explorer page ``gravity show`` writes (optional)
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from gravity_core.schema import KnowledgeBase
from gravity_core.storage.anchor_vectors import AnchorVectors
from gravity_core.storage.generation_dirs import owned_generations
from gravity_core.storage.packed_kb import PackedKB

__all__ = [
    "CACHE",
    "FORMAT",
    "MANIFEST",
    "PAGE",
    "PAGE_GENERATOR",
    "PART_FILES",
    "LoadedKB",
    "SavableKB",
    "kb_generations",
]

MANIFEST = "manifest.json"
#: The format name in each generation folder's marker.
FORMAT = "gravity-kb"
CACHE = "cache"
#: The explorer page ``gravity show`` writes into the KB folder by default, and the line of its
#: head that proves GRAVITY wrote it. It holds the KB's text, so a forget deletes it.
PAGE = "anchors.html"
PAGE_GENERATOR = '<meta name="generator" content="gravity show">'
#: The parts of a full generation, one ``<part>.json`` file each.
PART_FILES = ("utterances", "entities", "events", "topics", "summaries", "build")

K = TypeVar("K", KnowledgeBase, PackedKB)


def kb_generations(directory: Path) -> list[int]:
    """Numbers of the KB generation folders in ``directory`` that a KB store wrote, oldest first."""
    return owned_generations(directory, FORMAT)


class SavableKB(Protocol):
    """What a save needs of a KB: each part as JSON and how many records each holds.

    The parts are ``"utterances"``, ``"entities"``, ``"events"``, ``"topics"``, ``"summaries"`` (an
    object of records by id) and ``"build"`` (the build info).
    :class:`~gravity_core.schema.KnowledgeBase` is one.
    """

    @property
    def utterances(self) -> Sized:
        """The utterances (their number is recorded)."""

    @property
    def entities(self) -> Sized:
        """The entity anchors (their number is recorded)."""

    @property
    def events(self) -> Sized:
        """The event anchors (their number is recorded)."""

    @property
    def topics(self) -> Sized:
        """The topic anchors (their number is recorded)."""

    @property
    def summaries(self) -> Sized:
        """The session summaries (their number is recorded)."""

    def part_json(self, part: str) -> bytes:
        """Part ``part`` (e.g. ``"events"``) as JSON bytes."""


@dataclass
class LoadedKB(Generic[K]):
    """A KB read from disk with its anchor vectors.

    ``kb`` is a :class:`KnowledgeBase`, or from :meth:`AnchorStore.load_packed` a
    :class:`~gravity_core.storage.packed_kb.PackedKB`. From :meth:`AnchorStore.resume`, ``generation`` may
    be ``None`` (journaled checkpoints of a first build, no generation yet) and ``journal_end`` is
    where the journal's last whole record ends (the next checkpoint appends there).
    """

    kb: K
    vectors: AnchorVectors
    generation: int | None
    journal_end: int = 0
