r"""A KB folder's checkpoint journal: what a build changed since the last generation, appended.

Writing the whole KB at every checkpoint made a build's time grow with the square of the
conversation's length. A checkpoint appends one line instead, holding only the utterances,
anchors and summaries added or changed since the last checkpoint and the build log if it changed
(:class:`~gravity_core.schema.changes.KBChanges`). New ones are written whole; an anchor the build
keeps changing (a speaker, a topic of every session) as a patch against what the journal last
said of it (:mod:`gravity_core.storage.json_patch`): what was appended to its sources, arc or
co-occurrences, not all of it again. A build that resumes reads
the current generation and replays the journal over it; when the journal outgrows the generation
it follows, the next checkpoint writes a full generation instead, and so does the end of every
build, which then removes the journal. Readers (:meth:`AnchorStore.load`) see whole generations
only.

A line is ``<blake2b-128 of the JSON> <JSON record>\\n``; each record names the generation it
follows (``base``). Replay stops at the first line that is incomplete (a torn write) or does not
match its digest; the next append cuts the journal there. Nothing is lost by that: every record is
a consistent state, and the build redoes what came after it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gravity_core.schema import KnowledgeBase
from gravity_core.schema.changes import PARTS, KBChanges
from gravity_core.storage import json_patch
from gravity_core.storage.files import write_all
from gravity_core.storage.generation_dirs import fsync_dir

__all__ = ["JOURNAL", "Journal", "JournalEncoder", "append_record", "read_journal"]

logger = logging.getLogger(__name__)

JOURNAL = "journal.jsonl"
_VERSION = 1
# An item's third write is remembered, and later ones are patches: most anchors are written once
# or twice (made, then linked to the next event), and remembering them would hold the whole KB in
# memory a second time.
_REMEMBER_FROM = 3


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).hexdigest().encode("ascii")


class JournalEncoder:
    """Turns a build's changes into journal lines, patching the items it keeps changing.

    It remembers what the journal last said of each item it wrote more than twice; a new encoder
    (a build that read the KB again) writes everything whole first.
    """

    def __init__(self) -> None:
        self._said: dict[tuple[str, str], Any] = {}
        self._writes: dict[tuple[str, str], int] = {}

    def encode(
        self, kb: KnowledgeBase, changes: KBChanges, *, base: int | None, embedder: str, dim: int
    ) -> tuple[bytes, Callable[[], None]]:
        """A journal line of what ``changes`` names, as ``kb`` has it, and what to call once it is written.

        Until that call the encoder goes on patching against what the journal held before the line.
        """
        record: dict[str, Any] = {"v": _VERSION, "base": base, "embedder": embedder, "dim": dim, "patch": {}}
        remembered: dict[tuple[str, str], Any] = {}
        for part in PARTS:
            items: Mapping[str, BaseModel] = getattr(kb, part)
            whole: dict[str, Any] = {}
            patches: dict[str, Any] = {}
            for item_id in getattr(changes, part):
                value = items[item_id].model_dump(mode="json")
                key = (part, item_id)
                if key in self._said:
                    patch = json_patch.diff(self._said[key], value)
                    if patch is not None:
                        patches[item_id] = patch
                else:
                    whole[item_id] = value
                if key in self._said or self._writes.get(key, 0) + 1 >= _REMEMBER_FROM:
                    remembered[key] = value
            record[part] = whole
            if patches:
                record["patch"][part] = patches
        record["build"] = kb.build.model_dump(mode="json") if changes.build else None
        body = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        written = [(part, i) for part in PARTS for i in getattr(changes, part)]

        def commit() -> None:
            for key in written:
                self._writes[key] = self._writes.get(key, 0) + 1
            self._said.update(remembered)

        return _digest(body) + b" " + body + b"\n", commit

    def rebase(self, kb: KnowledgeBase, changes: KBChanges) -> None:
        """A generation was saved holding ``changes``: what is remembered of them is now their state there."""
        for part in PARTS:
            items: Mapping[str, BaseModel] = getattr(kb, part)
            for item_id in getattr(changes, part):
                if (part, item_id) in self._said:
                    self._said[part, item_id] = items[item_id].model_dump(mode="json")


class Journal:
    """The records of a journal that follow one generation, and where the last whole one ends."""

    def __init__(self, records: list[dict[str, Any]], end: int) -> None:
        self.records = records
        self.end = end

    def apply(self, data: dict[str, Any]) -> int:
        """Replay the records over ``data`` (a KB as ``KnowledgeBase.to_dict`` gives it); returns how many.

        Each record applies whole or not at all: one whose patch does not fit stops the replay
        (it and the rest are treated as lost, and :attr:`end` moves back to before it).
        """
        end = 0
        for applied, record in enumerate(self.records):
            try:
                staged = {part: _staged(data[part], record, part) for part in PARTS}
                build = record["build"]
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                logger.warning(
                    "journal record %d does not fit the KB (%r); replay stops there", applied + 1, exc
                )
                self.records, self.end = self.records[:applied], end
                return applied
            for part, items in staged.items():
                data[part].update(items)
            if build is not None:
                data["build"] = build
            end = int(record["_end"])
        return len(self.records)

    @property
    def embedder(self) -> tuple[str, int] | None:
        """The embedder name and dimension the journaled build used, if it has a record."""
        if not self.records:
            return None
        last = self.records[-1]
        return str(last.get("embedder", "")), int(last.get("dim", 0))


def _staged(items: dict[str, Any], record: dict[str, Any], part: str) -> dict[str, Any]:
    """The items of ``part`` that ``record`` sets: whole ones, and patched ones (made anew)."""
    staged = dict(record[part])
    for item_id, patch in record["patch"].get(part, {}).items():
        staged[item_id] = json_patch.apply(items[item_id], patch)
    return staged


def read_journal(path: Path, base: int | None) -> Journal:
    """The whole records of the journal at ``path`` that follow generation ``base``.

    A journal that follows another generation (its build ended, or was rolled back) gives none.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Journal([], 0)
    records: list[dict[str, Any]] = []
    end = 0
    for line in data.splitlines(keepends=True):
        record = _decode(line)
        if record is None:
            logger.warning(
                "%s: a record after byte %d is incomplete or damaged; replay stops there", path, end
            )
            break
        if record.get("base") != base:
            if records:
                logger.warning(
                    "%s: a record after byte %d follows another generation; replay stops", path, end
                )
                break
            return Journal([], 0)
        end += len(line)
        record["_end"] = end
        records.append(record)
    return Journal(records, end)


def _decode(line: bytes) -> dict[str, Any] | None:
    if not line.endswith(b"\n"):
        return None
    digest, _, body = line[:-1].partition(b" ")
    if _digest(body) != digest:
        return None
    try:
        record = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(record, dict) or record.get("v") != _VERSION:
        return None
    return record


def append_record(path: Path, line: bytes, at: int) -> int:
    """Append ``line`` after the journal's first ``at`` bytes (a torn tail is cut); returns the new end."""
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)
    try:
        if os.fstat(fd).st_size != at:
            os.ftruncate(fd, at)
        os.lseek(fd, at, os.SEEK_SET)
        write_all(fd, line, path)
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)
    return at + len(line)
