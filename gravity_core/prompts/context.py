"""What a prompt is built from: the batch, plus compact lists of what the KB already knows."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from gravity_core.llm.base import Message
from gravity_core.schema import KnowledgeBase, Utterance

__all__ = [
    "DEFAULT_MAX_KNOWN_ENTITIES",
    "DEFAULT_MAX_KNOWN_TOPICS",
    "KnownEntity",
    "KnownTopic",
    "PromptContext",
    "render_known_entities",
    "render_known_topics",
    "render_schema",
    "render_utterances",
    "system_user",
]

DEFAULT_MAX_KNOWN_ENTITIES = 40
DEFAULT_MAX_KNOWN_TOPICS = 20
_NONE_YET = "(none yet)"
_KEYWORDS_SHOWN = 3


@dataclass(frozen=True)
class KnownEntity:
    """An entity already in the KB, shown to the model so it reuses the name."""

    name: str
    type: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class KnownTopic:
    """A topic already in the KB, shown to the model so it can extend it by id."""

    id: str
    label: str
    keywords: tuple[str, ...] = ()


@dataclass(frozen=True)
class PromptContext:
    """Everything a prompt builder reads.

    Attributes:
        utterances: the batch, in conversation order.
        known_entities: entities of the KB, most mentioned first (already capped).
        known_topics: topics of the KB, largest first (already capped).
    """

    utterances: tuple[Utterance, ...]
    known_entities: tuple[KnownEntity, ...] = ()
    known_topics: tuple[KnownTopic, ...] = ()

    @classmethod
    def from_kb(
        cls,
        batch: Sequence[Utterance],
        kb: KnowledgeBase,
        *,
        max_entities: int = DEFAULT_MAX_KNOWN_ENTITIES,
        max_topics: int = DEFAULT_MAX_KNOWN_TOPICS,
    ) -> PromptContext:
        """Build the context for ``batch`` from the current KB.

        Args:
            batch: the utterances to extract from.
            kb: the KB so far (read only).
            max_entities: at most this many known entities, the most mentioned first.
            max_topics: at most this many known topics, those with the most sources first.
        """
        entities = sorted(kb.entities.values(), key=lambda e: (-e.mentions, e.name.casefold()))
        topics = sorted(kb.topics.values(), key=lambda t: (-len(t.sources), t.label.casefold()))
        return cls(
            utterances=tuple(batch),
            known_entities=tuple(
                KnownEntity(name=e.name, type=e.type.value, aliases=tuple(e.aliases))
                for e in entities[: max(0, max_entities)]
            ),
            known_topics=tuple(
                KnownTopic(id=t.id, label=t.label, keywords=tuple(t.keywords))
                for t in topics[: max(0, max_topics)]
            ),
        )

    @property
    def example_id(self) -> str:
        """An utterance id of the batch to quote in the instructions (``D1:1`` for an empty batch)."""
        return self.utterances[0].id if self.utterances else "D1:1"

    @property
    def utterance_ids(self) -> list[str]:
        """Ids of the batch's utterances, in order."""
        return [u.id for u in self.utterances]


def _day(utterance: Utterance) -> str:
    return f"{utterance.timestamp.day} {utterance.timestamp:%B %Y}"


def render_utterances(utterances: Sequence[Utterance]) -> str:
    """One line per utterance, ``[id] speaker: text``, under a header at each new session.

    The header, ``--- session <session> --- <day>``, gives the day of the session's first utterance;
    a line said on another day shows its own, ``[id] (<day>) speaker: text``.
    """
    lines: list[str] = []
    session: str | None = None
    session_day = ""
    for u in utterances:
        day = _day(u)
        if u.session != session:
            session, session_day = u.session, day
            lines.append(f"--- session {session} --- {day}")
        text = " ".join(u.full_text().split())
        said = "" if day == session_day else f"({day}) "
        lines.append(f"[{u.id}] {said}{u.speaker}: {text}")
    return "\n".join(lines)


def render_known_entities(entities: Sequence[KnownEntity]) -> str:
    """One line per known entity: name, type and aliases."""
    if not entities:
        return _NONE_YET
    lines = []
    for e in entities:
        aliases = f"; also called {', '.join(e.aliases)}" if e.aliases else ""
        lines.append(f"- {e.name} ({e.type}{aliases})")
    return "\n".join(lines)


def render_known_topics(topics: Sequence[KnownTopic]) -> str:
    """One line per known topic: id, label and its first keywords that are not words of the label."""
    if not topics:
        return _NONE_YET
    lines = []
    for t in topics:
        in_label = set(t.label.casefold().split())
        extra = [k for k in t.keywords if k.casefold() not in in_label][:_KEYWORDS_SHOWN]
        keywords = f" ({', '.join(extra)})" if extra else ""
        lines.append(f"- [{t.id}] {t.label}{keywords}")
    return "\n".join(lines)


def render_schema(response_model: type[BaseModel]) -> str:
    """The JSON schema of ``response_model`` as compact JSON text, as shown in prompts."""
    return json.dumps(response_model.model_json_schema(), ensure_ascii=False)


def system_user(system: str, user: str) -> list[Message]:
    """A prompt of one system and one user message."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
