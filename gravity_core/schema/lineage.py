"""A KB's lineage: a digest of the batches merged into it, in order, and of what each one gave.

The KB a build makes depends only on that sequence (extraction and merging are deterministic), so
two KBs of one lineage are the same KB, and an extractor's answer to a batch on a KB of known
lineage can be kept and given again (:class:`~gravity_core.extract.update_cache.UpdateCache`): a
forget's rebuild then re-extracts only the batches after the first one it changed.

An empty KB's lineage is ``""``. A KB that holds utterances but no lineage (built before lineages
were kept) has an unknown one, and keeps it unknown until a forget rebuilds it from empty.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from gravity_core._version import __version__
from gravity_core.schema import AnchorUpdate, FailedBatch, KnowledgeBase, Utterance

__all__ = ["batch_key", "lineage_of", "next_lineage"]


def lineage_of(kb: KnowledgeBase) -> str | None:
    """The KB's lineage, ``None`` if unknown."""
    return kb.build.lineage if kb.build.lineage or not kb.utterances else None


def _add_batch(hasher: Any, batch: Sequence[Utterance]) -> None:
    for utterance in batch:
        hasher.update(b"\x00" + utterance.model_dump_json().encode("utf-8", errors="surrogatepass"))


def batch_key(kb: KnowledgeBase, extractor: str, batch: Sequence[Utterance]) -> str | None:
    """What names ``extractor``'s answer to ``batch`` on ``kb``: ``None`` if the KB's lineage is unknown.

    GRAVITY's version is part of it, so an upgrade never gives an answer of the older code.
    """
    lineage = lineage_of(kb)
    if lineage is None:
        return None
    hasher = hashlib.sha256(f"{__version__}\x00{extractor}\x00{lineage}".encode())
    _add_batch(hasher, batch)
    return hasher.hexdigest()


def next_lineage(lineage: str | None, batch: Sequence[Utterance], outcome: AnchorUpdate | FailedBatch) -> str:
    """The lineage after ``outcome`` of ``batch`` was merged (or recorded as failed) into a KB.

    ``lineage`` is the KB's before (from :func:`lineage_of`); the result is ``""`` (still unknown)
    if that was unknown.
    """
    if lineage is None:
        return ""
    hasher = hashlib.sha256(lineage.encode())
    _add_batch(hasher, batch)
    if isinstance(outcome, FailedBatch):
        hasher.update(b"\x01failed")
    else:
        hasher.update(b"\x01" + outcome.model_dump_json().encode("utf-8", errors="surrogatepass"))
    return hasher.hexdigest()
