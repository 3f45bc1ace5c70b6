"""Delta generations: a save that writes only what changed since a full generation and links the rest.

A delta generation's folder holds::

    base-utterances.json ... base-vectors-turn.npy   hard links to the files of its base, a full
                                                     generation (the same inodes: nothing is copied)
    delta-utterances.json ... delta-summaries.json   the items new or changed since the base, whole
    delta-vectors-<kind>.npy                         the rows of a kind's vectors new or changed since
                                                     the base (only for the kinds that changed)
    delta.json                                       the base's number; per changed kind, the ids and
                                                     text digests of those rows and the ids dropped
    build.json  checksums.json                       whole, as in every generation

The folder is still a whole generation: loading, rollback, pruning and checksums treat it as one
(a linked file keeps its base's digest), and the base stays on disk while a generation kept needs
it. A part is its base's items updated with the delta's: a changed item keeps its place, new ones
follow in the order the build made them, as a build's dicts hold them (a build never removes an
item; a forget writes a full generation). A vector kind is its base's rows without the dropped
ones, changed rows replaced in place, new rows after, as :meth:`AnchorVectors.refresh` orders
an anchor kind's rows. The plan checks both orders against the KB being saved (a generation's
checksums keep each part's count and a digest of its ids in order) and gives up (a full generation
is written) when they differ. The expansion kind is exempt: a changed anchor's
new expanded queries take the place of its old ones in a build's order, where a delta puts them
last; its rows are found by their query, never by position.

The next save over a delta generation writes a new delta over the same base, holding the earlier
delta's items as well; once a delta would hold more than :data:`MAX_SHARE` of its base's bytes a
full generation is written instead, which later deltas follow. Files are never changed once
written, so sharing them is safe; but a damaged base file damages every generation that links it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gravity_core.schema import KnowledgeBase
from gravity_core.schema.changes import PARTS, KBChanges
from gravity_core.storage.anchor_vectors import EXPANSION_KIND, VECTOR_KINDS, AnchorVectors
from gravity_core.storage.files import RowReader

__all__ = [
    "BASE",
    "CHANGED",
    "BaseGeneration",
    "DELTA",
    "MAX_SHARE",
    "DeltaIndex",
    "DeltaPlan",
    "GatheredRows",
    "KindDelta",
    "gather",
    "key_order",
    "merged_members",
    "plan_delta",
    "rows_after",
]

#: The file that makes a generation folder a delta over its base.
DELTA = "delta.json"
#: Prefix of the names under which a delta generation links its base's files.
BASE = "base-"
#: Prefix of a delta generation's own files of changed items and rows.
CHANGED = "delta-"
_FORMAT = 1
#: A delta is written while it holds at most this share of its base's bytes (by default). Each save over the
#: same base rewrites the delta so far, so a smaller share writes less per save but a full
#: generation more often; a quarter keeps both below about a third of a full save on average
#: when a save adds a few percent of the KB.
MAX_SHARE = 0.25


@dataclass(frozen=True)
class KindDelta:
    """One vector kind's change since the base: rows ``ids`` (with text ``digests``), ids ``dropped``."""

    ids: list[str]
    digests: list[str]
    dropped: list[str]


@dataclass(frozen=True)
class DeltaIndex:
    """What ``delta.json`` says: the base generation, and the vector kinds that changed."""

    base: int
    kinds: dict[str, KindDelta]

    def to_json(self) -> dict[str, Any]:
        """The plan as ``delta.json`` records it."""
        return {
            "format": _FORMAT,
            "base": self.base,
            "kinds": {
                kind: {"ids": d.ids, "digests": d.digests, "dropped": d.dropped}
                for kind, d in self.kinds.items()
            },
        }

    @classmethod
    def parse(cls, data: Any) -> DeltaIndex:
        """Read ``delta.json``'s JSON.

        Raises:
            ValueError: not a delta index of this format.
        """
        try:
            if data["format"] != _FORMAT:
                raise ValueError(f"delta format {data['format']!r}; this GRAVITY reads format {_FORMAT}")
            base = data["base"]
            if not isinstance(base, int) or isinstance(base, bool) or base < 1:
                raise ValueError(f"base {base!r} is not a generation number")
            kinds = {
                str(kind): KindDelta(
                    [str(i) for i in d["ids"]], [str(x) for x in d["digests"]], [str(i) for i in d["dropped"]]
                )
                for kind, d in data["kinds"].items()
            }
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a delta index: {exc!r}") from exc
        for kind, d in kinds.items():
            if len(d.ids) != len(d.digests):
                raise ValueError(f"kind {kind}: {len(d.ids)} ids but {len(d.digests)} digests")
        return cls(base=base, kinds=kinds)


@dataclass
class DeltaPlan:
    """What a delta generation over ``base`` writes (see the module's docstring)."""

    base: int
    #: The base's files to link (name -> digest from its checksums).
    linked: dict[str, str]
    #: Part -> JSON object of its items new or changed since the base.
    records: dict[str, bytes]
    index: DeltaIndex
    #: Kind -> the rows of ``index.kinds[kind].ids``.
    rows: dict[str, np.ndarray] = field(default_factory=dict)

    def nbytes(self) -> int:
        """The bytes the delta writes: its records and its vector rows."""
        return sum(len(body) for body in self.records.values()) + sum(r.nbytes for r in self.rows.values())


@dataclass(frozen=True)
class BaseGeneration:
    """What a plan needs of the full generation a delta would follow."""

    number: int
    files: dict[str, str]  # name -> digest (its checksums)
    sizes: int  # bytes of its files
    counts: dict[str, int]  # items per part
    orders: dict[str, str]  # per part, the digest of its ids in order (key_order)
    vectors: Mapping[str, Any]  # its vectors.json


def plan_delta(
    kb: KnowledgeBase,
    vectors: AnchorVectors,
    changed: KBChanges,
    base: BaseGeneration,
    earlier: Mapping[str, Mapping[str, bytes]],
    max_share: float = MAX_SHARE,
) -> DeltaPlan | None:
    """The delta of ``kb`` and ``vectors`` over ``base``, or ``None`` when a full generation is due.

    Args:
        kb: the KB to save.
        vectors: its anchor vectors.
        changed: the items changed since the current generation.
        earlier: when the current generation is a delta over ``base``, its items per part
            (id -> JSON): they changed since the base too.
        base: the full generation the delta would follow.
        max_share: the largest delta written, as a share of the base's bytes.
    """
    records: dict[str, bytes] = {}
    for part in PARTS:
        items = getattr(kb, part)
        count = base.counts.get(part)
        if count is None or key_order(itertools.islice(items, count)) != base.orders.get(part):
            return None  # the base's items are not the first ones, in their order
        body = _part_delta(items, getattr(changed, part), earlier.get(part, {}), count)
        if body is None:
            return None
        records[part] = body
    if base.vectors.get("embedder") != vectors.embedder or base.vectors.get("dim") != vectors.dim:
        return None
    plan = DeltaPlan(
        base=base.number,
        linked={name: digest for name, digest in base.files.items() if name != "build.json"},
        records=records,
        index=DeltaIndex(base=base.number, kinds={}),
    )
    for kind in VECTOR_KINDS:
        entry = base.vectors.get("kinds", {}).get(kind) or {"ids": [], "digests": []}
        found = _kind_delta(vectors, kind, entry["ids"], entry["digests"])
        if found is None:
            return None
        if found[0].ids or found[0].dropped:
            plan.index.kinds[kind], plan.rows[kind] = found
    if plan.nbytes() > max_share * base.sizes:
        return None
    return plan


def key_order(keys: Iterable[str]) -> str:
    """A digest of ids in their order (what a generation's checksums keep of each part)."""
    digest = hashlib.blake2b(digest_size=16)
    for key in keys:
        digest.update(key.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def _part_delta(
    items: Mapping[str, Any], changed: Iterable[str], earlier: Mapping[str, bytes], base_count: int
) -> bytes | None:
    """One part's delta as a JSON object, ordered so that updating the base with it gives ``items``' order."""
    raw = dict(earlier)
    for item_id in changed:
        item = items.get(item_id)
        if item is None:
            return None
        raw[item_id] = item.model_dump_json().encode("utf-8")
    new = list(itertools.islice(items, base_count, None))
    if any(item_id not in raw for item_id in new) or any(item_id not in items for item_id in raw):
        return None
    fresh = set(new)
    ordered = [i for i in raw if i not in fresh] + new
    members = (json.dumps(i, ensure_ascii=False).encode("utf-8") + b":" + raw[i] for i in ordered)
    return b"{" + b",".join(members) + b"}"


def _kind_delta(
    vectors: AnchorVectors, kind: str, base_ids: list[str], base_digests: list[str]
) -> tuple[KindDelta, np.ndarray] | None:
    kv = vectors.get(kind)
    if len(kv.digests) != len(kv.ids) or len(base_ids) != len(base_digests):
        return None
    final_at = {row_id: n for n, row_id in enumerate(kv.ids)}
    kept = [row_id for row_id in base_ids if row_id in final_at]
    in_order = kv.ids[: len(kept)] == kept
    if not in_order and kind != EXPANSION_KIND:
        return None
    dropped = [row_id for row_id in base_ids if row_id not in final_at]
    known = set(kept)
    changed = sorted(
        final_at[row_id]
        for row_id, digest in zip(base_ids, base_digests, strict=True)
        if row_id in final_at and kv.digests[final_at[row_id]] != digest
    )
    positions = changed + [n for n, row_id in enumerate(kv.ids) if row_id not in known]
    rows = np.asarray(kv.matrix[positions], dtype=np.float32).reshape(len(positions), vectors.dim)
    ids = [kv.ids[p] for p in positions]
    return KindDelta(ids, [kv.digests[p] for p in positions], dropped), rows


def merged_members(
    base: Iterable[tuple[str, bytes]], delta: Iterable[tuple[str, bytes]]
) -> Iterator[tuple[str, bytes]]:
    """A part's members (id, JSON) with the delta's: changed ones in their place, new ones after."""
    changed = dict(delta)
    for key, raw in base:
        yield key, changed.pop(key, raw)
    yield from changed.items()


def rows_after(
    base_ids: list[str], base_digests: list[str], delta: KindDelta
) -> tuple[list[str], list[str], npt.NDArray[np.intp]]:
    """A kind's ids and digests after ``delta``, and where each row comes from.

    ``source[i] >= 0`` is a row of the base's file, ``source[i] < 0`` row ``~source[i]`` of the
    delta's.
    """
    dropped = set(delta.dropped)
    delta_row = {row_id: n for n, row_id in enumerate(delta.ids)}
    ids: list[str] = []
    digests: list[str] = []
    source: list[int] = []
    for n, row_id in enumerate(base_ids):
        if row_id in dropped:
            continue
        d = delta_row.pop(row_id, None)
        ids.append(row_id)
        if d is None:
            digests.append(base_digests[n] if base_digests else "")
            source.append(n)
        else:
            digests.append(delta.digests[d])
            source.append(~d)
    for row_id, d in delta_row.items():
        ids.append(row_id)
        digests.append(delta.digests[d])
        source.append(~d)
    return ids, digests, np.asarray(source, dtype=np.intp)


def gather(
    base: np.ndarray, tail: np.ndarray, source: npt.NDArray[np.intp], dtype: npt.DTypeLike
) -> np.ndarray:
    """The rows ``source`` names (see :func:`rows_after`), from ``base`` and ``tail``, as one array."""
    out = np.empty((len(source), base.shape[1]), dtype=dtype)
    from_base = source >= 0
    out[from_base] = base[source[from_base]]
    out[~from_base] = tail[~source[~from_base]]
    return out


class GatheredRows:
    """The float32 rows of a delta generation's kind, read on demand from its base's file and its own."""

    def __init__(self, base: RowReader, tail: RowReader, source: npt.NDArray[np.intp]) -> None:
        self._base, self._tail, self._source = base, tail, source
        self.shape: tuple[int, ...] = (len(source), tail.shape[1])

    def read(self, rows: npt.NDArray[np.intp]) -> np.ndarray:
        """The rows asked for, in that order."""
        where = self._source[rows]
        out = np.empty((len(rows), self.shape[1]), dtype=np.float32)
        from_base = where >= 0
        if from_base.any():
            out[from_base] = self._base.read(where[from_base])
        if not from_base.all():
            out[~from_base] = self._tail.read(~where[~from_base])
        return out


def file_sizes(folder: Path, names: Iterable[str]) -> int:
    """Bytes of the files ``names`` in ``folder``."""
    return sum(os.stat(folder / name).st_size for name in names)
