"""Forgetting by provenance: which utterances a request names, and what a forget did.

A forget removes utterances from a KB and leaves the KB that a build of the remaining
utterances would have made (:meth:`~gravity_core.build.builder.AnchorBuilder.forget`): every fact
whose sources were all forgotten goes, facts with other sources keep those, with confidences and
counts as if the forgotten turns had never been seen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time

from gravity_core.errors import ConfigurationError
from gravity_core.loaders._common import listed_ids
from gravity_core.schema import KnowledgeBase

__all__ = ["ForgetReport", "ForgetRequest"]


def _instant(value: date | datetime) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ConfigurationError(f"before={value.isoformat()} needs a timezone (or pass a plain date)")
        return value
    return datetime.combine(value, time(0, 0), tzinfo=UTC)


@dataclass(frozen=True)
class ForgetRequest:
    """What to forget: the union of every utterance named, every session, every speaker, and
    everything said before a moment.

    Attributes:
        utterances: utterance ids.
        sessions: session ids.
        speakers: speaker names (exactly as stored, case ignored).
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
            ConfigurationError: an utterance id, session or speaker the KB does not hold (the
                message lists those it does): a typo would otherwise forget nothing, silently.
        """
        _check_known("utterance", self.utterances, kb.utterances)
        _check_known("session", self.sessions, kb.sessions())
        speakers = {u.speaker.casefold(): u.speaker for u in kb.utterances.values()}
        _check_known(
            "speaker", [s.casefold() for s in self.speakers], speakers, shown=list(speakers.values())
        )
        ids, sessions = set(self.utterances), set(self.sessions)
        folded = {s.casefold() for s in self.speakers}
        before = None if self.before is None else _instant(self.before)
        return [
            u.id
            for u in kb.utterances.values()
            if u.id in ids
            or u.session in sessions
            or u.speaker.casefold() in folded
            or (before is not None and u.timestamp < before)
        ]


def _check_known(
    kind: str, wanted: Iterable[str], known: Iterable[str], *, shown: list[str] | None = None
) -> None:
    have = set(known)
    missing = [w for w in wanted if w not in have]
    if missing:
        listed = listed_ids(shown if shown is not None else sorted(have)) or "(none)"
        named = ", ".join(repr(m) for m in missing[:10]) + (
            f" (and {len(missing) - 10} more)" if len(missing) > 10 else ""
        )
        raise ConfigurationError(f"no {kind} {named} in this KB; it holds: {listed}")


@dataclass
class ForgetReport:
    """What one forget did.

    Attributes:
        forgotten: utterances removed.
        remaining: utterances the KB still holds.
        before: anchors per kind before the forget (``entity``, ``event``, ``topic``).
        after: anchors per kind after it.
        embedded: texts embedded by the rebuild (the rest reused their stored vectors).
        cache_entries_removed: model answers deleted from the response cache.
        generation: the generation the forget saved (``None`` without a store or when nothing
            was forgotten).
    """

    forgotten: int = 0
    remaining: int = 0
    before: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)
    embedded: int = 0
    cache_entries_removed: int = 0
    generation: int | None = None
