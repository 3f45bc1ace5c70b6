"""spaCy parses of build batches, kept as JSON under a KB's ``cache/parses/``.

Parsing is most of the offline extractor's time. A forget rebuilds the KB from the remaining turns;
with the parses of the batches it left unchanged on disk it parses only the batches it changed.
Entries are keyed by the pipeline and the batch's texts, so a changed text or another pipeline
never reads a stale parse; they are JSON (``Doc.to_json``), like everything in a KB folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Any

from gravity_core.storage.file_cache import RecordedFiles

__all__ = ["PARSES", "ParseCache"]

logger = logging.getLogger(__name__)

#: The parse cache's folder inside a KB's ``cache/``.
PARSES = "parses"


def _key(pipeline: str, texts: Sequence[str]) -> str:
    hasher = hashlib.sha256(pipeline.encode("utf-8", errors="surrogatepass"))
    for text in texts:
        hasher.update(b"\x00" + text.encode("utf-8", errors="surrogatepass"))
    return hasher.hexdigest()


class ParseCache(RecordedFiles):
    """Parsed batches by pipeline and texts (see the module doc)."""

    def get(self, nlp: Any, pipeline: str, texts: Sequence[str]) -> list[Any] | None:
        """The batch's docs (fresh objects, each call), or ``None`` on a miss or an unreadable entry."""
        path = self.entry_path(_key(pipeline, texts))
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError) as exc:
            logger.warning("parse cache entry %s is unreadable, parsing again: %s", path, exc)
            return None
        from spacy.tokens import Doc

        try:
            docs = [Doc(nlp.vocab).from_json(item) for item in entry["docs"]]
        except (KeyError, TypeError, ValueError) as exc:
            logger.warning("parse cache entry %s does not hold docs, parsing again: %s", path, exc)
            return None
        if [doc.text for doc in docs] != list(texts):
            logger.warning("parse cache entry %s holds other texts, parsing again", path)
            return None
        self.note(path)
        return docs

    def keep(self, pipeline: str, texts: Sequence[str]) -> None:
        """Record the batch's entry as used without reading it (its answer was replayed).

        A forget then keeps it for a later rebuild that has to extract the batch again.
        """
        path = self.entry_path(_key(pipeline, texts))
        if path.is_file():
            self.note(path)

    def put(self, pipeline: str, texts: Sequence[str], docs: Sequence[Any]) -> None:
        """Keep the docs of a freshly parsed batch (before anything changes them)."""
        path = self.entry_path(_key(pipeline, texts))
        self.note(path)
        self.write_entry(path, {"pipeline": pipeline, "docs": [doc.to_json() for doc in docs]})
