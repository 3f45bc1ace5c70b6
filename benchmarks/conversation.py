"""Synthetic conversations of any length: one-line utterances, sessions of 20 turns, a day apart.

Eight people talk in pairs (the pair changes every session); each turn reports one thing its
speaker did (went running, moved to a city, bought a thing, met someone), drawn with a fixed seed,
so the offline extractor finds entities, events and topics in every batch and a long conversation
keeps touching the same people and topics (the anchors that grow with it).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from gravity_core.schema import Utterance

__all__ = ["synthetic_conversation"]

_PEOPLE = ("Maya", "Jonas", "Priya", "Tomas", "Lena", "Omar", "Ines", "Kofi")
_PLACES = ("Leeds", "Bristol", "York", "Bath", "Hull", "Derby", "Paris", "Lisbon", "Oslo", "Kyoto")
_THINGS = ("a guitar", "a bike", "a puppy", "a book about birds", "new running shoes", "a camera", "a tent")
_DEEDS = (
    "went running",
    "visited {place}",
    "bought {thing}",
    "met {person} in {place}",
    "started a pottery class",
    "adopted {thing}",
    "moved to {place}",
    "finished a marathon",
    "cooked dinner for {person}",
    "read {thing}",
)
TURNS_PER_SESSION = 20


def synthetic_conversation(utterances: int, *, seed: int = 0) -> list[Utterance]:
    """``utterances`` one-line turns, ids ``D<session>:<turn>``."""
    rng = random.Random(seed)
    start = datetime(2023, 1, 1, 9, tzinfo=UTC)
    out = []
    for n in range(utterances):
        session, turn = divmod(n, TURNS_PER_SESSION)
        speaker = _PEOPLE[(session + turn) % 2 + 2 * (session % 4)]
        deed = rng.choice(_DEEDS).format(
            place=rng.choice(_PLACES), thing=rng.choice(_THINGS), person=rng.choice(_PEOPLE)
        )
        out.append(
            Utterance(
                id=f"D{session + 1}:{turn + 1}",
                speaker=speaker,
                text=f"Yesterday I {deed}.",
                session=f"session_{session + 1}",
                timestamp=start + timedelta(days=session, minutes=turn),
            )
        )
    return out
