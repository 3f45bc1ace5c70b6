"""A KB turned into the JSON payload the explorer page renders.

The page does no date arithmetic of its own: every date arrives as a display label plus, where
the page places it on an axis, a day number (days since 1970-01-01). Each anchor also carries
``search``, the lower-cased text the page's search box matches; :func:`matches` is the same
rule in Python, so tests can predict what the page shows for a query.
"""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime
from typing import Any

from gravity_core.build.stats import kb_stats
from gravity_core.schema import (
    EntityAnchor,
    EventAnchor,
    KnowledgeBase,
    StateTransition,
    TimeRef,
    TopicAnchor,
)

__all__ = [
    "MAX_CO_OCCURRENCES",
    "entity_search_text",
    "event_search_text",
    "explorer_payload",
    "matches",
    "topic_search_text",
]

MAX_CO_OCCURRENCES = 30
"""Co-occurring entities kept per entity (the most frequent): enough for the profile and the graph."""

_EPOCH = date(1970, 1, 1)


def matches(query: str, search_text: str) -> bool:
    """Whether an anchor with ``search_text`` passes the page's search box holding ``query``.

    Every whitespace-separated term of the query must occur in the text, case-insensitively.
    """
    return all(term in search_text for term in query.lower().split())


def entity_search_text(entity: EntityAnchor) -> str:
    """What the search box matches for an entity: name, aliases, attribute names and values."""
    parts = [entity.name, *entity.aliases]
    for attribute in entity.attributes:
        parts += [attribute.name, attribute.value]
    return _search_text(parts)


def event_search_text(event: EventAnchor) -> str:
    """What the search box matches for an event: who, what, where, outcome."""
    return _search_text([*event.who, event.what, event.where or "", event.outcome or ""])


def topic_search_text(topic: TopicAnchor) -> str:
    """What the search box matches for a topic: its label and keywords."""
    return _search_text([topic.label, *topic.keywords])


def explorer_payload(kb: KnowledgeBase, *, title: str) -> dict[str, Any]:
    """The JSON-ready data of the explorer page for ``kb``."""
    session_days = _session_days(kb)
    events_of_entity: dict[str, list[str]] = {}
    events_of_topic: dict[str, list[str]] = {}
    for event in kb.events.values():
        for entity_id in dict.fromkeys(event.who_ids):
            events_of_entity.setdefault(entity_id, []).append(event.id)
        if event.topic_id:
            events_of_topic.setdefault(event.topic_id, []).append(event.id)
    entities = [_entity(e, kb, events_of_entity.get(e.id, [])) for e in kb.entities.values()]
    events = [_event(e, kb) for e in kb.events.values()]
    topics = [_topic(t, events_of_topic.get(t.id, [])) for t in kb.topics.values()]
    cited = _cited(entities, events, topics)
    return {
        "title": title,
        "stats": kb_stats(kb),
        "build": {"extractor": kb.build.extractor, "model": kb.build.model, "embedder": kb.build.embedder},
        "sessions": [
            {"id": session, "date": _day_label(day), "day": _day_number(day), "index": index}
            for index, (session, day) in enumerate(session_days.items())
        ],
        "entities": entities,
        "events": events,
        "topics": topics,
        "utterances": {
            u.id: {
                "speaker": u.speaker,
                "session": u.session,
                "date": _time_label(u.timestamp),
                "text": u.full_text(),
            }
            for u in kb.utterances.values()
            if u.id in cited
        },
    }


def _entity(entity: EntityAnchor, kb: KnowledgeBase, event_ids: list[str]) -> dict[str, Any]:
    co = Counter({k: n for k, n in entity.co_occurrence.items() if k in kb.entities and k != entity.id})
    return {
        "id": entity.id,
        "name": entity.name,
        "aliases": entity.aliases,
        "type": entity.type.value,
        "speaker": entity.is_speaker,
        "mentions": entity.mentions,
        "first_seen": _time_label(entity.first_seen),
        "last_seen": _time_label(entity.last_seen),
        "attributes": [
            {
                "name": a.name,
                "value": a.value,
                "confidence": round(a.confidence, 3),
                "current": a.current,
                "exclusive": a.exclusive,
                "mentions": a.mentions,
                "first_seen": _time_label(a.first_seen),
                "last_seen": _time_label(a.last_seen),
                "sources": a.sources,
            }
            for a in entity.attributes
        ],
        "relations": [
            {
                "relation": r.relation,
                "object": r.object,
                "object_id": r.object_id if r.object_id in kb.entities else None,
                "time": r.time.label() if r.time is not None else None,
                "confidence": round(r.confidence, 3),
                "sources": r.sources,
            }
            for r in entity.relations
        ],
        "transitions": [_transition(t) for t in entity.transitions],
        "co": [[other, n] for other, n in co.most_common(MAX_CO_OCCURRENCES)],
        "events": event_ids,
        "search": entity_search_text(entity),
    }


def _transition(transition: StateTransition) -> dict[str, Any]:
    return {
        "attribute": transition.attribute,
        "old": transition.old,
        "new": transition.new,
        "when": _time_label(transition.when),
        "sources": transition.sources,
    }


def _event(event: EventAnchor, kb: KnowledgeBase) -> dict[str, Any]:
    start = event.occurred()
    end = event.when.end if event.when is not None and event.when.end is not None else start
    return {
        "id": event.id,
        "who": event.who,
        "who_ids": [i for i in event.who_ids if i in kb.entities],
        "what": event.what,
        "where": event.where,
        "outcome": event.outcome,
        "when": _time_ref(event.when),
        "date": event.when.label()
        if event.when is not None and event.when.resolved
        else f"mentioned {_day_label(start)}",
        "start_day": _day_number(start),
        "end_day": _day_number(end),
        "said_at": _time_label(event.said_at),
        "session": event.session,
        "topic_id": event.topic_id if event.topic_id in kb.topics else None,
        "trails": [{"trail": link.trail, "prev": link.prev, "next": link.next} for link in event.trails],
        "sources": event.sources,
        "search": event_search_text(event),
    }


def _time_ref(when: TimeRef | None) -> dict[str, Any] | None:
    if when is None:
        return None
    return {
        "raw": when.raw,
        "label": when.label(),
        "start": when.start.isoformat() if when.start else None,
        "end": when.end.isoformat() if when.end else None,
        "granularity": when.granularity.value if when.granularity else None,
        "basis": when.basis,
        "reference": when.reference.isoformat() if when.reference else None,
    }


def _topic(topic: TopicAnchor, event_ids: list[str]) -> dict[str, Any]:
    return {
        "id": topic.id,
        "label": topic.label,
        "keywords": topic.keywords,
        "participants": topic.participants,
        "sessions": topic.sessions,
        "arc": [
            {"session": s.session, "date": _time_label(s.date), "summary": s.summary, "sources": s.sources}
            for s in topic.arc
        ],
        "key_facts": [{"text": f.text, "sources": f.sources} for f in topic.key_facts],
        "events": event_ids,
        "search": topic_search_text(topic),
    }


def _session_days(kb: KnowledgeBase) -> dict[str, date]:
    first: dict[str, date] = {}
    for utterance in kb.utterances.values():
        first.setdefault(utterance.session, utterance.day)
    return first


def _cited(
    entities: list[dict[str, Any]], events: list[dict[str, Any]], topics: list[dict[str, Any]]
) -> set[str]:
    """Utterance ids the page can show as provenance (an entity's bare mentions are only counted)."""
    cited: set[str] = set()
    for entity in entities:
        for part in ("attributes", "relations", "transitions"):
            for item in entity[part]:
                cited.update(item["sources"])
    for event in events:
        cited.update(event["sources"])
    for topic in topics:
        for item in (*topic["arc"], *topic["key_facts"]):
            cited.update(item["sources"])
    return cited


def _search_text(parts: list[str]) -> str:
    # One field per line: a query term (no whitespace) can never match across two fields.
    return "\n".join(p for p in parts if p).lower()


def _day_number(day: date) -> int:
    return (day - _EPOCH).days


def _day_label(day: date) -> str:
    return f"{day.day} {day:%b %Y}"


def _time_label(moment: datetime) -> str:
    return f"{moment.day} {moment:%b %Y %H:%M}"
