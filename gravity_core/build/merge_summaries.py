"""Summaries of build batches (the '+Sum' baseline): appended, one record per observation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gravity_core.schema import KnowledgeBase, SummaryObservation, SummaryRecord, Utterance

__all__ = ["merge_summaries"]


def merge_summaries(
    kb: KnowledgeBase, observations: Iterable[SummaryObservation], said: Mapping[str, Utterance]
) -> list[str]:
    """Add each summary as its own record, dated by its earliest source; returns their ids."""
    added: list[str] = []
    for obs in observations:
        number = len(kb.summaries) + 1
        while f"sm-{number:06d}" in kb.summaries:
            number += 1
        record_id = f"sm-{number:06d}"
        kb.summaries[record_id] = SummaryRecord(
            id=record_id,
            session=obs.session,
            date=min(said[s].timestamp for s in obs.sources),
            text=obs.text.strip(),
            sources=list(obs.sources),
        )
        added.append(record_id)
    return added
