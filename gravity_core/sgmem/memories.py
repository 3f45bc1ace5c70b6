"""Generated memories: a summary, facts and insights per session, made by a chat model.

One request per session (:func:`~gravity_core.prompts.sgmem.build_session_memory_messages`),
answered as :class:`~gravity_core.prompts.sgmem.SessionMemories` through
:func:`~gravity_core.llm.json_call.call_json` (bounded re-ask, optional response cache). Memory ids
are ``"<session>:summary"``, ``"<session>:fact:<n>"`` and ``"<session>:insight:<n>"`` (``n`` from
1). A session's memories carry the digest of its turn ids: when turns are added to the session,
its memories are made again (with a cache, unchanged sessions cost nothing).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gravity_core.errors import AnchorStoreError
from gravity_core.llm.base import ChatModel
from gravity_core.llm.cache import ResponseCache
from gravity_core.llm.json_call import call_json
from gravity_core.prompts.sgmem import SessionMemories, build_session_memory_messages
from gravity_core.schema import Utterance

__all__ = ["Memory", "MemoryGenerator", "MemoryKind", "session_digest"]

logger = logging.getLogger(__name__)


class MemoryKind(StrEnum):
    """The kinds of generated memory."""

    SUMMARY = "summary"
    FACT = "fact"
    INSIGHT = "insight"


@dataclass(frozen=True)
class Memory:
    """One generated memory.

    Attributes:
        id: ``"<session>:summary"``, ``"<session>:fact:<n>"`` or ``"<session>:insight:<n>"``.
        kind: summary, fact or insight.
        text: the memory.
        session: the session it was made from.
        utterance_ids: the utterances it rests on (every turn of the session for a summary).
    """

    id: str
    kind: MemoryKind
    text: str
    session: str
    utterance_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "id": self.id,
            "kind": self.kind.value,
            "text": self.text,
            "session": self.session,
            "utterance_ids": list(self.utterance_ids),
        }

    @classmethod
    def from_json(cls, data: Any, *, path: str | None = None) -> Memory:
        """Read :meth:`to_json` output.

        Raises:
            AnchorStoreError: not of that shape.
        """
        try:
            return cls(
                id=str(data["id"]),
                kind=MemoryKind(data["kind"]),
                text=str(data["text"]),
                session=str(data["session"]),
                utterance_ids=tuple(str(u) for u in data["utterance_ids"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise AnchorStoreError(f"malformed SGMem memory: {type(exc).__name__}: {exc}", path=path) from exc


def session_digest(utterance_ids: Sequence[str]) -> str:
    """Digest of a session's turn ids, in order: memories are stale when it changes."""
    hasher = hashlib.blake2b(digest_size=12)
    for uid in utterance_ids:
        hasher.update(uid.encode("utf-8") + b"\x00")
    return hasher.hexdigest()


class MemoryGenerator:
    """Makes the memories of one session with a chat model.

    Args:
        model: any :class:`~gravity_core.llm.base.ChatModel`.
        cache: optional response cache (rebuilds replay the same answers).
        max_attempts: requests per session at most, re-asks included.
    """

    def __init__(
        self, model: ChatModel, *, cache: ResponseCache | None = None, max_attempts: int = 3
    ) -> None:
        self.model = model
        self.cache = cache
        self.max_attempts = max_attempts

    def generate(self, session: str, utterances: Sequence[Utterance]) -> list[Memory]:
        """The summary, facts and insights of one session.

        Args:
            session: the session id.
            utterances: its utterances, in order.

        Returns:
            The memories; facts and insights cite only ids of this session (others are dropped).

        Raises:
            UnexpectedModelOutput: the model's answer stayed unusable.
        """
        messages = build_session_memory_messages(utterances)
        answer, _ = call_json(
            self.model, messages, SessionMemories, max_attempts=self.max_attempts, cache=self.cache
        )
        known = [u.id for u in utterances]
        allowed = set(known)
        memories: list[Memory] = []
        if answer.summary.strip():
            memories.append(
                Memory(
                    f"{session}:summary", MemoryKind.SUMMARY, answer.summary.strip(), session, tuple(known)
                )
            )
        for kind, items in ((MemoryKind.FACT, answer.facts), (MemoryKind.INSIGHT, answer.insights)):
            n = 0
            for item in items:
                text = " ".join(item.text.split())
                if not text:
                    continue
                n += 1
                sources = tuple(
                    dict.fromkeys(s.strip("[] ") for s in item.sources if s.strip("[] ") in allowed)
                )
                memories.append(Memory(f"{session}:{kind.value}:{n}", kind, text, session, sources))
        logger.debug("session %s: %d memories", session, len(memories))
        return memories
