"""The word lists of the offline entity extractor, read from ``data/entity_words.toml`` at first use.

The lists are data, not code: relation nouns ("sister", "physio"), occupations, species, verbs
that say where one works or lives, and words the parse readings must skip. :func:`entity_words`
reads the file once per process (importing this module reads nothing).
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from importlib import resources
from types import MappingProxyType

from gravity_core.schema import EntityType

__all__ = ["EntityWords", "entity_words"]

_RESOURCE = "entity_words.toml"


@dataclass(frozen=True, slots=True)
class EntityWords:
    """The word lists of :mod:`gravity_core.extract.offline.entities` (lower case).

    Attributes:
        relations: Relation noun -> canonical relation name ("mum" -> "mother").
        place_verbs: ``(verb lemma, preposition)`` -> ``(relation, default type of the object)``.
        occupations: Nouns that make "I'm a <noun>" an occupation.
        not_occupations: Nouns of "I'm a <noun>" that say no occupation.
        pets: Species nouns.
        event_words: Head words of names of events.
        venue_words: Head words of named venues.
        named_verbs: "called" / "named".
        like_verbs: Verbs of liking.
        dislike_verbs: Verbs of disliking.
        join_verbs: Verbs of joining a group.
        take_up_verbs: Verbs that take up an activity (with "up", or as start verbs).
        start_verbs: Verbs that start an activity.
        motion_verbs: Verbs after which "to X" is a place.
        skip_modifiers: Modifiers left out of values.
        hedges: Auxiliaries that make a statement weak.
        statuses: Relationship statuses.
        child_words: Nouns of children.
        identity_words: Identity modifiers.
        not_activities: Verbs whose gerund is no activity.
        not_liked: Objects of liking that name nothing.
        vague_objects: Objects that name no activity.
        light_verbs: Verbs that say nothing as a bare gerund.
        first_person: First-person subjects.
    """

    relations: Mapping[str, str]
    place_verbs: Mapping[tuple[str, str], tuple[str, EntityType]]
    occupations: frozenset[str]
    not_occupations: frozenset[str]
    pets: frozenset[str]
    event_words: frozenset[str]
    venue_words: frozenset[str]
    named_verbs: frozenset[str]
    like_verbs: frozenset[str]
    dislike_verbs: frozenset[str]
    join_verbs: frozenset[str]
    take_up_verbs: frozenset[str]
    start_verbs: frozenset[str]
    motion_verbs: frozenset[str]
    skip_modifiers: frozenset[str]
    hedges: frozenset[str]
    statuses: frozenset[str]
    child_words: frozenset[str]
    identity_words: frozenset[str]
    not_activities: frozenset[str]
    not_liked: frozenset[str]
    vague_objects: frozenset[str]
    light_verbs: frozenset[str]
    first_person: frozenset[str]


@functools.cache
def entity_words() -> EntityWords:
    """The extractor's word lists, read from the package's data file on the first call.

    Raises:
        ValueError: The data file lacks a list or has one this module does not know.
    """
    text = resources.files("gravity_core.extract.offline").joinpath("data", _RESOURCE).read_text("utf-8")
    return parse_entity_words(tomllib.loads(text))


def parse_entity_words(data: Mapping[str, object]) -> EntityWords:
    """:class:`EntityWords` of the parsed TOML ``data`` (see ``data/entity_words.toml``)."""
    relations = _table(data, "relations")
    place_verbs: dict[tuple[str, str], tuple[str, EntityType]] = {}
    for key, value in _table(data, "place_verbs").items():
        verb, prep = key.split()
        if not isinstance(value, list) or len(value) != 2:
            raise ValueError(f"place_verbs.{key!r} must be [relation, entity type], got {value!r}")
        place_verbs[(verb, prep)] = (str(value[0]), EntityType(value[1]))
    lists = _table(data, "words")
    names = [f.name for f in fields(EntityWords)][2:]
    if set(lists) != set(names):
        raise ValueError(
            f"{_RESOURCE} [words]: missing {sorted(set(names) - set(lists))}, "
            f"unknown {sorted(set(lists) - set(names))}"
        )
    words = {name: frozenset(str(lists[name]).split()) for name in names}
    return EntityWords(
        relations=MappingProxyType({str(k): str(v) for k, v in relations.items()}),
        place_verbs=MappingProxyType(place_verbs),
        **words,
    )


def _table(data: Mapping[str, object], name: str) -> Mapping[str, object]:
    table = data.get(name)
    if not isinstance(table, dict):
        raise ValueError(f"{_RESOURCE} has no [{name}] table")
    return table
