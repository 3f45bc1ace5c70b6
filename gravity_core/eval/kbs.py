"""One GRAVITY KB per benchmark sample, built once into the output folder and reused by reruns."""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path

from gravity_core.build.builder import DEFAULT_BATCH_SIZE, AnchorBuilder
from gravity_core.embeddings.base import Embedder
from gravity_core.eval.datasets import EvalSample
from gravity_core.extract.base import Extractor
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import NumpyAnchorIndex
from gravity_core.storage.anchor_vectors import EXPANSION_KIND
from gravity_core.storage.store import AnchorStore
from gravity_core.text.tokens import TokenCounter

__all__ = ["kb_folder", "sample_engine"]

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def kb_folder(root: str | os.PathLike[str], extractor: Extractor, sample_id: str) -> Path:
    """Where a sample's KB lives: ``<root>/<extractor name>/<sample id>`` (names made path-safe).

    The extractor's name (which includes its embedder) is part of the path, so KBs built by
    different extractors never mix.
    """
    return Path(root) / _safe_name(extractor.name) / _safe_name(sample_id)


def _safe_name(name: str) -> str:
    """``name`` as one path component; names that had to change get a digest, so two never share one."""
    cleaned = _UNSAFE.sub("_", name)
    if cleaned == name and cleaned not in {"", ".", ".."}:
        return cleaned
    digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()
    return f"{cleaned.strip('.')}-{digest}"


def sample_engine(
    sample: EvalSample,
    root: str | os.PathLike[str],
    extractor: Extractor,
    embedder: Embedder,
    *,
    counter: TokenCounter,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> GravityEngine:
    """Build (or extend, or just load) the sample's KB and return a query engine over it.

    Utterances already in the stored KB are skipped, so a rerun builds nothing and an interrupted
    build continues from its last checkpoint.

    Args:
        sample: the benchmark sample.
        root: the folder holding the KBs (see :func:`kb_folder`).
        extractor: the extractor (offline or LLM).
        embedder: the anchors' embedder, also the engine's query embedder.
        counter: the token counter shared by the engines.
        batch_size: utterances per extractor call.
    """
    store = AnchorStore(kb_folder(root, extractor, sample.id))
    builder = AnchorBuilder(extractor, embedder, batch_size=batch_size, store=store)
    report = builder.add(sample.utterances)
    if report.added:
        logger.info("sample %s: built %d utterances into %s", sample.id, report.added, store.directory)
    return GravityEngine(
        builder.kb,
        NumpyAnchorIndex.from_vectors(builder.vectors),
        embedder,
        counter=counter,
        expansion_vectors=builder.vectors.get(EXPANSION_KIND),
    )
