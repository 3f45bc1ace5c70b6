"""A generation's checksum list, and reading its files checked against it.

Every save writes ``checksums.json`` into the generation folder: the :data:`~.files.DIGEST` of
each file (the ownership marker included, and kept whole under ``"marker"`` so that a writer can
restore a damaged one), and each part's count and ids in order (what a delta generation over it
checks). The manifest holds the digest of the list itself, so a reader that trusts the manifest
can trust every file it reads.

:class:`Checks` compares the files a load reads with the list and remembers the mismatches, so
that a file that is not JSON, or breaks the schema, is reported with that more precise reason
first; :func:`read_bytes` and :func:`read_json` read a KB file and report what is wrong with it as
an :class:`~gravity_core.errors.AnchorStoreError` naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gravity_core.errors import AnchorStoreError
from gravity_core.schema import KnowledgeBase
from gravity_core.schema.changes import PARTS
from gravity_core.storage.files import DIGEST, digest_bytes, digest_file, write_json_atomic
from gravity_core.storage.generation_delta import key_order
from gravity_core.storage.generation_dirs import MARKER
from gravity_core.storage.layout import MANIFEST, SavableKB

__all__ = [
    "CHECKSUMS",
    "Checks",
    "MissingFile",
    "decode_json",
    "read_bytes",
    "read_checksums",
    "read_json",
    "reason_of",
    "write_checksums",
]

CHECKSUMS = "checksums.json"


class MissingFile(AnchorStoreError):
    """A KB file that is not there (:func:`read_bytes`)."""


class Checks:
    """Compares files read with the digests saved with their generation; remembers mismatches.

    ``digests`` is ``None`` for a generation written before checksums existed: nothing is checked.
    """

    def __init__(self, digests: dict[str, str] | None) -> None:
        self.digests = digests
        self.failures: list[AnchorStoreError] = []

    def verify(self, path: Path, data: bytes) -> None:
        """Compare the bytes read from ``path`` with its digest."""
        if self.digests is not None:
            self._compare(path, digest_bytes(data), f"its {len(data)} bytes do not match their")

    def verify_file(self, path: Path) -> None:
        """:meth:`verify` of a file read in chunks."""
        if self.digests is not None:
            self.verify_digest(path, digest_file(path))

    def verify_digest(self, path: Path, digest: str) -> None:
        """:meth:`verify` of a file whose digest was computed as it was read."""
        if self.digests is not None:
            self._compare(path, digest, "does not match its")

    def lists(self, name: str) -> bool:
        """Whether the checksum list names the file ``name``."""
        return self.digests is not None and name in self.digests

    def _compare(self, path: Path, digest: str, mismatch: str) -> None:
        expected = self.digests.get(path.name) if self.digests is not None else None
        if expected is None:
            self.failures.append(AnchorStoreError(f"not listed in {CHECKSUMS}", path=str(path)))
        elif digest != expected:
            self.failures.append(
                AnchorStoreError(f"corrupt: {mismatch} {DIGEST} digest in {CHECKSUMS}", path=str(path))
            )

    def failure_of(self, *paths: Path) -> AnchorStoreError | None:
        """The first recorded mismatch of one of ``paths``."""
        wanted = {str(p) for p in paths}
        return next((f for f in self.failures if f.path in wanted), None)

    def raise_first(self) -> None:
        """Raise the first mismatch recorded, if any."""
        if self.failures:
            raise self.failures[0]


def reason_of(exc: AnchorStoreError) -> str:
    """The message of ``exc`` without the path it names (for a message that adds to it)."""
    text = str(exc)
    prefix = f"{exc.path}: " if exc.path else ""
    return text[len(prefix) :] if prefix and text.startswith(prefix) else text


def read_bytes(path: Path, check: Checks | None = None) -> bytes:
    """The file at ``path``, compared with its digest by ``check``.

    Raises:
        MissingFile: there is no such file.
        AnchorStoreError: it cannot be read.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise MissingFile("file missing", path=str(path)) from exc
    except OSError as exc:
        raise AnchorStoreError(f"cannot read: {exc.strerror}", path=str(path)) from exc
    if check is not None:
        check.verify(path, data)
    return data


def read_json(path: Path, check: Checks | None = None) -> Any:
    """The JSON file at ``path`` decoded (:func:`read_bytes`); ``AnchorStoreError`` if it is not JSON."""
    return decode_json(read_bytes(path, check), path)


def decode_json(data: bytes, path: Path) -> Any:
    """The JSON document ``data`` read from ``path``."""
    try:
        return json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AnchorStoreError(f"corrupt JSON: {exc}", path=str(path)) from exc


def read_checksums(folder: Path, digest: str | None) -> dict[str, str] | None:
    """The digests by file name of ``folder``'s checksum list; ``digest`` (the manifest's) vouches for it.

    ``None`` for a generation written by a version without checksums (no list, no digest).
    """
    path = folder / CHECKSUMS
    if digest is None and not path.exists():
        return None
    raw = read_bytes(path)
    if digest is not None and digest_bytes(raw) != digest:
        raise AnchorStoreError(f"corrupt: does not match the digest in {MANIFEST}", path=str(path))
    index = decode_json(raw, path)
    files = index.get("files") if isinstance(index, dict) else None
    if not isinstance(files, dict) or index.get("algorithm") != DIGEST:
        raise AnchorStoreError(f"not a {DIGEST} checksum list", path=str(path))
    return {str(k): str(v) for k, v in files.items()}


def write_checksums(folder: Path, digests: dict[str, str], kb: SavableKB) -> None:
    """The generation's checksum list, and each part's count and ids in order (what a delta over it checks).

    The ownership marker is listed too, and kept whole under ``"marker"``: a damaged marker is
    reported like any file, and a writer restores it from there (:mod:`.recovery`).
    """
    marker = (folder / MARKER).read_bytes()
    digests = {**digests, MARKER: digest_bytes(marker)}
    index: dict[str, Any] = {"algorithm": DIGEST, "files": dict(sorted(digests.items()))}
    index["marker"] = json.loads(marker)
    index["counts"] = {part: len(getattr(kb, part)) for part in PARTS}
    if isinstance(kb, KnowledgeBase):  # a part streamed as JSON has no ids to hand (no delta follows it)
        index["orders"] = {part: key_order(getattr(kb, part)) for part in PARTS}
    write_json_atomic(folder / CHECKSUMS, index)
