"""Counts that describe a KB, as shown by ``gravity stats``."""

from __future__ import annotations

from typing import Any

from gravity_core.build.builder import batch_label
from gravity_core.schema import KnowledgeBase

__all__ = ["failed_batch_rows", "kb_stats"]


def kb_stats(kb: KnowledgeBase) -> dict[str, int]:
    """Anchor counts and coverage figures of ``kb``."""
    topic_spans = [len(t.sessions) for t in kb.topics.values()]
    return {
        "utterances": len(kb.utterances),
        "sessions": len(kb.sessions()),
        "entities": len(kb.entities),
        "speakers": sum(1 for e in kb.entities.values() if e.is_speaker),
        "attributes": sum(len(e.attributes) for e in kb.entities.values()),
        "relations": sum(len(e.relations) for e in kb.entities.values()),
        "state_transitions": sum(len(e.transitions) for e in kb.entities.values()),
        "events": len(kb.events),
        "events_with_date": sum(1 for e in kb.events.values() if e.when is not None and e.when.resolved),
        "events_dated_by_phrase": sum(
            1
            for e in kb.events.values()
            if e.when is not None and e.when.resolved and e.when.basis == "phrase"
        ),
        "topics": len(kb.topics),
        "topics_multi_session": sum(1 for n in topic_spans if n >= 2),
        "max_topic_sessions": max(topic_spans, default=0),
        "summaries": len(kb.summaries),
        "failed_batches": len(kb.build.failed_batches),
    }


def failed_batch_rows(kb: KnowledgeBase) -> list[dict[str, Any]]:
    """One row per batch recorded as failed: id (``first..last`` utterance), size, when, why, answer."""
    return [
        {
            "id": batch_label(failed.utterance_ids),
            "utterances": len(failed.utterance_ids),
            "failed_at": failed.failed_at.isoformat(),
            "reason": failed.reason,
            "raw_output": failed.raw_output,
        }
        for failed in kb.build.failed_batches
    ]
