"""The anchor knowledge base held in memory: anchors, the utterances they cite, build state."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from gravity_core.schema.anchors import EntityAnchor, EventAnchor, SummaryRecord, TopicAnchor
from gravity_core.schema.utterance import Utterance

__all__ = ["SCHEMA_VERSION", "BuildInfo", "FailedBatch", "KnowledgeBase"]

SCHEMA_VERSION = 1


class FailedBatch(BaseModel):
    """A batch whose extraction failed, kept so nothing is dropped silently."""

    model_config = ConfigDict(extra="forbid")

    utterance_ids: list[str]
    reason: str
    raw_output: str | None = None
    failed_at: datetime


class BuildInfo(BaseModel):
    """How the KB was built, so a rebuild can check it uses the same settings."""

    model_config = ConfigDict(extra="forbid")

    extractor: str = ""
    model: str | None = None
    embedder: str = ""
    batch_size: int = 0
    failed_batches: list[FailedBatch] = Field(default_factory=list)
    #: Digest of the batches merged so far and what each gave (:mod:`gravity_core.schema.lineage`).
    lineage: str = ""


class KnowledgeBase(BaseModel):
    """Anchors plus the utterances they came from.

    ``utterances`` keeps insertion (conversation) order; it is how provenance ids resolve to text.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    utterances: dict[str, Utterance] = Field(default_factory=dict)
    entities: dict[str, EntityAnchor] = Field(default_factory=dict)
    events: dict[str, EventAnchor] = Field(default_factory=dict)
    topics: dict[str, TopicAnchor] = Field(default_factory=dict)
    summaries: dict[str, SummaryRecord] = Field(default_factory=dict)
    build: BuildInfo = Field(default_factory=BuildInfo)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the whole KB."""
        return self.model_dump(mode="json")

    def part_json(self, part: str) -> bytes:
        """One field (``"entities"``, ``"utterances"``, ...) as compact UTF-8 JSON.

        The same value as ``to_dict()[part]`` through ``json.dumps``, made by pydantic's serializer
        without the intermediate dicts: about six times faster, which is most of a large KB's save.

        Raises:
            KeyError: ``part`` is not a field of the KB.
        """
        annotation = type(self).model_fields[part].annotation
        if annotation is None:  # every field of the KB is annotated; this narrows the type
            raise KeyError(part)
        return TypeAdapter(annotation).dump_json(getattr(self, part))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KnowledgeBase:
        """Rebuild a KB from :meth:`to_dict` output."""
        return cls.model_validate(data)

    def sessions(self) -> list[str]:
        """Session ids in the order they were first seen."""
        return list(dict.fromkeys(u.session for u in self.utterances.values()))

    def entity_by_name(self, name: str) -> EntityAnchor | None:
        """The entity whose name or alias matches ``name`` case-insensitively."""
        key = name.casefold()
        for entity in self.entities.values():
            if entity.name.casefold() == key or any(a.casefold() == key for a in entity.aliases):
                return entity
        return None
