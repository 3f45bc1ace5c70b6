"""Merge rules for entity observations.

- The same value said again reinforces the attribute: confidence becomes ``1 - (1-a)(1-b)``,
  mentions and sources grow.
- A different value of an exclusive attribute (one that holds one value at a time, such as
  occupation or city) is recorded as a state transition; the old value stays, marked not current.
  Information older than the current value is kept as history without a transition.
- Relations reinforce on the same (type, object); a relation's object becomes an entity of its own
  when the extractor gave its type.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from itertools import combinations

from gravity_core.build.merge_index import MergeIndex
from gravity_core.build.names import normalize_name, normalize_value, slugify
from gravity_core.schema import (
    Attribute,
    AttributeObservation,
    EntityAnchor,
    EntityObservation,
    EntityType,
    KnowledgeBase,
    Relation,
    RelationObservation,
    StateTransition,
    Utterance,
)
from gravity_core.schema.changes import KBChanges

__all__ = ["merge_entities"]

_DECLARED_TYPES = frozenset({EntityType.PERSON, EntityType.PET})


def _combine(a: float, b: float) -> float:
    return round(1.0 - (1.0 - a) * (1.0 - b), 4)


def _union(old: list[str], new: list[str]) -> list[str]:
    return list(dict.fromkeys([*old, *new]))


class _EntityMerger:
    def __init__(self, kb: KnowledgeBase, said: Mapping[str, Utterance], index: MergeIndex) -> None:
        self.kb = kb
        self.said = said
        self.index = index.names
        self.touched: dict[str, None] = {}
        self.new_relations: list[tuple[str, Relation]] = []

    def when(self, sources: list[str]) -> datetime:
        return min(self.said[s].timestamp for s in sources)

    def latest(self, sources: list[str]) -> datetime:
        return max(self.said[s].timestamp for s in sources)

    def entity_for(
        self, name: str, etype: EntityType, sources: list[str], *, declared: bool = False
    ) -> EntityAnchor:
        """The entity named ``name``, made if new.

        A known entity's type changes only from 'other', or when ``declared`` by a relation to a
        person or pet ("my dog Biscuit" after "Biscuit" alone was taken for a place).
        """
        found = self.index.find(name)
        if found is not None:
            entity = self.kb.entities[found]
            self.touched.setdefault(entity.id, None)
            declares = declared and etype in _DECLARED_TYPES and not entity.is_speaker
            retype = entity.type is EntityType.OTHER or declares
            if retype and etype is not EntityType.OTHER and entity.type is not etype:
                entity.type = etype
                self.index.add(entity)  # a person's first name finds it now, or no longer
            return entity
        base = slugify(name)
        entity_id, n = base, 2
        while entity_id in self.kb.entities:
            entity_id, n = f"{base}-{n}", n + 1
        when = self.when(sources)
        entity = EntityAnchor(id=entity_id, name=name.strip(), type=etype, first_seen=when, last_seen=when)
        self.kb.entities[entity_id] = entity
        self.index.add(entity)
        self.touched.setdefault(entity.id, None)
        return entity

    def observe(self, obs: EntityObservation) -> EntityAnchor:
        entity = self.entity_for(obs.name, obs.type, obs.sources)
        entity.is_speaker = entity.is_speaker or obs.is_speaker
        for alias in obs.aliases:
            known = {normalize_name(n) for n in (entity.name, *entity.aliases)}
            if normalize_name(alias) not in known:
                entity.aliases.append(alias)
                self.index.add(entity)
        new_sources = [s for s in obs.sources if s not in entity.sources]
        entity.mentions += len(new_sources)
        entity.sources.extend(new_sources)
        entity.first_seen = min(entity.first_seen, self.when(obs.sources))
        entity.last_seen = max(entity.last_seen, self.latest(obs.sources))
        for attr in obs.attributes:
            self.attribute(entity, attr)
        for rel in obs.relations:
            self.relation(entity, rel)
        return entity

    def attribute(self, entity: EntityAnchor, obs: AttributeObservation) -> None:
        when, latest = self.when(obs.sources), self.latest(obs.sources)
        same_name = [a for a in entity.attributes if a.name == obs.name]
        exclusive = obs.exclusive or any(a.exclusive for a in same_name)
        value_key = normalize_value(obs.value)
        match = next((a for a in same_name if normalize_value(a.value) == value_key), None)
        current = [a for a in same_name if a.current and a is not match] if exclusive else []
        newer = all(when >= a.last_seen for a in current)
        if match is not None:
            match.confidence = _combine(match.confidence, obs.confidence)
            match.mentions += 1
            match.first_seen = min(match.first_seen, when)
            match.last_seen = max(match.last_seen, latest)
            match.sources = _union(match.sources, obs.sources)
            match.exclusive = exclusive
            target = match
            if match.current and not current:
                return
        else:
            target = Attribute(
                name=obs.name,
                value=obs.value.strip(),
                confidence=obs.confidence,
                exclusive=exclusive,
                current=True,
                first_seen=when,
                last_seen=latest,
                sources=list(obs.sources),
            )
            entity.attributes.append(target)
        if not exclusive:
            return
        if not newer:
            target.current = target.current and match is not None and match.current
            return
        for old in current:
            old.current = False
            entity.transitions.append(
                StateTransition(
                    attribute=obs.name, old=old.value, new=target.value, when=when, sources=list(obs.sources)
                )
            )
        target.current = True

    def relation(self, entity: EntityAnchor, obs: RelationObservation) -> None:
        if obs.object_type is not None:
            target = self.entity_for(obs.object, obs.object_type, obs.sources, declared=True)
            fresh = [s for s in obs.sources if s not in target.sources]
            target.mentions += len(fresh)
            target.sources.extend(fresh)
        key = (obs.relation, normalize_name(obs.object))
        when, latest = self.when(obs.sources), self.latest(obs.sources)
        for rel in entity.relations:
            if (rel.relation, normalize_name(rel.object)) == key:
                rel.confidence = _combine(rel.confidence, obs.confidence)
                rel.mentions += 1
                rel.last_seen = max(rel.last_seen, latest)
                rel.sources = _union(rel.sources, obs.sources)
                rel.time = rel.time or obs.time
                return
        relation = Relation(
            relation=obs.relation,
            object=obs.object.strip(),
            time=obs.time,
            confidence=obs.confidence,
            first_seen=when,
            last_seen=latest,
            sources=list(obs.sources),
        )
        entity.relations.append(relation)
        self.new_relations.append((entity.id, relation))


def merge_entities(
    kb: KnowledgeBase,
    observations: list[EntityObservation],
    said: Mapping[str, Utterance],
    index: MergeIndex | None = None,
    changes: KBChanges | None = None,
) -> set[str]:
    """Merge entity observations into ``kb``; returns the ids of the entities observed.

    ``said`` maps every source id the observations cite to its utterance. ``index``: the
    builder's lookups, kept up to date (made from ``kb`` if not given). Every entity changed
    (observed, the object of a relation, or given a relation's object id) is noted in ``changes``.
    """
    index = index if index is not None else MergeIndex(kb)
    merger = _EntityMerger(kb, said, index)
    touched: set[str] = set()
    mentioned: dict[str, set[str]] = {}
    for obs in observations:
        entity = merger.observe(obs)
        touched.add(entity.id)
        for source in obs.sources:
            mentioned.setdefault(source, set()).add(entity.id)
    for entity_ids in mentioned.values():
        for a, b in combinations(sorted(entity_ids), 2):
            for x, y in ((a, b), (b, a)):
                co = kb.entities[x].co_occurrence
                co[y] = co.get(y, 0) + 1
    # A relation whose object has no entity gets one when a name it may be is indexed.
    keys = index.names.changed | {normalize_name(r.object) for _, r in merger.new_relations}
    for entity_id, relation in merger.new_relations:
        index.relations.add(entity_id, [relation])
    resolved = index.relations.resolve(index.names, keys)
    index.names.changed.clear()
    if changes is not None:
        changes.note("entities", merger.touched)
        changes.note("entities", resolved)
    return touched
