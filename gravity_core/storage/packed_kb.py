"""A KB held for queries as compressed JSON: pydantic models are made only for what a query reads.

A loaded :class:`~gravity_core.schema.KnowledgeBase` keeps every utterance and anchor as pydantic
models, about 15 KB per anchor. A query reads a few dozen anchors; :class:`PackedKB` keeps each
part's records as the JSON they were stored in, compressed (each anchor alone against a shared
dictionary, so reading one is quick; utterances in chunks), and makes a model when one is read (a
small cache keeps the last ones). Both satisfy :class:`KBReader`, which is all the
query path needs.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError

from gravity_core.schema import (
    BuildInfo,
    EntityAnchor,
    EventAnchor,
    KnowledgeBase,
    SummaryRecord,
    TopicAnchor,
    Utterance,
)

__all__ = [
    "INDEXED_PARTS",
    "RECORD_PARTS",
    "InvalidRecord",
    "KBReader",
    "PackedKB",
    "PackedRecords",
    "json_members",
    "to_knowledge_base",
]

M = TypeVar("M", bound=BaseModel)

#: The parts of a KB that hold records by id, and the model of each (every part but ``build``).
RECORD_PARTS: dict[str, type[BaseModel]] = {
    "utterances": Utterance,
    "entities": EntityAnchor,
    "events": EventAnchor,
    "topics": TopicAnchor,
    "summaries": SummaryRecord,
}
#: The parts a query looks up by id (the others are read whole, if at all).
INDEXED_PARTS = frozenset({"entities", "events", "topics"})
#: Records of a part read whole compressed together.
CHUNK_RECORDS = 32
#: Size of the dictionary records read by id are compressed against (zlib's window).
_DICT_BYTES = 32 * 1024
#: Models kept after a read, per part (a query reads a few dozen).
CACHED_MODELS = 128


class InvalidRecord(ValueError):
    """A record that does not fit its model: ``key`` is its id, ``error`` what pydantic said."""

    def __init__(self, key: str, error: ValidationError) -> None:
        first = error.errors()[0]
        self.key = key
        self.error = error
        self.where = ".".join(str(p) for p in (key, *first["loc"]))
        super().__init__(f"{self.where}: {first['msg']}")


class KBReader(Protocol):
    """What the query path reads of a KB: each part by id. A ``KnowledgeBase`` is one."""

    @property
    def utterances(self) -> Mapping[str, Utterance]:
        """The utterances, by id."""

    @property
    def entities(self) -> Mapping[str, EntityAnchor]:
        """The entity anchors, by id."""

    @property
    def events(self) -> Mapping[str, EventAnchor]:
        """The event anchors, by id."""

    @property
    def topics(self) -> Mapping[str, TopicAnchor]:
        """The topic anchors, by id."""

    @property
    def summaries(self) -> Mapping[str, SummaryRecord]:
        """The session summaries, by id."""

    @property
    def build(self) -> BuildInfo:
        """The build info."""


def json_members(raw: bytes) -> Iterator[tuple[str, bytes]]:
    """Each ``key: value`` of the JSON object ``raw`` (UTF-8), the value as its own JSON bytes.

    Only one member is parsed at a time, so a large file is never held as a tree of Python objects.

    Raises:
        ValueError: ``raw`` is not a JSON object.
    """
    # Latin-1 maps each byte to one character, so string positions are byte offsets; every byte of
    # a multi-byte UTF-8 sequence is >= 0x80 and never taken for JSON punctuation.
    text = raw.decode("latin-1")
    decoder = json.JSONDecoder()
    position = _skip_space(text, 0)
    if text[position : position + 1] != "{":
        raise ValueError("expected a JSON object")
    position = _skip_space(text, position + 1)
    if text[position : position + 1] == "}":
        if _skip_space(text, position + 1) != len(text):
            raise ValueError(f"extra data after the object at byte {position + 1}")
        return
    while True:
        key_start = position
        key, position = decoder.raw_decode(text, position)
        if not isinstance(key, str):
            raise ValueError(f"expected a member name at byte {key_start}")
        key = json.loads(raw[key_start:position].decode("utf-8"))  # the text above read UTF-8 as Latin-1
        position = _skip_space(text, position)
        if text[position : position + 1] != ":":
            raise ValueError(f"expected ':' at byte {position}")
        start = _skip_space(text, position + 1)
        _, end = decoder.raw_decode(text, start)
        yield key, raw[start:end]
        position = _skip_space(text, end)
        mark = text[position : position + 1]
        if mark == "}":
            if _skip_space(text, position + 1) != len(text):
                raise ValueError(f"extra data after the object at byte {position + 1}")
            return
        if mark != ",":
            raise ValueError(f"expected ',' or '}}' at byte {position}")
        position = _skip_space(text, position + 1)


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


class _PerRecord:
    """Each record compressed alone against a shared dictionary (its part's first records).

    Reading one record decompresses only it (a few microseconds); the dictionary holds the keys
    and phrasing the records share, so they compress about as well as in chunks.
    """

    def __init__(self) -> None:
        self._building = bytearray()
        self._data = b""
        self._starts: list[int] = []
        self._waiting: list[bytes] = []
        self._waiting_bytes = 0
        self._zdict = b""
        self._compressor: Any = None
        self._bounds = np.zeros(1, dtype=np.int64)

    def add(self, raw: bytes) -> None:
        if self._compressor is None:
            self._waiting.append(raw)
            self._waiting_bytes += len(raw)
            if self._waiting_bytes >= _DICT_BYTES:
                self._start()
            return
        self._put(raw)

    def finish(self) -> None:
        if self._compressor is None:
            self._start()
        self._bounds = np.asarray([*self._starts, len(self._building)], dtype=np.int64)
        self._starts = []
        self._data = bytes(self._building)  # without a bytearray's growth slack
        self._building = bytearray()

    def _start(self) -> None:
        self._zdict = b"".join(self._waiting)[-_DICT_BYTES:]
        self._compressor = zlib.compressobj(6, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, self._zdict)
        waiting, self._waiting = self._waiting, []
        for raw in waiting:
            self._put(raw)

    def _put(self, raw: bytes) -> None:
        compressor = self._compressor.copy()
        self._starts.append(len(self._building))
        self._building += compressor.compress(raw)
        self._building += compressor.flush()

    def record(self, row: int) -> bytes:
        start, end = int(self._bounds[row]), int(self._bounds[row + 1])
        return zlib.decompressobj(-15, self._zdict).decompress(self._data[start:end])

    def records(self) -> Iterator[bytes]:
        for row in range(len(self._bounds) - 1):
            yield self.record(row)

    def nbytes(self) -> int:
        return len(self._data) + len(self._zdict) + self._bounds.nbytes


class _Chunked:
    """Records compressed :data:`CHUNK_RECORDS` at a time: smaller for small records, for parts read whole."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._pending: list[bytes] = []
        self._ends_list: list[int] = []
        self._size = 0
        self._ends = np.zeros(0, dtype=np.int64)

    def add(self, raw: bytes) -> None:
        self._pending.append(raw)
        self._size += len(raw)
        self._ends_list.append(self._size)
        if len(self._pending) == CHUNK_RECORDS:
            self._close_chunk()

    def finish(self) -> None:
        if self._pending:
            self._close_chunk()
        self._ends = np.asarray(self._ends_list, dtype=np.int64)
        self._ends_list = []

    def _close_chunk(self) -> None:
        self._chunks.append(zlib.compress(b"".join(self._pending), 6))
        self._pending, self._size = [], 0

    def record(self, row: int) -> bytes:
        data = zlib.decompress(self._chunks[row // CHUNK_RECORDS])
        start = int(self._ends[row - 1]) if row % CHUNK_RECORDS else 0
        return data[start : int(self._ends[row])]

    def records(self) -> Iterator[bytes]:
        for number, chunk in enumerate(self._chunks):
            data = zlib.decompress(chunk)
            start = 0
            for end in self._ends[number * CHUNK_RECORDS : (number + 1) * CHUNK_RECORDS].tolist():
                yield data[start:end]
                start = end

    def nbytes(self) -> int:
        return sum(len(chunk) for chunk in self._chunks) + self._ends.nbytes


class PackedRecords(Mapping[str, M], Generic[M]):
    """Records of one model type by id, kept as compressed JSON; a model is made on each read.

    Iteration follows the stored order. Safe to share between threads.

    Raises:
        InvalidRecord: a record does not fit ``model``.

    Args:
        model: the pydantic model of the records.
        records: ``(id, JSON bytes)`` in order; each is validated here, so a read never fails.
        indexed: records read by id (each compressed alone, the id -> row table built now); ``False``
            for records read whole, if at all, such as utterances: compressed in chunks, their ids
            too, the table built at the first look-up by id.
    """

    def __init__(self, model: type[M], records: Iterable[tuple[str, bytes]], *, indexed: bool = True) -> None:
        self._model = model
        self._codec: _PerRecord | _Chunked = _PerRecord() if indexed else _Chunked()
        keys: list[str] = []
        for key, raw in records:
            try:
                model.model_validate_json(raw)
            except ValidationError as exc:
                raise InvalidRecord(key, exc) from exc
            keys.append(key)
            self._codec.add(raw)
        self._codec.finish()
        self._count = len(keys)
        self._keys = zlib.compress(json.dumps(keys, ensure_ascii=False).encode("utf-8"), 6)
        self._rows: dict[str, int] | None = {k: i for i, k in enumerate(keys)} if indexed else None
        self._cache: OrderedDict[str, M] = OrderedDict()
        self._lock = threading.Lock()

    def _table(self) -> dict[str, int]:
        rows = self._rows
        if rows is None:
            with self._lock:
                if self._rows is None:
                    self._rows = {k: i for i, k in enumerate(self._key_list())}
                rows = self._rows
        return rows

    def _key_list(self) -> list[str]:
        keys: list[str] = json.loads(zlib.decompress(self._keys).decode("utf-8"))
        return keys

    def __getitem__(self, key: str) -> M:
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        made = self._model.model_validate_json(self._codec.record(self._table()[key]))
        with self._lock:
            self._cache[key] = made
            if len(self._cache) > CACHED_MODELS:
                self._cache.popitem(last=False)
        return made

    def __contains__(self, key: object) -> bool:
        return key in self._table()

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows if self._rows is not None else self._key_list())

    def __len__(self) -> int:
        return self._count

    def models(self) -> Iterator[M]:
        """Every record as a model, in order (the cache is left alone)."""
        for raw in self._codec.records():
            yield self._model.model_validate_json(raw)

    def values(self) -> Iterator[M]:  # type: ignore[override]
        """Same as :meth:`models` (each call makes the models again)."""
        return self.models()

    def items(self) -> Iterator[tuple[str, M]]:  # type: ignore[override]
        """``(id, model)`` in order, as :meth:`models` makes them."""
        return zip(self, self.models(), strict=True)

    def packed_bytes(self) -> int:
        """Bytes of compressed JSON held (with the tables to find each record)."""
        return self._codec.nbytes() + len(self._keys)


@dataclass(frozen=True)
class PackedKB:
    """A KB held for queries (see the module docs); :func:`to_knowledge_base` makes the full model."""

    utterances: PackedRecords[Utterance]
    entities: PackedRecords[EntityAnchor]
    events: PackedRecords[EventAnchor]
    topics: PackedRecords[TopicAnchor]
    summaries: PackedRecords[SummaryRecord]
    build: BuildInfo

    def packed_bytes(self) -> int:
        """Bytes of compressed JSON held, all parts."""
        parts = (self.utterances, self.entities, self.events, self.topics, self.summaries)
        return sum(part.packed_bytes() for part in parts)


def to_knowledge_base(kb: KBReader) -> KnowledgeBase:
    """``kb`` as a :class:`KnowledgeBase` (itself when it is one; otherwise every record is made)."""
    if isinstance(kb, KnowledgeBase):
        return kb
    return KnowledgeBase(
        utterances=dict(zip(kb.utterances, kb.utterances.values(), strict=True)),
        entities=dict(zip(kb.entities, kb.entities.values(), strict=True)),
        events=dict(zip(kb.events, kb.events.values(), strict=True)),
        topics=dict(zip(kb.topics, kb.topics.values(), strict=True)),
        summaries=dict(zip(kb.summaries, kb.summaries.values(), strict=True)),
        build=kb.build.model_copy(deep=True),
    )
