"""Anchor quality against a hand-annotated gold set: precision and recall per anchor kind.

A gold file (``tests/fixtures/gold/*.json``) lists a conversation's entities with types, relations
(``subject`` has ``relation`` ``object``), attribute values and events with their dates. Names
match case-insensitively through either side's aliases and without a leading article. An event
matches a gold event of the same source utterance, participant and at least half of the gold
``what``'s content words; its date is right when its interval is the gold one, or its start day for
a gold day.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Set
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from gravity_core.errors import InputDataError
from gravity_core.schema import EventAnchor, KnowledgeBase

__all__ = ["GoldSet", "KindScore", "QualityReport", "fragment_values", "score_anchors"]

_WORD = re.compile(r"[a-z0-9]+")
_ARTICLE = re.compile(r"^(?:the|a|an)\s+")
_SMALL_WORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "my",
        "your",
        "his",
        "her",
        "our",
        "their",
        "to",
        "of",
        "for",
        "in",
        "on",
        "at",
        "with",
        "and",
        "up",
        "from",
        "by",
        "it",
        "its",
        "me",
        "him",
        "them",
    }
)
_MIN_WHAT_OVERLAP = 0.5
_FINITE_TAGS = frozenset({"VBD", "VBP", "VBZ", "MD"})
_DANGLING = frozenset({"ADP", "SCONJ", "CCONJ", "DET", "PART", "AUX"})


@dataclass(frozen=True)
class KindScore:
    """Precision and recall of one anchor kind (``predicted``/``gold`` are the set sizes)."""

    matched_predicted: int
    predicted: int
    matched_gold: int
    gold: int

    @property
    def precision(self) -> float:
        """Share of the predicted items that match a gold one (1.0 when nothing was predicted)."""
        return self.matched_predicted / self.predicted if self.predicted else 1.0

    @property
    def recall(self) -> float:
        """Share of the gold items a predicted one matches (1.0 when the gold set has none)."""
        return self.matched_gold / self.gold if self.gold else 1.0

    def line(self, kind: str) -> str:
        """The report's line for ``kind``: precision and recall, each with its counts."""
        return (
            f"{kind:<16} precision {self.precision:.2f} ({self.matched_predicted}/{self.predicted})"
            f"  recall {self.recall:.2f} ({self.matched_gold}/{self.gold})"
        )


@dataclass(frozen=True)
class QualityReport:
    """Scores of one KB against one gold set."""

    entity_types: KindScore
    relations: KindScore
    attributes: KindScore
    events: KindScore
    dated_events: int
    dated_right: int

    @property
    def date_accuracy(self) -> float:
        """Share of the matched gold events with a date whose date the KB has right."""
        return self.dated_right / self.dated_events if self.dated_events else 1.0

    def text(self) -> str:
        """The report as text: one line per anchor kind, then the share of event dates right."""
        return "\n".join(
            [
                self.entity_types.line("entity types"),
                self.relations.line("relations"),
                self.attributes.line("attributes"),
                self.events.line("events"),
                f"{'event dates':<16} right {self.date_accuracy:.2f}"
                f" ({self.dated_right}/{self.dated_events})",
            ]
        )


@dataclass(frozen=True)
class GoldSet:
    """A parsed gold file."""

    conversation: str
    entities: list[dict[str, Any]]
    relations: list[dict[str, Any]]
    attributes: list[dict[str, Any]]
    events: list[dict[str, Any]]

    @classmethod
    def load(cls, path: str | Path) -> GoldSet:
        """The gold set in the JSON file at ``path``.

        Raises:
            InputDataError: the file cannot be read, or is not a gold anchor file.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(
                data["conversation"], data["entities"], data["relations"], data["attributes"], data["events"]
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputDataError(f"{path}: not a gold anchor file ({exc})") from exc


def _key(name: str) -> str:
    return _ARTICLE.sub("", " ".join(name.casefold().split())).strip(" .,!?'\"")


class _Names:
    """Maps any alias (gold or KB) to one canonical gold key."""

    def __init__(self, gold: GoldSet, kb: KnowledgeBase) -> None:
        self.canonical: dict[str, str] = {}
        for item in gold.entities:
            for alias in (item["name"], *item.get("aliases", [])):
                self.canonical.setdefault(_key(alias), _key(item["name"]))
        for entity in kb.entities.values():
            names = [_key(n) for n in (entity.name, *entity.aliases)]
            target = next((self.canonical[n] for n in names if n in self.canonical), None)
            if target is not None:
                for n in names:
                    self.canonical.setdefault(n, target)

    def __call__(self, name: str) -> str:
        key = _key(name)
        return self.canonical.get(key, key)


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in _SMALL_WORDS}


def _event_matches(event: EventAnchor, gold: dict[str, Any], names: _Names) -> bool:
    if gold["source"] not in event.sources or names(gold["who"]) not in {names(w) for w in event.who}:
        return False
    wanted = _content_words(gold["what"])
    if not wanted:
        return True
    return len(wanted & _content_words(event.what)) / len(wanted) >= _MIN_WHAT_OVERLAP


def _date_right(event: EventAnchor, gold: dict[str, Any]) -> bool:
    when = event.when
    if when is None or when.start is None:
        return False
    start, end = date.fromisoformat(gold["date"]["start"]), date.fromisoformat(gold["date"]["end"])
    return when.start == start and (when.end or when.start) == end


def _score_sets(predicted: Set[tuple[str, ...]], gold: Set[tuple[str, ...]]) -> KindScore:
    matched = predicted & gold
    return KindScore(len(matched), len(predicted), len(matched), len(gold))


def _value_key(value: str) -> str:
    return " ".join(sorted(_content_words(value))) or _key(value)


def score_anchors(kb: KnowledgeBase, gold: GoldSet) -> QualityReport:
    """Score ``kb`` (built from ``gold.conversation``) against ``gold``."""
    names = _Names(gold, kb)
    predicted_types = {(names(e.name), e.type.value) for e in kb.entities.values()}
    gold_types = {(names(e["name"]), e["type"]) for e in gold.entities}
    relations = {
        (names(e.name), r.relation, names(r.object)) for e in kb.entities.values() for r in e.relations
    }
    gold_relations = {(names(r["subject"]), r["relation"], names(r["object"])) for r in gold.relations}
    attributes = {
        (names(e.name), a.name, _value_key(a.value)) for e in kb.entities.values() for a in e.attributes
    }
    gold_attributes = {(names(a["entity"]), a["name"], _value_key(a["value"])) for a in gold.attributes}
    events = list(kb.events.values())
    matched_events: set[str] = set()
    matched_gold = dated = dated_right = 0
    for item in gold.events:
        found = [e for e in events if _event_matches(e, item, names)]
        if not found:
            continue
        matched_gold += 1
        matched_events.update(e.id for e in found)
        if item.get("date") is not None:
            dated += 1
            dated_right += any(_date_right(e, item) for e in found)
    return QualityReport(
        entity_types=_score_sets(predicted_types, gold_types),
        relations=_score_sets(relations, gold_relations),
        attributes=_score_sets(attributes, gold_attributes),
        events=KindScore(len(matched_events), len(events), matched_gold, len(gold.events)),
        dated_events=dated,
        dated_right=dated_right,
    )


def fragment_values(nlp: Any, values: Iterable[str]) -> list[str]:
    """The attribute values that are not a phrase.

    Such a value has a finite verb in more than one word, a subject of its own, or a last word that
    needs more ("focusing more on my well-being rather than").
    """
    out: list[str] = []
    for value in values:
        doc = nlp(value)
        finite = len(doc) > 1 and any(t.tag_ in _FINITE_TAGS for t in doc)
        dangling = len(doc) > 1 and doc[-1].pos_ in _DANGLING
        if finite or dangling or any(t.dep_ in ("nsubj", "nsubjpass") for t in doc):
            out.append(value)
    return out
