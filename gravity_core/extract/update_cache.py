"""An extractor's answers to build batches, kept as JSON under a KB's ``cache/updates/``.

An answer is keyed by the KB's lineage before the batch, the extractor and the batch
(:func:`~gravity_core.schema.lineage.batch_key`): the same key means the same KB and the same batch, so a
deterministic extractor would answer the same. A forget's rebuild replays the answers of the batches
before the first one it changed and extracts only the rest; the entries it did not use belong to the
old build and are deleted with the forget.
"""

from __future__ import annotations

import json
import logging

from pydantic import ValidationError

from gravity_core.schema import AnchorUpdate
from gravity_core.storage.file_cache import RecordedFiles

__all__ = ["UPDATES", "UpdateCache"]

logger = logging.getLogger(__name__)

#: The update cache's folder inside a KB's ``cache/``.
UPDATES = "updates"


class UpdateCache(RecordedFiles):
    """Extractor answers by batch key (see the module doc)."""

    def get(self, key: str) -> AnchorUpdate | None:
        """The answer kept under ``key``, or ``None`` on a miss or an unreadable entry."""
        path = self.entry_path(key)
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            update = AnchorUpdate.model_validate(entry["update"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError, KeyError, TypeError, ValidationError) as exc:
            logger.warning("update cache entry %s is unreadable, extracting again: %s", path, exc)
            return None
        self.note(path)
        return update

    def put(self, key: str, update: AnchorUpdate) -> None:
        """Keep the answer to a batch under ``key``."""
        path = self.entry_path(key)
        self.note(path)
        self.write_entry(path, {"update": update.model_dump(mode="json")})
