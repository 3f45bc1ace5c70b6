"""What merging looks up in the KB, kept across batches so a batch costs what it adds.

Made afresh for every batch, the name index, the known events, the event trails, the topic of
each utterance and the relations still without an entity each cost a pass over the whole KB: a
build of n utterances then took time in n². A builder makes one :class:`MergeIndex` from the KB it
starts from and hands it to every :func:`~gravity_core.build.merge.apply_update`; every answer is
the one an index made afresh from the KB would give (the tests compare the two).

The KB must change only through merges that are given the index (a builder that reads the KB
again from disk makes a new one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gravity_core.build.names import NameIndex, normalize_name
from gravity_core.build.trails import TrailIndex
from gravity_core.schema import EventAnchor, KnowledgeBase, Relation, TopicAnchor

__all__ = ["MergeIndex", "TopicSources", "UnresolvedRelations", "event_key", "what_key"]

_WORDS = re.compile(r"\w+")


def what_key(what: str) -> str:
    """An event's action, case and punctuation ignored."""
    return " ".join(_WORDS.findall(what.casefold()))


def event_key(event: EventAnchor) -> tuple[str, str]:
    """Identity of an event while merging: the utterance it was first reported in, and its action."""
    return (event.sources[0], what_key(event.what))


class TopicSources:
    """Utterance id -> the first topic (in KB order) that cites it."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self._topic_of: dict[str, str] = {}
        self._position: dict[str, int] = {}
        self._seen: dict[str, int] = {}
        for topic in kb.topics.values():
            self.update(topic)

    def update(self, topic: TopicAnchor) -> None:
        """Index the sources ``topic`` gained (a topic's sources only ever grow, at the end)."""
        position = self._position.setdefault(topic.id, len(self._position))
        start = self._seen.get(topic.id, 0)
        for source in topic.sources[start:]:
            held = self._topic_of.get(source)
            if held is None or (held != topic.id and self._position[held] > position):
                self._topic_of[source] = topic.id
        self._seen[topic.id] = len(topic.sources)

    def get(self, source: str) -> str | None:
        """The topic of ``source``, if a topic cites it."""
        return self._topic_of.get(source)

    def __contains__(self, source: object) -> bool:
        return source in self._topic_of

    def __getitem__(self, source: str) -> str:
        return self._topic_of[source]


class UnresolvedRelations:
    """Relations whose object is no entity yet, by the normalized object name."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self._waiting: dict[str, list[tuple[str, Relation]]] = {}
        for entity in kb.entities.values():
            self.add(entity.id, entity.relations)

    def add(self, entity_id: str, relations: Iterable[Relation]) -> None:
        """Wait for the objects of those of ``relations`` that have none."""
        for relation in relations:
            if relation.object_id is None:
                self._waiting.setdefault(normalize_name(relation.object), []).append((entity_id, relation))

    def resolve(self, names: NameIndex, keys: Iterable[str]) -> set[str]:
        """Give an object id to the waiting relations on ``keys`` that ``names`` now resolves.

        Returns:
            The ids of the entities whose relations changed.
        """
        changed: set[str] = set()
        for key in keys:
            waiting = self._waiting.get(key)
            if not waiting:
                continue
            still: list[tuple[str, Relation]] = []
            for entity_id, relation in waiting:
                if relation.object_id is None:
                    relation.object_id = names.find(relation.object)
                if relation.object_id is None:
                    still.append((entity_id, relation))
                else:
                    changed.add(entity_id)
            if still:
                self._waiting[key] = still
            else:
                del self._waiting[key]
        return changed


class MergeIndex:
    """The lookups of every merge step, made once from a KB and kept up to date by the merges."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.names = NameIndex(kb)
        self.events: dict[tuple[str, str], EventAnchor] = {event_key(e): e for e in kb.events.values()}
        self.trails = TrailIndex(kb)
        self.topics = TopicSources(kb)
        self.relations = UnresolvedRelations(kb)
