"""Forgetting by provenance: which utterances a request names, and what a forget did.

A forget removes utterances from a KB and leaves the KB that a build of the remaining
utterances would have made (:meth:`~gravity_core.build.builder.AnchorBuilder.forget`): every fact
whose sources were all forgotten goes, facts with other sources keep those, with confidences and
counts as if the forgotten turns had never been seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path

from gravity_core.errors import ConfigurationError
from gravity_core.loaders._common import listed_ids
from gravity_core.schema import KnowledgeBase

__all__ = ["ForgetReport", "ForgetRequest", "NothingNamedHeld"]


def _instant(value: date | datetime) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ConfigurationError(f"before={value.isoformat()} needs a timezone (or pass a plain date)")
        return value
    return datetime.combine(value, time(0, 0), tzinfo=UTC)


class NothingNamedHeld(ConfigurationError):
    """A forget names an utterance, session or speaker the KB does not hold.

    Attributes:
        missing: what was named and is not held, as ``(kind, value)`` pairs.
        all_missing: nothing the request names is held (a forget run again once it completed).
    """

    def __init__(self, message: str, *, missing: list[tuple[str, str]], all_missing: bool) -> None:
        super().__init__(message)
        self.missing = missing
        self.all_missing = all_missing


@dataclass(frozen=True)
class ForgetRequest:
    """What to forget: named utterances, sessions and speakers, and everything said before a moment.

    A request forgets the union of them all.

    Attributes:
        utterances: utterance ids.
        sessions: session ids.
        speakers: speaker names, exactly as stored (no case or Unicode folding: ``Grosse`` is not
            ``Große``), or an alias the KB recorded for a speaker.
        before: utterances whose timestamp is earlier (a plain date means midnight UTC).

    Raises:
        ConfigurationError: nothing is named, or ``before`` is a datetime without a timezone.
    """

    utterances: tuple[str, ...] = ()
    sessions: tuple[str, ...] = ()
    speakers: tuple[str, ...] = ()
    before: date | datetime | None = None

    def __post_init__(self) -> None:
        for name in ("utterances", "sessions", "speakers"):
            value = getattr(self, name)
            if isinstance(value, str):  # forget(sessions="s1") would forget sessions 's' and '1'
                raise ConfigurationError(f"{name} must be a list of ids, got the string {value!r}")
            object.__setattr__(self, name, tuple(value))
        if not (self.utterances or self.sessions or self.speakers or self.before is not None):
            raise ConfigurationError("name what to forget: utterances, sessions, speakers or before")
        if self.before is not None:
            _instant(self.before)

    def select(self, kb: KnowledgeBase) -> list[str]:
        """The ids of the KB's utterances the request names, in conversation order.

        Raises:
            NothingNamedHeld: an utterance id, session or speaker the KB does not hold (the
                message lists those it does): a typo would otherwise forget nothing, silently.
        """
        return [u for ids in self.selected(kb).values() for u in ids]

    def selected(self, kb: KnowledgeBase) -> dict[str, list[str]]:
        """The ids of the utterances the request names, in conversation order, under what named them.

        Each id is listed under the first thing that named it: ``"utterance 'u3'"``,
        ``"session 's2'"``, ``"speaker 'Grosse'"``, ``"before 2024-03-01"`` (what a forget prints
        before it removes anything).

        Raises:
            NothingNamedHeld: see :meth:`select`.
        """
        speakers = _speaker_names(kb)
        known = {
            "utterance": (self.utterances, set(kb.utterances), sorted(kb.utterances)),
            "session": (self.sessions, set(kb.sessions()), kb.sessions()),
            "speaker": (self.speakers, set(speakers), list(dict.fromkeys(speakers.values()))),
        }
        missing = [(kind, w) for kind, (wanted, have, _) in known.items() for w in wanted if w not in have]
        if missing:
            raise NothingNamedHeld(
                "; ".join(
                    _missing_line(kind, [w for k, w in missing if k == kind], shown, speakers)
                    for kind, (_, _, shown) in known.items()
                    if any(k == kind for k, _ in missing)
                ),
                missing=missing,
                all_missing=len(missing) == len(self.utterances) + len(self.sessions) + len(self.speakers)
                and self.before is None,
            )
        ids, sessions = set(self.utterances), set(self.sessions)
        named = {speakers[s] for s in self.speakers}
        alias = {speakers[s]: s for s in self.speakers}
        before = None if self.before is None else _instant(self.before)
        selected: dict[str, list[str]] = {}
        for u in kb.utterances.values():
            if u.id in ids:
                why = f"utterance {u.id!r}"
            elif u.session in sessions:
                why = f"session {u.session!r}"
            elif u.speaker in named:
                why = f"speaker {alias[u.speaker]!r}" + (
                    f" ({u.speaker!r})" if alias[u.speaker] != u.speaker else ""
                )
            elif before is not None and u.timestamp < before:
                why = f"before {self.before}"
            else:
                continue
            selected.setdefault(why, []).append(u.id)
        return selected


def _speaker_names(kb: KnowledgeBase) -> dict[str, str]:
    """Each name a speaker is known by in the KB -> the speaker as stored.

    The names are the speaker as stored and the aliases the KB recorded for the speaker's entity.
    Exact strings: no case or Unicode folding.
    """
    names = {u.speaker: u.speaker for u in kb.utterances.values()}  # in order of appearance
    stored = set(names)
    for entity in kb.entities.values():
        if entity.name in stored:
            for alias in entity.aliases:
                names.setdefault(alias, entity.name)
    return names


def _missing_line(kind: str, missing: list[str], shown: list[str], speakers: dict[str, str]) -> str:
    listed = listed_ids(shown) or "(none)"
    named = ", ".join(repr(m) for m in missing[:10]) + (
        f" (and {len(missing) - 10} more)" if len(missing) > 10 else ""
    )
    line = f"no {kind} {named} in this KB; it holds: {listed}"
    if kind == "speaker":
        close = sorted({s for m in missing for n, s in speakers.items() if n.casefold() == m.casefold()})
        if close:
            line += f" (names are matched exactly; {', '.join(map(repr, close))} is another speaker)"
    return line


@dataclass
class ForgetReport:
    """What one forget did.

    Attributes:
        forgotten: utterances removed.
        remaining: utterances the KB still holds.
        before: anchors per kind before the forget (``entity``, ``event``, ``topic``).
        after: anchors per kind after it.
        embedded: texts embedded by the rebuild (the rest reused their stored vectors).
        cache_entries_removed: model answers and parses deleted from the KB's caches.
        caches_not_pruned: cache folders outside the KB folder (a response cache the extractor
            shares with other KBs): a forget deletes nothing there, so they may still hold prompts
            of the forgotten turns.
        already_gone: the request named only what the KB does not hold, right after a forget
            (a forget run again once it completed): nothing was done.
        generation: the generation the forget saved (``None`` without a store or when nothing
            was forgotten).
    """

    forgotten: int = 0
    remaining: int = 0
    before: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)
    embedded: int = 0
    cache_entries_removed: int = 0
    caches_not_pruned: list[Path] = field(default_factory=list)
    already_gone: list[tuple[str, str]] = field(default_factory=list)
    generation: int | None = None
