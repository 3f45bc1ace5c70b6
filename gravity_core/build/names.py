"""Name normalization and the name -> entity id index used while merging."""

from __future__ import annotations

import re
import unicodedata

from gravity_core.schema import EntityAnchor, EntityType, KnowledgeBase

__all__ = ["NameIndex", "normalize_name", "normalize_value", "slugify"]

_LEADING_ARTICLE = re.compile(r"^(the|a|an|my|our)\s+", re.IGNORECASE)
_POSSESSIVE = re.compile(r"['’]s$")
_SPACES = re.compile(r"\s+")


def normalize_name(name: str) -> str:
    """Case-folded name without leading article or possessive, spaces collapsed."""
    text = unicodedata.normalize("NFKC", name).strip().strip(".,;:!?\"'")
    text = _LEADING_ARTICLE.sub("", text)
    text = _POSSESSIVE.sub("", text)
    return _SPACES.sub(" ", text).casefold()


def normalize_value(value: str) -> str:
    """Case-folded attribute value without leading article and trailing punctuation."""
    return normalize_name(value)


def slugify(name: str) -> str:
    """ASCII id fragment for a name: 'Lake Tahoe' -> 'lake-tahoe'."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.casefold()).strip("-")
    return slug or "entity"


class NameIndex:
    """Finds the entity a name refers to: exact name or alias, then a unique person's first name.

    A name two entities share belongs to the one first in the KB. The index can be kept across
    batches: :meth:`add` an entity again when it gains an alias or changes type, and it answers as
    an index made afresh from the KB would. ``changed`` collects the keys whose answer may have
    changed since it was last cleared (a relation whose object had no entity may have one now).
    """

    def __init__(self, kb: KnowledgeBase) -> None:
        self._by_name: dict[str, str] = {}
        self._by_first: dict[str, set[str]] = {}
        self._position: dict[str, int] = {}
        self.changed: set[str] = set()
        for entity in kb.entities.values():
            self.add(entity)
        self.changed.clear()

    def add(self, entity: EntityAnchor) -> None:
        """Index an entity's name and aliases (again, after it gained one or changed type)."""
        position = self._position.setdefault(entity.id, len(self._position))
        for name in (entity.name, *entity.aliases):
            key = normalize_name(name)
            held = self._by_name.get(key)
            if held is None or (held != entity.id and self._position[held] > position):
                self._by_name[key] = entity.id
                self.changed.add(key)
        if " " in entity.name.strip():
            first = normalize_name(entity.name.split()[0])
            owners = self._by_first.setdefault(first, set())
            is_person = entity.type is EntityType.PERSON
            if is_person != (entity.id in owners):
                (owners.add if is_person else owners.discard)(entity.id)
                self.changed.add(first)

    def find(self, name: str) -> str | None:
        """The id of the entity ``name`` refers to, or None."""
        key = normalize_name(name)
        if not key:
            return None
        if key in self._by_name:
            return self._by_name[key]
        owners = self._by_first.get(key, set())
        return next(iter(owners)) if len(owners) == 1 else None
