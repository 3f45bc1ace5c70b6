"""Retrieval by provenance in the integrations: which turns to fetch, what a document holds, and notices.

A host document holds one turn when its id is the turn's utterance id (what GRAVITY's document
and node helpers write), or several when its metadata lists them under :data:`UTTERANCE_IDS_KEY`.
The integrations fetch the turns the policy asks for by id from the host's store and pair what
comes back with the anchors that asked (:func:`~gravity_core.context.provenance.pair_sources`;
:func:`fetch_sources` and :func:`afetch_sources` do both, given the host's fetch).

A host that cannot fetch by id, or that holds none of the ids asked for, is told once per
retriever in the log (:class:`ProvenanceNotices`), and retrieval goes on with the searches alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

from gravity_core.context.policy import ContextPolicy
from gravity_core.context.provenance import UTTERANCE_IDS_KEY, SourceTurn, pair_sources
from gravity_core.query.types import AnchorContext

__all__ = [
    "UTTERANCE_IDS_KEY",
    "ProvenanceNotices",
    "afetch_sources",
    "fetch_sources",
    "held_utterances",
    "source_turns_for",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")


def held_utterances(document_id: str | None, metadata: Mapping[str, Any]) -> list[str]:
    """The utterance ids a host document holds: those its metadata lists, else its own id."""
    listed = metadata.get(UTTERANCE_IDS_KEY)
    if isinstance(listed, str):
        return [part.strip() for part in listed.split(",") if part.strip()]
    if isinstance(listed, list | tuple):
        return [str(part) for part in listed]
    return [document_id] if document_id else []


def source_turns_for(policy: ContextPolicy, context: AnchorContext | None, top_n: int) -> list[SourceTurn]:
    """The turns to fetch for a retrieval of ``top_n`` results (none when the policy places none)."""
    if context is None or not policy.places_sources(top_n):
        return []
    return policy.source_turns(context.sources)


class ProvenanceNotices:
    """Says once per retriever why retrieval by provenance added nothing.

    Args:
        owner: the retriever's name, as the log lines say it.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._told: set[str] = set()
        self._lock = threading.Lock()

    def _once(self, key: str) -> bool:
        with self._lock:
            if key in self._told:
                return False
            self._told.add(key)
            return True

    def cannot_fetch(self, host: str, why: str) -> None:
        """The host cannot hand documents back by id: the searches alone fill the results."""
        if self._once("cannot_fetch"):
            logger.info(
                "%s: %s cannot fetch documents by id (%s); the selected anchors' source turns are not "
                "added, only the searches' hits",
                self.owner,
                host,
                why,
            )

    def paired(
        self,
        turns: Sequence[SourceTurn],
        fetched: Sequence[T],
        holds: Callable[[T], Sequence[str]],
        key: Callable[[T], Hashable],
    ) -> list[tuple[str, T]]:
        """:func:`pair_sources`, warning once when the host held none of the turns asked for."""
        paired = pair_sources(turns, fetched, holds, key)
        if turns and not paired and self._once("none_found"):
            logger.warning(
                "%s: the host holds none of the turns GRAVITY fetched by id (e.g. %r). Index each "
                "turn under its utterance id (the helpers that turn messages into documents or nodes "
                "do), or list the ids a document holds in its metadata under %r, so that the "
                "anchors' source turns can be added; chunks made with turns_per_document=n "
                "(turns_per_node=n) need the same number on the retriever",
                self.owner,
                turns[0].utterance_id,
                UTTERANCE_IDS_KEY,
            )
        return paired


def fetch_sources(
    notices: ProvenanceNotices,
    host: str,
    turns: Sequence[SourceTurn],
    fetch: Callable[[list[str]], Sequence[T]],
    holds: Callable[[T], Sequence[str]],
    key: Callable[[T], Hashable],
) -> list[tuple[str, T]]:
    """The host's documents holding ``turns``, each with its anchor (:meth:`ProvenanceNotices.paired`).

    Args:
        notices: the retriever's notices.
        host: the host's name, as a notice says it.
        turns: the turns to fetch (:func:`source_turns_for`).
        fetch: the host's fetch by id; a ``NotImplementedError`` (its message says why) means the
            host cannot fetch: told once (:meth:`ProvenanceNotices.cannot_fetch`), nothing is added.
        holds: the utterance ids a fetched document holds (:func:`held_utterances`).
        key: what makes two documents the same.
    """
    if not turns:
        return []
    try:
        fetched = fetch([turn.utterance_id for turn in turns])
    except NotImplementedError as error:
        notices.cannot_fetch(host, str(error) or "no fetch by id")
        return []
    return notices.paired(turns, fetched, holds, key)


async def afetch_sources(
    notices: ProvenanceNotices,
    host: str,
    turns: Sequence[SourceTurn],
    fetch: Callable[[list[str]], Awaitable[Sequence[T]]],
    holds: Callable[[T], Sequence[str]],
    key: Callable[[T], Hashable],
) -> list[tuple[str, T]]:
    """Async :func:`fetch_sources`: ``fetch`` is awaited."""
    if not turns:
        return []
    try:
        fetched = await fetch([turn.utterance_id for turn in turns])
    except NotImplementedError as error:
        notices.cannot_fetch(host, str(error) or "no fetch by id")
        return []
    return notices.paired(turns, fetched, holds, key)
