"""The dialogue units of SGMem: sessions, rounds, turns and sentences, and their parent links.

- A **turn** is one :class:`~gravity_core.schema.Utterance`; its id is the utterance id.
- A **sentence** is a piece of a turn's text split with ``nupunkt`` (no download), plus one
  sentence ``[shared: ...]`` per attachment; its id is ``"<turn id>#<n>"``, ``n`` from 1.
- A **round** is a speaker-change pair inside one session: a run of consecutive turns by one
  speaker A followed by the run of consecutive turns by the next speaker B. The round closes
  when a third run starts (A again, or anyone else). A session that ends after A's run leaves a
  round with A's run only; a monologue is one round. Its id is ``"<session>/r<n>"``, ``n`` from 1.
- A **session** is all turns sharing ``Utterance.session``, in the order they were added.

The rule is applied online, turn by turn, so adding a session's turns in two calls gives exactly
the rounds one call gives. Indices (positions in the lists) are stable: units are only appended.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from gravity_core.errors import AnchorStoreError
from gravity_core.extract.offline.text import split_sentences
from gravity_core.schema import Utterance
from gravity_core.sgmem.config import ChunkGranularity

__all__ = [
    "DialogueUnits",
    "RoundUnit",
    "SentenceUnit",
    "SessionUnit",
    "TurnUnit",
    "sentence_texts",
]


@dataclass(frozen=True)
class SentenceUnit:
    """One sentence: ``turn`` is the index of its turn."""

    id: str
    turn: int
    text: str


@dataclass
class TurnUnit:
    """One utterance with the indices of its sentences, round and session."""

    id: str
    speaker: str
    text: str
    timestamp: datetime
    session: int
    round: int
    sentences: list[int] = field(default_factory=list)

    @property
    def day(self) -> str:
        """The day as written in contexts, e.g. ``8 May 2023``."""
        return f"{self.timestamp.day} {self.timestamp:%B %Y}"


@dataclass
class RoundUnit:
    """A speaker-change pair: ``first`` speaker's run, then ``second`` speaker's run (if any)."""

    id: str
    session: int
    first: str
    second: str | None = None
    turns: list[int] = field(default_factory=list)


@dataclass
class SessionUnit:
    """All turns (and rounds) of one session, in order."""

    id: str
    turns: list[int] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)


def sentence_texts(utterance: Utterance) -> list[str]:
    """The sentences of an utterance: its text split with nupunkt, then one per attachment."""
    texts = [s.text for s in split_sentences(utterance.text)]
    texts.extend(f"[shared: {' '.join(a.split())}]" for a in utterance.attachments if a.strip())
    return texts


class DialogueUnits:
    """The unit tables, append-only, with id lookups and parent links.

    Use :meth:`add_turn` per utterance; it returns the sentences it created and marks the round
    and session it touched (their text changed, so their vectors must be recomputed).
    """

    def __init__(self) -> None:
        self.sessions: list[SessionUnit] = []
        self.rounds: list[RoundUnit] = []
        self.turns: list[TurnUnit] = []
        self.sentences: list[SentenceUnit] = []
        self._session_index: dict[str, int] = {}
        self._turn_index: dict[str, int] = {}
        self._round_index: dict[str, int] = {}
        self._sentence_chunks: dict[ChunkGranularity, npt.NDArray[np.int64]] = {}

    def __contains__(self, utterance_id: object) -> bool:
        return utterance_id in self._turn_index

    def session_index(self, session_id: str) -> int | None:
        """Index of a session id, or None."""
        return self._session_index.get(session_id)

    def turn_index(self, turn_id: str) -> int | None:
        """Index of a turn (utterance) id, or None."""
        return self._turn_index.get(turn_id)

    def round_index(self, round_id: str) -> int | None:
        """Index of a round id, or None."""
        return self._round_index.get(round_id)

    def add_turn(self, utterance: Utterance) -> tuple[int, int, int]:
        """Append one utterance (not already present) as a turn with its sentences.

        Returns:
            ``(turn index, round index, session index)``.
        """
        self.invalidate()
        session_idx = self._session_index.get(utterance.session)
        if session_idx is None:
            session_idx = len(self.sessions)
            self.sessions.append(SessionUnit(id=utterance.session))
            self._session_index[utterance.session] = session_idx
        session = self.sessions[session_idx]
        round_idx = self._round_for(session_idx, utterance.speaker)
        turn_idx = len(self.turns)
        turn = TurnUnit(
            id=utterance.id,
            speaker=utterance.speaker,
            text=utterance.full_text(),
            timestamp=utterance.timestamp,
            session=session_idx,
            round=round_idx,
        )
        for n, text in enumerate(sentence_texts(utterance), start=1):
            turn.sentences.append(len(self.sentences))
            self.sentences.append(SentenceUnit(id=f"{utterance.id}#{n}", turn=turn_idx, text=text))
        self.turns.append(turn)
        self._turn_index[utterance.id] = turn_idx
        session.turns.append(turn_idx)
        self.rounds[round_idx].turns.append(turn_idx)
        return turn_idx, round_idx, session_idx

    def _round_for(self, session_idx: int, speaker: str) -> int:
        """The round a new turn by ``speaker`` joins, opening a new one when the pair is complete."""
        session = self.sessions[session_idx]
        if session.rounds:
            last = self.rounds[session.rounds[-1]]
            if last.second is None:
                if speaker != last.first:
                    last.second = speaker
                return session.rounds[-1]
            if speaker == last.second:
                return session.rounds[-1]
        round_idx = len(self.rounds)
        round_id = f"{session.id}/r{len(session.rounds) + 1}"
        self.rounds.append(RoundUnit(id=round_id, session=session_idx, first=speaker))
        self._round_index[round_id] = round_idx
        session.rounds.append(round_idx)
        return round_idx

    def invalidate(self) -> None:
        """Forget derived arrays (call after changing the tables directly)."""
        self._sentence_chunks.clear()

    def sentence_chunks(self, granularity: ChunkGranularity) -> npt.NDArray[np.int64]:
        """For every sentence, the index of its chunk of ``granularity`` (cached until a change)."""
        cached = self._sentence_chunks.get(granularity)
        if cached is None:
            turns = np.fromiter((s.turn for s in self.sentences), dtype=np.int64, count=len(self.sentences))
            if granularity is ChunkGranularity.TURN:
                cached = turns
            else:
                attr = "round" if granularity is ChunkGranularity.ROUND else "session"
                parent = np.fromiter(
                    (getattr(t, attr) for t in self.turns), dtype=np.int64, count=len(self.turns)
                )
                cached = parent[turns]
            self._sentence_chunks[granularity] = cached
        return cached

    def chunk_count(self, granularity: ChunkGranularity) -> int:
        """Number of chunks of a granularity."""
        return len(self.chunk_list(granularity))

    def chunk_list(self, granularity: ChunkGranularity) -> list[Any]:
        """The units of a granularity (turns, rounds or sessions)."""
        if granularity is ChunkGranularity.TURN:
            return self.turns
        if granularity is ChunkGranularity.ROUND:
            return self.rounds
        return self.sessions

    def chunk_of_turn(self, turn_idx: int, granularity: ChunkGranularity) -> int:
        """Index of the chunk (of ``granularity``) that holds a turn."""
        if granularity is ChunkGranularity.TURN:
            return turn_idx
        turn = self.turns[turn_idx]
        return turn.round if granularity is ChunkGranularity.ROUND else turn.session

    def chunk_turns(self, granularity: ChunkGranularity, chunk_idx: int) -> list[int]:
        """Indices of the turns of a chunk, in order."""
        if granularity is ChunkGranularity.TURN:
            return [chunk_idx]
        return list(self.chunk_list(granularity)[chunk_idx].turns)

    def chunk_id(self, granularity: ChunkGranularity, chunk_idx: int) -> str:
        """The id of a chunk."""
        unit: TurnUnit | RoundUnit | SessionUnit = self.chunk_list(granularity)[chunk_idx]
        return unit.id

    def to_json(self) -> dict[str, Any]:
        """Plain JSON of all units (parents by index, which is stable)."""
        return {
            "sessions": [{"id": s.id, "turns": s.turns, "rounds": s.rounds} for s in self.sessions],
            "rounds": [
                {"id": r.id, "session": r.session, "first": r.first, "second": r.second, "turns": r.turns}
                for r in self.rounds
            ],
            "turns": [
                {
                    "id": t.id,
                    "speaker": t.speaker,
                    "text": t.text,
                    "timestamp": t.timestamp.isoformat(),
                    "session": t.session,
                    "round": t.round,
                    "sentences": t.sentences,
                }
                for t in self.turns
            ],
            "sentences": [{"id": s.id, "turn": s.turn, "text": s.text} for s in self.sentences],
        }

    @classmethod
    def from_json(cls, data: Any, *, path: str | None = None) -> DialogueUnits:
        """Rebuild the tables written by :meth:`to_json`.

        Raises:
            AnchorStoreError: the data is not of that shape or its links are inconsistent.
        """
        units = cls()
        try:
            units.sessions = [
                SessionUnit(s["id"], list(s["turns"]), list(s["rounds"])) for s in data["sessions"]
            ]
            units.rounds = [
                RoundUnit(r["id"], int(r["session"]), r["first"], r["second"], list(r["turns"]))
                for r in data["rounds"]
            ]
            units.turns = [
                TurnUnit(
                    id=t["id"],
                    speaker=t["speaker"],
                    text=t["text"],
                    timestamp=datetime.fromisoformat(t["timestamp"]),
                    session=int(t["session"]),
                    round=int(t["round"]),
                    sentences=list(t["sentences"]),
                )
                for t in data["turns"]
            ]
            units.sentences = [SentenceUnit(s["id"], int(s["turn"]), s["text"]) for s in data["sentences"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise AnchorStoreError(f"malformed SGMem units: {type(exc).__name__}: {exc}", path=path) from exc
        units._session_index = {s.id: i for i, s in enumerate(units.sessions)}
        units._turn_index = {t.id: i for i, t in enumerate(units.turns)}
        units._round_index = {r.id: i for i, r in enumerate(units.rounds)}
        units._check(path)
        return units

    def _check(self, path: str | None) -> None:
        n_sessions, n_rounds, n_turns = len(self.sessions), len(self.rounds), len(self.turns)
        ok = (
            len(self._session_index) == n_sessions
            and len(self._turn_index) == n_turns
            and len(self._round_index) == n_rounds
            and all(0 <= t.session < n_sessions and 0 <= t.round < n_rounds for t in self.turns)
            and all(0 <= s.turn < n_turns for s in self.sentences)
            and all(0 <= r.session < n_sessions for r in self.rounds)
            and all(
                0 <= i < len(self.sentences) and self.sentences[i].turn == n
                for n, t in enumerate(self.turns)
                for i in t.sentences
            )
        )
        if not ok:
            raise AnchorStoreError("SGMem units have duplicate ids or broken parent links", path=path)
