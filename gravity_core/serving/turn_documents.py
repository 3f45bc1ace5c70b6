"""What a host document of conversation turns holds, as GRAVITY's document and node helpers write it.

By default one document per turn, under the utterance id (the id every anchor's provenance names),
so the integrations can fetch a selected anchor's source turns by id. A host that indexes chunks of
several turns instead takes :func:`turn_chunks`: each chunk lists the turns it holds under
:data:`~gravity_core.context.provenance.UTTERANCE_IDS_KEY`, and :class:`ChunkIds` gives a retriever
the id of the chunk holding each turn, from the KB's own utterances. LangChain's
``documents_from_utterances`` and LlamaIndex's ``nodes_from_utterances`` both write these.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gravity_core.context.provenance import UTTERANCE_IDS_KEY
from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.schema import Utterance

if TYPE_CHECKING:
    from gravity_core.query.state import KBSnapshot

__all__ = [
    "ChunkIds",
    "TurnChunk",
    "chunk_ids_by_utterance",
    "turn_chunks",
    "turn_metadata",
    "turn_text",
]


def turn_text(utterance: Utterance) -> str:
    """``"<speaker>: <text>"``, attachment captions included."""
    return f"{utterance.speaker}: {utterance.full_text()}"


def turn_metadata(utterance: Utterance) -> dict[str, str]:
    """``speaker``, ``session``, ``id`` and ``date`` (ISO day): scalars, so every store keeps them."""
    return {
        "speaker": utterance.speaker,
        "session": utterance.session,
        "id": utterance.id,
        "date": utterance.day.isoformat(),
    }


@dataclass(frozen=True)
class TurnChunk:
    """One host document of consecutive turns of a session (:func:`turn_chunks`).

    Attributes:
        id: the document's id: the utterance id for a chunk of one turn, else
            ``"<first utterance id>+<turns per chunk>"``.
        text: each turn's :func:`turn_text`, one per line.
        metadata: scalars only (every store keeps them). One turn: :func:`turn_metadata`. Several:
            ``session``, ``date`` (the first turn's ISO day), ``id``, ``speakers`` (comma-separated,
            each once) and :data:`~gravity_core.context.provenance.UTTERANCE_IDS_KEY` (the utterance
            ids, comma-separated).
        utterance_ids: the turns it holds, in order.
    """

    id: str
    text: str
    metadata: dict[str, str]
    utterance_ids: tuple[str, ...]


def _checked(turns_per_chunk: int) -> int:
    if isinstance(turns_per_chunk, bool) or not isinstance(turns_per_chunk, int) or turns_per_chunk < 1:
        raise ConfigurationError(
            "the turns per document (turns_per_document, turns_per_node) must be an integer of at "
            f"least 1, got {turns_per_chunk!r}"
        )
    return turns_per_chunk


def _runs(utterances: Iterable[Utterance], turns_per_chunk: int) -> list[list[Utterance]]:
    """Each session's turns in the given order, cut every ``turns_per_chunk``; ordered by first turn.

    A session's turns need not be contiguous in ``utterances``: a session's chunks depend on its
    own turns only, so the KB's utterances (in their build order) give the ids the host holds.
    """
    open_runs: dict[str, list[Utterance]] = {}
    runs: list[list[Utterance]] = []
    for utterance in utterances:
        run = open_runs.get(utterance.session)
        if run is None or len(run) == turns_per_chunk:
            run = []
            open_runs[utterance.session] = run
            runs.append(run)
        run.append(utterance)
    return runs


def _chunk_id(run: Sequence[Utterance], turns_per_chunk: int) -> str:
    # Named by the run's first turn and the run length it was cut at, not its current length: the
    # session's last chunk keeps its id as new turns fill it, so indexing it again replaces it.
    return run[0].id if turns_per_chunk == 1 else f"{run[0].id}+{turns_per_chunk}"


def turn_chunks(utterances: Iterable[Utterance], turns_per_chunk: int) -> list[TurnChunk]:
    """The turns as host documents of at most ``turns_per_chunk`` consecutive turns of one session.

    Each session's turns are taken in the given order and cut every ``turns_per_chunk`` turns (the
    last chunk may be shorter); chunks come in the order of their first turn. Pass a session's
    turns from its first one each time (e.g. the whole history): the chunks' ids then stay the
    same as the session grows, and a store's upsert replaces the last chunk with its longer self.
    ``turns_per_chunk=1`` gives one document per turn under its utterance id, with
    :func:`turn_metadata`.

    Raises:
        ConfigurationError: ``turns_per_chunk`` is not an integer of at least 1.
        InputDataError: with several turns per chunk, an utterance id holds a comma (the ids are
            listed comma-separated).
    """
    per_chunk = _checked(turns_per_chunk)
    chunks: list[TurnChunk] = []
    for run in _runs(utterances, per_chunk):
        if per_chunk == 1:
            (turn,) = run
            chunks.append(TurnChunk(turn.id, turn_text(turn), turn_metadata(turn), (turn.id,)))
            continue
        for turn in run:
            if "," in turn.id:
                raise InputDataError(
                    f"a document of several turns lists their ids comma-separated under "
                    f"{UTTERANCE_IDS_KEY!r}, so an id cannot hold a comma",
                    record=turn.id,
                )
        chunk_id = _chunk_id(run, per_chunk)
        ids = tuple(turn.id for turn in run)
        metadata = {
            "session": run[0].session,
            "date": run[0].day.isoformat(),
            "id": chunk_id,
            "speakers": ",".join(dict.fromkeys(turn.speaker for turn in run)),
            UTTERANCE_IDS_KEY: ",".join(ids),
        }
        chunks.append(TurnChunk(chunk_id, "\n".join(turn_text(turn) for turn in run), metadata, ids))
    return chunks


def chunk_ids_by_utterance(utterances: Iterable[Utterance], turns_per_chunk: int) -> dict[str, str]:
    """Utterance id -> the id of the :func:`turn_chunks` document holding it (no text is made).

    Raises:
        ConfigurationError: ``turns_per_chunk`` is not an integer of at least 1.
    """
    per_chunk = _checked(turns_per_chunk)
    return {turn.id: _chunk_id(run, per_chunk) for run in _runs(utterances, per_chunk) for turn in run}


class ChunkIds:
    """The host's document ids of utterance ids, for a host indexed with :func:`turn_chunks`.

    A retrieval by provenance asks for utterance ids; over a host of chunks it asks for the ids
    of the chunks holding them, read from the KB's own utterances (:func:`chunk_ids_by_utterance`,
    kept until the KB served changes). Safe to share between threads.

    Args:
        turns_per_chunk: the ``turns_per_chunk`` the host's documents were made with (1: each
            document is one turn, under its utterance id; the ids are passed through).

    Raises:
        ConfigurationError: ``turns_per_chunk`` is not an integer of at least 1.
    """

    def __init__(self, turns_per_chunk: int) -> None:
        self.turns_per_chunk = _checked(turns_per_chunk)
        self._lock = threading.Lock()
        # The snapshot the ids were read from (weakly: an old KB is not kept alive) and its count.
        self._read: tuple[weakref.ref[KBSnapshot], int] | None = None
        self._ids: dict[str, str] = {}

    def document_ids(self, snapshot: KBSnapshot, utterance_ids: Sequence[str]) -> list[str]:
        """The ids of the documents holding ``utterance_ids``, each once, in order of first need.

        An id the KB does not hold is passed through.

        Args:
            snapshot: the KB served (``engine.snapshot``), whose utterances the host indexed.
            utterance_ids: the turns to fetch.
        """
        if self.turns_per_chunk == 1:
            return list(dict.fromkeys(utterance_ids))
        mapping = self._mapping(snapshot)
        return list(dict.fromkeys(mapping.get(u, u) for u in utterance_ids))

    def _mapping(self, snapshot: KBSnapshot) -> dict[str, str]:
        utterances = snapshot.kb.utterances
        # Each KB version an engine serves is a new snapshot; the count also catches a KB object
        # grown in place under an engine that does not follow it.
        count = len(utterances)
        with self._lock:
            read = self._read
            if read is not None and read[0]() is snapshot and read[1] == count:
                return self._ids
        ids = chunk_ids_by_utterance(utterances.values(), self.turns_per_chunk)
        with self._lock:
            self._read, self._ids = (weakref.ref(snapshot), count), ids
        return ids
