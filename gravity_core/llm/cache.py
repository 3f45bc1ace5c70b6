"""On-disk response cache: the same prompt to the same model is answered once.

One small JSON file per entry, at ``<directory>/<key[:2]>/<key>.json`` where ``key`` is the
sha256 of the model name and the messages as canonical JSON. Files are written atomically (a
temporary file in the same folder, then ``os.replace``), so concurrent writers in threads or
processes never leave a half-written entry; a file that is corrupt anyway (not JSON, not UTF-8)
counts as a miss and is overwritten by the next ``put``. The folder is created by the first
``put``, so a build that stops before its model answers leaves no ``cache/`` folder behind.
Completions are cleaned (:mod:`gravity_core.llm.text`) before they are stored.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from gravity_core.llm.base import ChatModel, Message
from gravity_core.llm.text import answer_text, clean_text
from gravity_core.storage.file_cache import RecordedFiles

__all__ = ["CachedModel", "ResponseCache", "cache_key"]

logger = logging.getLogger(__name__)


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _plain(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def cache_key(model_name: str, messages: Sequence[Message]) -> str:
    """The sha256 hex digest identifying a (model, messages) request.

    A lone surrogate in a message (which UTF-8 cannot encode) is hashed as its code point, so no
    request is ever without a key; every other text is hashed as UTF-8.
    """
    payload = _canonical({"model": model_name, "messages": _plain(messages)})
    return _sha256(payload)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


class ResponseCache(RecordedFiles):
    """Completions stored on disk, keyed by model name and the full message list.

    Safe to share between threads (and processes): reads see either no entry or a whole one.

    Args:
        directory: folder of the cache; created by the first :meth:`put` (a folder that cannot be
            created is logged, like any failure to write: the cache is an optimization).
    """

    def path_for(self, model_name: str, messages: Sequence[Message]) -> Path:
        """Where the entry for this request lives (whether or not it exists)."""
        return self.entry_path(cache_key(model_name, messages))

    def get(self, model_name: str, messages: Sequence[Message]) -> str | None:
        """The cached completion, or ``None`` on a miss (including an unreadable entry)."""
        path = self.path_for(model_name, messages)
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            logger.warning("response cache entry %s is unreadable, treating it as a miss: %s", path, exc)
            return None
        try:
            entry = json.loads(raw)
        except (json.JSONDecodeError, RecursionError) as exc:
            logger.warning("response cache entry %s is corrupt, treating it as a miss: %s", path, exc)
            return None
        completion = entry.get("completion") if isinstance(entry, dict) else None
        if not isinstance(completion, str) or entry.get("model") != model_name:
            logger.warning("response cache entry %s has an unexpected shape, treating it as a miss", path)
            return None
        self.note(path)
        return clean_text(completion)

    def put(self, model_name: str, messages: Sequence[Message], completion: str) -> None:
        """Store ``completion`` as the answer of ``model_name`` to ``messages``.

        A failure to write is logged and ignored: the cache is an optimization, not a store.
        """
        path = self.path_for(model_name, messages)
        self.note(path)
        entry = {
            "model": model_name,
            "prompt_sha256": _sha256(_canonical(_plain(messages))),
            "completion": clean_text(completion),
            "created": datetime.now(UTC).isoformat(),
        }
        self.write_entry(path, entry)

    def discard(self, model_name: str, messages: Sequence[Message]) -> None:
        """Remove the entry for this request, if any (a failure to remove is logged and ignored)."""
        path = self.path_for(model_name, messages)
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            logger.warning("could not remove response cache entry %s: %s", path, exc)


class CachedModel:
    """A :class:`ChatModel` that answers from a :class:`ResponseCache` when it can.

    Answers are cleaned text (:func:`~gravity_core.llm.text.answer_text`), cached or not.

    Attributes:
        calls: how many requests reached the wrapped model.
        hits: how many requests the cache answered.
    """

    def __init__(self, model: ChatModel, cache: ResponseCache) -> None:
        self.model = model
        self.cache = cache
        self.calls = 0
        self.hits = 0
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        """The wrapped model's name (so cache keys do not depend on the wrapper)."""
        return self.model.model_name

    def complete(self, messages: Sequence[Message]) -> str:
        """The cached answer to ``messages``, or the wrapped model's answer (then cached)."""
        name = self.model.model_name
        cached = self.cache.get(name, messages)
        if cached is not None:
            with self._lock:
                self.hits += 1
            return cached
        with self._lock:
            self.calls += 1
        completion = answer_text(self.model.complete(messages), name)
        self.cache.put(name, messages, completion)
        return completion
