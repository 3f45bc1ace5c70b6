"""After a forget, Chroma keeps nothing of what was forgotten: the sync that follows rebuilds the
collections and compacts the embedded database, so a byte search of every file of its folder (raw,
UTF-16/32, decompressed; vectors as float32, normalised float32 and float16, exact or within
rounding) finds no forgotten id, text, text digest or vector row. A Chroma server's folder is
clean after ``compact_chroma_folder`` on it."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import re
import subprocess
import sys
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gravity_core.build import AnchorBuilder
from gravity_core.build.forget import ForgetRequest
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import AnchorStoreError, ConfigurationError
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.schema import AnchorKind, Utterance
from gravity_core.storage.anchor_vectors import AnchorVectors, KindVectors, anchor_texts
from gravity_core.storage.store import AnchorStore

pytest.importorskip("chromadb")

from gravity_core.query.index import ChromaAnchorIndex  # noqa: E402
from gravity_core.storage.chroma_clients import compact_chroma_folder  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "examples" / "sample_conversation.jsonl"
EMBEDDER = HashingEmbedder(dim=64)
FORGOTTEN_SESSION = "session_2"
TEXT_ENCODINGS = ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")


# -- what was forgotten, and a search for it -------------------------------------------------------


@dataclass
class Forgotten:
    """Needles: strings (ids, words, digests) and vector rows that must not stay anywhere."""

    strings: set[str] = field(default_factory=set)
    rows: list[np.ndarray] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.strings) and bool(self.rows)


def rows_of(vectors: AnchorVectors) -> dict[tuple[str, str], tuple[str, np.ndarray]]:
    """(kind, id) -> (text digest, float32 row) of every anchor row."""
    found: dict[tuple[str, str], tuple[str, np.ndarray]] = {}
    for kind in AnchorKind:
        rows = vectors.get(kind)
        matrix = np.asarray(rows.matrix, dtype=np.float32)
        for n, (anchor_id, digest) in enumerate(zip(rows.ids, rows.digests, strict=True)):
            found[(kind.value, anchor_id)] = (digest, matrix[n].copy())
    return found


def forgotten_between(
    old: dict[tuple[str, str], tuple[str, np.ndarray]],
    after: AnchorVectors,
    texts_before: Iterable[str],
    texts_after: Iterable[str],
) -> Forgotten:
    """Rows gone or rewritten by the forget, ids gone, and words only the forgotten texts hold."""
    new = rows_of(after)
    kept_pairs = {(digest, row.tobytes()) for digest, row in new.values()}
    kept_rows = np.array([row for _, row in new.values()], dtype=np.float32)
    kept_strings = " ".join([*(i for _, i in new), *(d for d, _ in new.values()), *texts_after])
    forgotten = Forgotten()
    for (kind, anchor_id), (digest, row) in old.items():
        if (digest, row.tobytes()) in kept_pairs:
            continue
        forgotten.strings.add(digest)
        # Two texts can embed alike (the hashing embedder ignores order and digits): such a row is kept.
        if not np.any(np.all(np.isclose(kept_rows, row, rtol=1e-5, atol=1e-6), axis=1)):
            forgotten.rows.append(row)
        if (kind, anchor_id) not in new and anchor_id not in kept_strings:
            forgotten.strings.add(anchor_id)
    kept_words = set(re.findall(r"[A-Za-z]{7,}", kept_strings))
    forgotten.strings |= {w for text in texts_before for w in re.findall(r"[A-Za-z]{7,}", text)} - kept_words
    return forgotten


def _contents(path: Path) -> Iterator[bytes]:
    """The file's bytes, and whatever decompresses from any offset that looks like a stream start
    (gzip, bz2, xz, zlib)."""
    data = path.read_bytes()
    yield data
    openers: list[tuple[bytes, Callable[[bytes], bytes]]] = [
        (b"\x1f\x8b", gzip.decompress),
        (b"BZh", bz2.decompress),
        (b"\xfd7zXZ", lzma.decompress),
        (b"\x78\x01", _inflate),
        (b"\x78\x5e", _inflate),
        (b"\x78\x9c", _inflate),
        (b"\x78\xda", _inflate),
    ]
    for magic, opener in openers:
        for match in re.finditer(re.escape(magic), data):
            try:
                inflated = opener(data[match.start() :])
            except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error):
                continue
            yield inflated


def _inflate(data: bytes) -> bytes:
    return zlib.decompressobj().decompress(data)


def _row_forms(row: np.ndarray) -> list[np.ndarray]:
    """The row as stored raw and as Chroma's cosine index stores it (normalised)."""
    norm = float(np.linalg.norm(row))
    assert norm > 0, "a zero row would match any zero-filled page"
    return [row.astype(np.float32), (row / norm).astype(np.float32)]


def _near_rows(data: bytes, rows: list[np.ndarray]) -> int:
    """How many of ``rows`` sit in ``data`` as little-endian float32 within rounding, at any offset."""
    forms = [(form, int(np.argmax(np.abs(form)))) for row in rows for form in _row_forms(row)]
    found = [False] * len(rows)
    for offset in range(4):
        usable = (len(data) - offset) // 4
        if usable <= 0:
            continue
        values = np.frombuffer(data, dtype="<f4", count=usable, offset=offset)
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        for n, (form, pivot) in enumerate(forms):
            if found[n // 2]:
                continue
            target = form[pivot]
            tolerance = 1e-6 + 1e-5 * abs(float(target))
            low = np.searchsorted(ordered, target - tolerance, side="left")
            high = np.searchsorted(ordered, target + tolerance, side="right")
            for position in order[low:high]:
                start = int(position) - pivot
                if start < 0 or start + len(form) > len(values):
                    continue
                if np.allclose(values[start : start + len(form)], form, rtol=1e-5, atol=1e-6):
                    found[n // 2] = True
                    break
    return sum(found)


def leftovers(folder: Path, forgotten: Forgotten) -> list[str]:
    """Every place in ``folder``'s files where a forgotten string or vector row still is."""
    string_needles = {
        (text, encoding): text.encode(encoding) for text in forgotten.strings for encoding in TEXT_ENCODINGS
    }
    exact_rows = [
        (n, form.astype(dtype).tobytes())
        for n, row in enumerate(forgotten.rows)
        for form in _row_forms(row)
        for dtype in ("<f4", ">f4", "<f2")
    ]
    found: list[str] = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        where = str(path.relative_to(folder))
        for data in _contents(path):
            found += [f"{where}: {text!r} ({enc})" for (text, enc), b in string_needles.items() if b in data]
            found += sorted({f"{where}: row {n} (exact)" for n, needle in exact_rows if needle in data})
            near = _near_rows(data, forgotten.rows)
            if near:
                found.append(f"{where}: {near} rows (within rounding)")
    return found


# -- the sample KB, forgotten -------------------------------------------------------------------------


def builder_for(folder: Path, nlp: Any) -> AnchorBuilder:
    store = AnchorStore(folder)
    extractor = OfflineExtractor.kept_in(store.cache_dir, EMBEDDER, pipeline=nlp)
    return AnchorBuilder(extractor, EMBEDDER, store=store)


def texts_of(builder: AnchorBuilder, turns: list[Utterance]) -> list[str]:
    kb = builder.kb
    return [t.text for t in turns] + [text for kind in AnchorKind for text in anchor_texts(kb, kind).values()]


@pytest.fixture
def sample() -> list[Utterance]:
    return load_conversation(SAMPLE)


# The sync after a forget, in a process of its own, as when `gravity forget` ran and then an engine
# (or `gravity query --chroma-path`) syncs: its memory never held the forgotten rows, only the ids
# the sync reads back from Chroma. HNSW files are written from uninitialised memory
# (chroma-core/chroma#7688), so a sync in this test process, whose memory held the sample's rows
# in many tests, could find them there.
SYNC_IN_ITS_OWN_PROCESS = """
import json, sys
from gravity_core.query.index import ChromaAnchorIndex
from gravity_core.storage.store import AnchorStore
index = ChromaAnchorIndex.persistent(sys.argv[1], kb_name=sys.argv[3])
report = index.sync(AnchorStore(sys.argv[2]).load().vectors)
index.close()
print(json.dumps({"purged": report.purged, "deleted": report.deleted}))
"""


@dataclass
class ForgetRun:
    builder: AnchorBuilder
    before: dict[tuple[str, str], tuple[str, np.ndarray]]
    texts_before: list[str]

    def forgotten(self, sample: list[Utterance]) -> Forgotten:
        kept = [u for u in sample if u.session != FORGOTTEN_SESSION]
        after = texts_of(self.builder, kept)
        forgotten = forgotten_between(self.before, self.builder.vectors, self.texts_before, after)
        assert forgotten, "the forget must change something for the search to mean anything"
        return forgotten


def build_and_forget(
    tmp_path: Path, nlp: Any, sample: list[Utterance], index: ChromaAnchorIndex
) -> ForgetRun:
    """Build session by session (a sync after each, as a following engine does), then forget a
    session from the KB (Chroma is not synced yet)."""
    builder = builder_for(tmp_path / "kb", nlp)
    for session in dict.fromkeys(u.session for u in sample):
        builder.add([u for u in sample if u.session == session])
        index.sync(builder.vectors)
    run = ForgetRun(builder, rows_of(builder.vectors), texts_of(builder, sample))
    builder.forget(ForgetRequest(sessions=(FORGOTTEN_SESSION,)))
    return run


def test_after_a_forget_the_embedded_chroma_folder_holds_nothing_of_it(
    tmp_path: Path, nlp: Any, sample: list[Utterance]
) -> None:
    folder = tmp_path / "chroma"
    index = ChromaAnchorIndex.persistent(folder, kb_name="maya")
    run = build_and_forget(tmp_path, nlp, sample, index)
    index.close()
    command = [sys.executable, "-c", SYNC_IN_ITS_OWN_PROCESS, str(folder), str(tmp_path / "kb"), "maya"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["purged"] and report["deleted"] > 0  # the default sync purges: anchors are gone
    forgotten = run.forgotten(sample)
    assert leftovers(folder, forgotten) == []
    after = run.builder.vectors
    index = ChromaAnchorIndex.persistent(folder, kb_name="maya")
    for kind in AnchorKind:  # the index serves every kept anchor
        rows = after.get(kind)
        assert index.count(kind) == len(rows.ids)
        assert set(index.similarities(kind, rows.matrix[:1], rows.ids)) == set(rows.ids)
    assert index.sync(after).writes == 0  # purged and marked current: the next sync writes nothing
    index.close()
    assert leftovers(folder, forgotten) == []


def test_a_sync_in_the_forgetting_process_purges_too(
    tmp_path: Path, nlp: Any, sample: list[Utterance]
) -> None:
    """As `UserKBs.forget` does: the sync right after the forget, in the same process."""
    folder = tmp_path / "chroma"
    index = ChromaAnchorIndex.persistent(folder, kb_name="maya")
    run = build_and_forget(tmp_path, nlp, sample, index)
    report = index.sync(run.builder.vectors, purge=True)
    assert report.purged and report.deleted > 0
    index.close()
    # The log, the tables, free pages and old folders hold nothing; only the new HNSW files'
    # uninitialised capacity could hold bytes of this process's memory (chroma-core/chroma#7688).
    found = leftovers(folder, run.forgotten(sample))
    assert [f for f in found if not f.split("/")[-1].startswith(("data_level0.bin", "length.bin"))] == []


def test_without_the_purge_chroma_keeps_forgotten_ids_and_vectors(
    tmp_path: Path, nlp: Any, sample: list[Utterance]
) -> None:
    """The search is not vacuous: an in-place sync (deletes and upserts) leaves them in the folder."""
    folder = tmp_path / "chroma"
    index = ChromaAnchorIndex.persistent(folder, kb_name="maya")
    run = build_and_forget(tmp_path, nlp, sample, index)
    assert not index.sync(run.builder.vectors, purge=False).purged
    index.close()
    found = leftovers(folder, run.forgotten(sample))
    assert any("chroma.sqlite3" in f and "exact" in f for f in found), found
    assert any("chroma.sqlite3" in f and "(utf-8)" in f for f in found), found


# -- large collections: persisted HNSW files and deleted collections' folders --------------------


def random_vectors(ids: list[str], dim: int = 16, seed: int = 3) -> AnchorVectors:
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((len(ids), dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    digests = [f"digest{n:06d}x" for n in range(len(ids))]
    kinds = {AnchorKind.ENTITY.value: KindVectors(ids=ids, digests=digests, matrix=matrix)}
    return AnchorVectors(embedder="random-16", dim=dim, kinds=kinds)


def keep_rows(vectors: AnchorVectors, keep: list[int]) -> AnchorVectors:
    rows = vectors.get(AnchorKind.ENTITY)
    kept = KindVectors(
        ids=[rows.ids[n] for n in keep], digests=[rows.digests[n] for n in keep], matrix=rows.matrix[keep]
    )
    return AnchorVectors(vectors.embedder, vectors.dim, {AnchorKind.ENTITY.value: kept})


def gone_between(before: AnchorVectors, after: AnchorVectors) -> Forgotten:
    old, new = before.get(AnchorKind.ENTITY), after.get(AnchorKind.ENTITY)
    kept = set(new.ids)
    gone = [n for n, anchor_id in enumerate(old.ids) if anchor_id not in kept]
    return Forgotten(
        strings={s for n in gone for s in (old.ids[n], old.digests[n])}, rows=[old.matrix[n] for n in gone]
    )


def uuid_folders(folder: Path) -> set[str]:
    found = set()
    for path in folder.iterdir():
        try:
            uuid.UUID(path.name)
        except ValueError:
            continue
        found.add(path.name)
    return found


def test_a_large_collection_leaves_no_deleted_vector_in_hnsw_files_or_old_folders(tmp_path: Path) -> None:
    """1,500 rows: Chroma persists the HNSW index (every 1,000 writes), whose files keep deleted
    vectors, and a deleted collection's folder stays; the purge leaves neither."""
    folder = tmp_path / "chroma"
    ids = [f"person-{n:05d}-quokka" for n in range(1500)]
    before = random_vectors(ids)
    index = ChromaAnchorIndex.persistent(folder, kb_name="big")
    index.sync(before)
    folders_before = uuid_folders(folder)
    assert folders_before  # the HNSW index was persisted
    after = keep_rows(before, [n for n in range(1500) if n % 3])
    report = index.sync(after)
    assert report.purged and report.deleted == 500
    assert index.count(AnchorKind.ENTITY) == 1000
    index.close()
    assert leftovers(folder, gone_between(before, after)) == []
    assert not folders_before & uuid_folders(folder)  # the old collections' folders are gone


def test_without_the_purge_the_hnsw_files_keep_deleted_vectors(tmp_path: Path) -> None:
    folder = tmp_path / "chroma"
    before = random_vectors([f"member-{n:05d}-quokka" for n in range(1500)], seed=4)
    index = ChromaAnchorIndex.persistent(folder, kb_name="big")
    index.sync(before)
    after = keep_rows(before, [n for n in range(1500) if n % 3])
    assert not index.sync(after, purge=False).purged
    index.close()
    found = leftovers(folder, gone_between(before, after))
    assert any(f.endswith("(within rounding)") and "data_level0.bin" in f for f in found), found


# -- a purge cut short, readers during a purge, drop ----------------------------------------------


def small_kb(tag: str, seed: int) -> tuple[AnchorVectors, AnchorVectors]:
    """40 rows, of which every other one goes; ids and vectors no other test uses (see below)."""
    before = random_vectors([f"{tag}-{n:03d}-wallaby" for n in range(40)], seed=seed)
    return before, keep_rows(before, list(range(0, 40, 2)))


def test_a_purge_cut_short_is_finished_by_the_next_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chromadb.api.models.Collection import Collection

    from gravity_core.query.index import chroma_index

    folder = tmp_path / "chroma"
    before, after = small_kb("cut", 5)
    index = ChromaAnchorIndex.persistent(folder, kb_name="cut")
    index.sync(before)
    original = Collection.modify

    def no_rename(self: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("name"):
            raise RuntimeError("killed before the new collection took the old one's name")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "modify", no_rename)
    with pytest.raises(AnchorStoreError, match="killed"):
        index.sync(after)
    monkeypatch.setattr(Collection, "modify", original)

    def no_compact(path: Any) -> None:
        raise AnchorStoreError("killed before the compaction", path=str(path))

    monkeypatch.setattr(chroma_index, "compact_chroma_folder", no_compact)
    with pytest.raises(AnchorStoreError, match="compaction"):
        ChromaAnchorIndex.persistent(folder, kb_name="cut").sync(after)
    monkeypatch.undo()

    # Nothing is gone any more between the collections and the KB, yet the next sync purges.
    again = ChromaAnchorIndex.persistent(folder, kb_name="cut")
    report = again.sync(after)
    assert report.purged and report.deleted == 0
    assert again.count(AnchorKind.ENTITY) == 20
    assert not again.sync(after).purged
    for opened in (index, again):
        opened.close()
    assert leftovers(folder, gone_between(before, after)) == []


def test_an_index_holding_the_old_collections_reads_the_new_ones(tmp_path: Path) -> None:
    before, after = small_kb("reader", 7)
    writer = ChromaAnchorIndex.persistent(tmp_path / "chroma", kb_name="shared")
    writer.sync(before)
    reader = ChromaAnchorIndex.persistent(tmp_path / "chroma", kb_name="shared")
    query = before.get(AnchorKind.ENTITY).matrix[:1]
    assert reader.top(AnchorKind.ENTITY, query, 1)[0][0] == "reader-000-wallaby"  # caches the collection
    assert writer.sync(after).purged
    assert reader.top(AnchorKind.ENTITY, query, 1)[0][0] == "reader-000-wallaby"
    assert reader.count(AnchorKind.ENTITY) == 20
    assert reader.similarities(AnchorKind.ENTITY, query, ["reader-001-wallaby"]) == {}
    writer.close()
    reader.close()


def test_explicit_purge_rebuilds_even_when_no_anchor_is_gone(tmp_path: Path) -> None:
    """A forget may only rewrite anchors (a fact of a kept entity): the caller says purge=True."""
    folder = tmp_path / "chroma"
    before, _ = small_kb("rewrite", 8)
    index = ChromaAnchorIndex.persistent(folder, kb_name="rewrite")
    index.sync(before)
    rows = before.get(AnchorKind.ENTITY)
    changed = rows.matrix.copy()
    changed[0] = np.roll(changed[0], 1)
    rewritten = AnchorVectors(
        before.embedder,
        before.dim,
        {
            AnchorKind.ENTITY.value: KindVectors(
                ids=rows.ids, digests=["kiwi-rewritten", *rows.digests[1:]], matrix=changed
            )
        },
    )
    assert not index.sync(rewritten, purge=False).purged  # an add's rewrite: in place
    report = index.sync(before, purge=True)  # back to the old text, told it is a forget
    assert report.purged and report.upserted == 40  # a purge writes every row anew
    index.close()
    assert leftovers(folder, Forgotten(strings={"kiwi-rewritten"}, rows=[changed[0]])) == []


def test_drop_leaves_nothing_of_the_kb_in_the_folder(tmp_path: Path) -> None:
    """The neighbour's collections are made first: HNSW files written later by this process may
    hold the dropped KB's bytes in their uninitialised capacity (chroma-core/chroma#7688), which no
    drop can reach (seen in about half the runs when the neighbour came second)."""
    folder = tmp_path / "chroma"
    before, _ = small_kb("dropped", 11)
    other = random_vectors([f"other-{n:03d}-numbat" for n in range(10)], seed=9)
    neighbour = ChromaAnchorIndex.persistent(folder, kb_name="stays")
    neighbour.sync(other)
    index = ChromaAnchorIndex.persistent(folder, kb_name="gone")
    index.sync(before)
    index.drop()
    assert neighbour.count(AnchorKind.ENTITY) == 10
    index.close()
    neighbour.close()
    everything = Forgotten(
        strings=set(before.get(AnchorKind.ENTITY).ids), rows=list(before.get(AnchorKind.ENTITY).matrix)
    )
    assert leftovers(folder, everything) == []


def test_compact_refuses_a_folder_without_a_chroma_database(tmp_path: Path) -> None:
    with pytest.raises(AnchorStoreError, match="no Chroma database"):
        compact_chroma_folder(tmp_path)
    with pytest.raises(ConfigurationError, match="attempts"):
        compact_chroma_folder(tmp_path, attempts=0)


# -- a Chroma server ------------------------------------------------------------------------------


@pytest.mark.server
def test_a_chroma_server_keeps_free_pages_until_its_folder_is_compacted(
    start_chroma_server: Any,
) -> None:
    """Through a server the purge rebuilds the collections (no log row of a forgotten anchor stays
    in a live collection), but only the server's machine can compact its folder: that is
    ``compact_chroma_folder(--path)``, safe while the server runs."""
    server = start_chroma_server()
    folder = server.log.parent / "db"
    before = random_vectors([f"client-{n:05d}-quokka" for n in range(1500)], seed=6)
    after = keep_rows(before, [n for n in range(1500) if n % 3])
    index = ChromaAnchorIndex.server(server.host, server.port, kb_name="served")
    index.sync(before)
    assert index.sync(after).purged
    gone = gone_between(before, after)
    assert leftovers(folder, gone)  # free pages, and the old collection's HNSW folder
    compact_chroma_folder(folder)
    assert index.count(AnchorKind.ENTITY) == 1000  # the server serves on
    query = after.get(AnchorKind.ENTITY).matrix[:1]
    assert index.top(AnchorKind.ENTITY, query, 1)[0][0] == after.get(AnchorKind.ENTITY).ids[0]
    index.close()
    server.stop()
    assert leftovers(folder, gone) == []
