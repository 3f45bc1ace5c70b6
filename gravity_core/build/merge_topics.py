"""Merge rules for topic observations: arcs extend across sessions, one snapshot per session."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gravity_core.build.merge_index import TopicSources
from gravity_core.schema import ArcSnapshot, Fact, KnowledgeBase, TopicAnchor, TopicObservation, Utterance

__all__ = ["assign_event_topics", "merge_topics"]

_MAX_KEYWORDS = 10


def _fact_sources(fact: str, candidates: list[str], said: Mapping[str, Utterance]) -> list[str]:
    """The utterances that say ``fact`` verbatim, else all the observation's sources.

    A fact may quote its speaker first ("Nate: The tank is big enough now"), as the offline
    extractor writes them, and may be cut short with "…".
    """
    needle = fact.strip().removesuffix("…").strip().casefold()[:80]

    def says(source: str) -> bool:
        utterance = said[source]
        quoted = needle.removeprefix(f"{utterance.speaker.casefold()}: ")
        return bool(quoted) and quoted in utterance.full_text().casefold()

    exact = [s for s in candidates if says(s)]
    return exact or list(candidates)


def merge_topics(
    kb: KnowledgeBase,
    observations: Iterable[TopicObservation],
    said: Mapping[str, Utterance],
    sources: TopicSources | None = None,
) -> list[str]:
    """Merge topic observations into ``kb``; returns the ids of topics touched (new ones in the order made).

    An observation extends the topic it names by id, else a topic with the same label
    (case-insensitive), else it opens a new topic. ``sources``, the builder's index of the topic
    of each utterance, learns the topics' new sources.
    """
    by_label = {t.label.casefold(): t.id for t in kb.topics.values()}
    touched: dict[str, None] = {}
    for obs in observations:
        topic_id = obs.topic_id if obs.topic_id in kb.topics else by_label.get(obs.label.casefold())
        if topic_id is None:
            number = len(kb.topics) + 1
            while f"tp-{number:04d}" in kb.topics:
                number += 1
            topic_id = f"tp-{number:04d}"
            kb.topics[topic_id] = TopicAnchor(id=topic_id, label=obs.label.strip())
            by_label[obs.label.casefold()] = topic_id
        _extend(kb.topics[topic_id], obs, said)
        if sources is not None:
            sources.update(kb.topics[topic_id])
        touched.setdefault(topic_id, None)
    return list(touched)


def _extend(topic: TopicAnchor, obs: TopicObservation, said: Mapping[str, Utterance]) -> None:
    sources = [s for s in obs.sources if s in said]
    topic.keywords = list(dict.fromkeys([*topic.keywords, *obs.keywords]))[:_MAX_KEYWORDS]
    topic.participants = list(dict.fromkeys([*topic.participants, *obs.participants]))
    topic.sources = list(dict.fromkeys([*topic.sources, *sources]))
    snapshot = next((s for s in topic.arc if s.session == obs.session), None)
    if snapshot is None:
        topic.arc.append(
            ArcSnapshot(
                session=obs.session,
                date=min(said[s].timestamp for s in sources),
                summary=obs.summary,
                sources=sources,
            )
        )
        topic.arc.sort(key=lambda s: (s.date, s.session))
    else:
        if obs.summary not in snapshot.summary:
            snapshot.summary = f"{snapshot.summary} / {obs.summary}"
        snapshot.sources = list(dict.fromkeys([*snapshot.sources, *sources]))
    topic.sessions = list(dict.fromkeys(s.session for s in topic.arc))
    known = {f.text.casefold() for f in topic.key_facts}
    for fact in obs.facts:
        if fact.casefold() not in known:
            topic.key_facts.append(Fact(text=fact, sources=_fact_sources(fact, sources, said)))
            known.add(fact.casefold())


def assign_event_topics(
    kb: KnowledgeBase, event_ids: Iterable[str], sources: TopicSources | None = None
) -> None:
    """Give events the first topic (in KB order) whose sources include one of the event's sources.

    ``sources``: the builder's index of the topic of each utterance (made from ``kb`` if not given).
    """
    topic_of = sources if sources is not None else TopicSources(kb)
    for event_id in event_ids:
        event = kb.events[event_id]
        if event.topic_id is None:
            event.topic_id = next((topic_of[s] for s in event.sources if s in topic_of), None)
