"""Read-only memory tools an agent calls: search, entity profile, timeline, topic arc, stats.

:class:`MemoryTools` answers each tool over the KB its :class:`~gravity_core.query.engine.GravityEngine`
serves, without a model call. Every answer that shows anchors is the text of the prompt blocks
(:func:`~gravity_core.query.blocks.format_blocks`: the priority instruction, then the topic, entity
or event block), so KB text is escaped exactly as in a prompt and cannot pass for an instruction;
it is cut to the tools' ``token_budget`` with the engine's token counter. A name, person or topic the
KB does not know is not an error: the answer says so and names what the KB does know, so the agent
can ask again. Arguments of the wrong type or shape raise :class:`~gravity_core.errors.InputDataError`
naming the argument: the agent framework turns it into a tool error the model can read.

The LangChain, LlamaIndex and MCP tools wrap these methods, and offer them to the model as
:data:`TOOL_SPECS` describes them (name, description, argument schema), so every framework shows the
same four tools; :class:`UserMemoryTools` gives the tools of one user of a
:class:`~gravity_core.serving.users.UserKBs`.
"""

from __future__ import annotations

import difflib
import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from functools import cached_property

from pydantic import BaseModel, Field

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.context.window import Placement
from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.prompts.memories import format_memories, memories_within
from gravity_core.query.blocks import BlockLimits, RenderedAnchors, day_label, format_blocks, inline_text
from gravity_core.query.config import ContextMode, QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.question_date import parse_iso_moment
from gravity_core.query.state import KBSnapshot
from gravity_core.query.types import ScoredAnchor
from gravity_core.schema import AnchorKind, EventAnchor
from gravity_core.serving.users import UserKBs, check_user_id
from gravity_core.text.tokens import TokenCounter

__all__ = [
    "DEFAULT_TOOL_BUDGET",
    "DETAIL_LIMITS",
    "TOOL_NAMES",
    "TOOL_SPECS",
    "EntityProfileArguments",
    "HostMemories",
    "MemoryTools",
    "MemoryToolsSource",
    "SearchMemoryArguments",
    "TimelineArguments",
    "ToolSpec",
    "TopicArcArguments",
    "UserMemoryTools",
    "date_argument",
    "required_text",
]

logger = logging.getLogger(__name__)

DEFAULT_TOOL_BUDGET = 800
"""Tokens (cl100k) one tool answer may take unless told otherwise."""

DETAIL_LIMITS = BlockLimits(
    max_attribute_values=24,
    max_relations=24,
    max_transitions=12,
    max_co_occurring=6,
    max_arc=60,
    max_facts=12,
)
"""How much of one anchor ``profile`` and ``topic_arc`` show: far more than a prompt's blocks, since
the agent asked for that anchor alone (a profile or arc too long for the budget falls back to the
prompt's :class:`~gravity_core.query.blocks.BlockLimits`)."""

#: Names listed at most when a name or topic is not found.
_SUGGESTED = 8


def required_text(value: object, argument: str) -> str:
    """``value`` without surrounding blank space, if it is a string with some text.

    Raises:
        InputDataError: ``value`` is not a string, or is blank; the message names ``argument``.
    """
    if not isinstance(value, str):
        raise InputDataError(f"{argument} must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise InputDataError(f"{argument} must not be empty")
    return text


def date_argument(value: object, argument: str) -> date | None:
    """A date an agent gave as a tool argument: ``None``, a date, a datetime (its day) or an ISO string.

    For the tool wrappers, whose models send dates as text (``"2024-06-01"``).

    Raises:
        InputDataError: anything else, or a string that is not an ISO date; the message names ``argument``.
    """
    if isinstance(value, str):
        parsed = parse_iso_moment(value)
        if parsed is None:
            raise InputDataError(f"{argument} must be a date as YYYY-MM-DD, got {inline_text(value, 40)!r}")
        return parsed.date() if isinstance(parsed, datetime) else parsed
    return _optional_date(value, argument)


def _optional_date(value: object, argument: str) -> date | None:
    """``value`` as a date (a datetime gives its date); ``None`` stays ``None``."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    raise InputDataError(f"{argument} must be a date or None, got {type(value).__name__}")


def _quoted(value: str) -> str:
    """A name the caller gave, escaped to be echoed in an answer."""
    return f"'{inline_text(value, 80)}'"


HostMemories = Callable[[str], Sequence[str | tuple[str, Placement]]]
"""The host's search for a tool: query -> its documents' texts, best first, alone or with their placement."""


def _names(names: Sequence[str]) -> str:
    return ", ".join(inline_text(name, 80) for name in names) if names else "none"


@dataclass(frozen=True)
class _Event:
    """What the timeline needs of one event: its days, participants, and chronological key."""

    id: str
    start: date
    end: date
    chrono: tuple[date, datetime, str]
    who: frozenset[str]  # participant names, casefolded
    who_ids: frozenset[str]

    @classmethod
    def of(cls, event: EventAnchor) -> _Event:
        when = event.when
        if when is not None and when.start is not None and when.end is not None:
            start, end = when.start, when.end
        else:
            start = end = event.said_at.date()
        return cls(
            event.id,
            start,
            end,
            (event.occurred(), event.said_at, event.id),
            frozenset(name.casefold() for name in event.who if name.strip()),
            frozenset(event.who_ids),
        )


class _Catalog:
    """What the tools look up in one KB version, each part read once, when first needed."""

    def __init__(self, snapshot: KBSnapshot, counter: TokenCounter) -> None:
        self.snapshot = snapshot
        self.counter = counter

    @cached_property
    def detail(self) -> RenderedAnchors:
        """Renders of single anchors under :data:`DETAIL_LIMITS`."""
        return RenderedAnchors(self.snapshot.kb, counter=self.counter, limits=DETAIL_LIMITS)

    @cached_property
    def names(self) -> dict[str, list[str]]:
        """Casefolded name or alias -> entity ids, best first (a name before an alias, then mentions)."""
        found: dict[str, list[tuple[int, int, str]]] = {}
        for entity in self.snapshot.kb.entities.values():
            keys = [(entity.name, 0), *((alias, 1) for alias in entity.aliases)]
            for key, rank in keys:
                if key.strip():
                    found.setdefault(key.strip().casefold(), []).append((rank, -entity.mentions, entity.id))
        return {key: list(dict.fromkeys(i for *_, i in sorted(hits))) for key, hits in found.items()}

    @cached_property
    def display_names(self) -> dict[str, str]:
        """Casefolded name or alias -> the entity's name (the best entity's, for a shared key)."""
        entities = self.snapshot.kb.entities
        return {key: entities[ids[0]].name for key, ids in self.names.items()}

    @cached_property
    def by_mentions(self) -> list[str]:
        """Entity names, most mentioned first."""
        entities = sorted(self.snapshot.kb.entities.values(), key=lambda e: (-e.mentions, e.name))
        return [e.name for e in entities]

    @cached_property
    def events(self) -> list[_Event]:
        """Every event, in chronological order (conversation order within a day)."""
        return sorted((_Event.of(e) for e in self.snapshot.kb.events.values()), key=lambda e: e.chrono)

    @cached_property
    def people_in_events(self) -> list[str]:
        """Participant names of the events, the most frequent first."""
        counts: Counter[str] = Counter()
        for event in self.snapshot.kb.events.values():
            counts.update({name.strip() for name in event.who if name.strip()})
        return [name for name, _ in sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))]

    @cached_property
    def topic_ids(self) -> dict[str, str]:
        """Casefolded topic label -> the id of the first topic so labelled."""
        ids: dict[str, str] = {}
        for topic_id, topic in self.snapshot.kb.topics.items():
            ids.setdefault(topic.label.strip().casefold(), topic_id)
        return ids

    @cached_property
    def topic_labels(self) -> list[str]:
        """Topic labels, those spanning the most sessions first."""
        topics = sorted(self.snapshot.kb.topics.values(), key=lambda t: (-len(t.sessions), t.id))
        return [t.label for t in topics]

    @cached_property
    def utterance_span(self) -> tuple[int, int, date | None, date | None]:
        """Utterances, sessions, first and last day."""
        sessions: set[str] = set()
        first: date | None = None
        last: date | None = None
        count = 0
        for utterance in self.snapshot.kb.utterances.values():
            count += 1
            sessions.add(utterance.session)
            day = utterance.day
            first = day if first is None or day < first else first
            last = day if last is None or day > last else last
        return count, len(sessions), first, last

    def close_names(self, name: str) -> list[str]:
        """Known entity names like ``name``: misspellings, and names holding it as a word."""
        key = name.casefold()
        words = set(key.split())
        close = difflib.get_close_matches(key, list(self.names), n=_SUGGESTED, cutoff=0.6)
        close += [k for k in self.names if words & set(k.split())]
        return list(dict.fromkeys(self.display_names[k] for k in close))[:_SUGGESTED]


class MemoryTools:
    """Read-only memory tools over one GravityEngine; every output is the escaped, budgeted prompt blocks.

    Each call reads the KB version the engine serves at that moment (an engine made with
    ``from_dir`` or ``from_builder`` follows its KB, so the tools see sessions added later).

    Args:
        engine: the engine over the KB.
        token_budget: the most tokens (cl100k, as the engine counts them) one answer takes.
        config: the query settings of :meth:`search` and of :meth:`topic_arc`'s matching (default:
            the engine's).

    Raises:
        ConfigurationError: ``engine`` is not a GravityEngine, ``token_budget`` is below 1, or the
            settings select the '+Sum' baseline (the tools show anchors).

    Example:
        ```python
        tools = MemoryTools(GravityEngine.from_dir("kb"))
        tools.profile("maya")            # Maya's entity profile
        tools.timeline("Maya", start=date(2024, 3, 1), end=date(2024, 3, 31))
        ```
    """

    def __init__(
        self,
        engine: GravityEngine,
        *,
        token_budget: int = DEFAULT_TOOL_BUDGET,
        config: QueryConfig | None = None,
    ) -> None:
        if not isinstance(engine, GravityEngine):
            raise ConfigurationError(f"MemoryTools needs a GravityEngine, got {type(engine).__name__}")
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
            raise ConfigurationError(f"token_budget must be an int of at least 1, got {token_budget!r}")
        if config is not None and not isinstance(config, QueryConfig):
            raise ConfigurationError(f"config must be a QueryConfig, got {type(config).__name__}")
        if (config or engine.config).mode is not ContextMode.ANCHORS:
            raise ConfigurationError("MemoryTools show anchors: use a QueryConfig with mode='anchors'")
        self.engine = engine
        self.token_budget = token_budget
        self.config = config
        self._catalog: _Catalog | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryTools(token_budget={self.token_budget}, engine revision {self.engine.revision})"

    def _current(self, snapshot: KBSnapshot | None = None) -> _Catalog:
        """The catalog of ``snapshot`` (default: the version the engine serves now, checked first)."""
        served = snapshot or self.engine.current_snapshot()
        with self._lock:
            if self._catalog is None or self._catalog.snapshot is not served:
                self._catalog = _Catalog(served, self.engine.counter)
            return self._catalog

    def _blocks(self, catalog: _Catalog, anchors: Sequence[ScoredAnchor], *, detail: bool = False) -> str:
        """The anchors' blocks within the budget ('' when none fits); ``detail`` tries DETAIL_LIMITS first."""
        served = catalog.snapshot
        renders = [catalog.detail, served.rendered] if detail else [served.rendered]
        for rendered in renders:
            _, text, _, _ = format_blocks(
                served.kb,
                anchors,
                counter=self.engine.counter,
                token_budget=self.token_budget,
                rendered=rendered,
            )
            if text:
                return text
        return ""

    # -- the tools -----------------------------------------------------------------------------

    def search(self, query: str, *, question_date: date | None = None) -> str:
        """The anchors GRAVITY selects for ``query``, as the prompt blocks within the budget.

        Args:
            query: what to look for (a question or keywords).
            question_date: the day the question is asked, for "last month" (default: the KB's latest day).

        Raises:
            InputDataError: ``query`` is not a non-empty string, or ``question_date`` not a date.
        """
        question = required_text(query, "query")
        asked = _optional_date(question_date, "question_date")
        context = self.engine.query(question, config=self.config, question_date=asked)
        text, _ = self.engine.fit_anchors(context, self.token_budget)
        return text or f"No memory matches {_quoted(question)}."

    def search_with_memories(
        self,
        query: str,
        memories: HostMemories,
        *,
        question_date: date | None = None,
        policy: ContextPolicy = DEFAULT_POLICY,
    ) -> str:
        """:meth:`search`, then the host's own memories for ``query`` in the rest of the budget.

        The budget is shared as every integration shares it: the anchors take
        :meth:`ContextPolicy.anchor_tokens <gravity_core.context.policy.ContextPolicy.anchor_tokens>`
        (capped by the query settings' own budget; nothing below the policy's minimum, so a small
        budget is all the host's), the memories fill what the anchors leave, in rank order (turns
        fetched by provenance within the policy's bounds, :meth:`ContextPolicy.fill
        <gravity_core.context.policy.ContextPolicy.fill>`), as the escaped
        ``<retrieved_memories>`` block.

        Args:
            query: what to look for.
            memories: the host's search: the checked query -> its documents' texts, best first,
                each text alone or with its :class:`~gravity_core.context.window.Placement`
                (:func:`~gravity_core.context.policy.placement_of` a merged document's metadata).
            question_date: the day the question is asked (default: the KB's latest day).
            policy: how the budget is shared.

        Raises:
            InputDataError: as :meth:`search` (before ``memories`` is called).
        """
        question = required_text(query, "query")
        asked = _optional_date(question_date, "question_date")
        cap = (self.config or self.engine.config).token_budget
        share = policy.share(self.token_budget, cap)
        anchors, tokens = "", 0
        if share.anchors:
            context = self.engine.query(question, config=self.config, question_date=asked)
            anchors, tokens = self.engine.fit_anchors(context, share.anchors)
        found_texts = list(memories(question))
        texts = [item if isinstance(item, str) else item[0] for item in found_texts]
        placements = [Placement() if isinstance(item, str) else item[1] for item in found_texts]
        kept = memories_within(texts, share.host(tokens), self.engine.counter.count, placements, policy)
        found = format_memories(texts[n] for n in kept)
        text = "\n\n".join(part for part in (anchors, found) if part)
        return text or f"No memory matches {_quoted(question)}."

    def search_tool(
        self,
        query: str,
        question_date: object = None,
        memories: HostMemories | None = None,
    ) -> str:
        """The ``search_memory`` tool: :meth:`search`, or :meth:`search_with_memories` given ``memories``.

        The date comes as an agent sends it (:func:`date_argument`: ISO text).
        """
        asked = date_argument(question_date, "question_date")
        if memories is None:
            return self.search(query, question_date=asked)
        return self.search_with_memories(query, memories, question_date=asked)

    def timeline_tool(
        self, person: str | None = None, start: object = None, end: object = None, limit: int = 20
    ) -> str:
        """The ``timeline`` tool: :meth:`timeline` with dates as an agent sends them (ISO text)."""
        return self.timeline(person, date_argument(start, "start"), date_argument(end, "end"), limit=limit)

    def profile(self, name: str) -> str:
        """The profile of the entity whose name or alias is ``name`` (case-insensitive).

        Several entities of that name: the one named so (not by an alias), then the most
        mentioned. None: a short text saying so, with the known names closest to ``name`` (or the
        most mentioned ones).

        Raises:
            InputDataError: ``name`` is not a non-empty string.
        """
        wanted = required_text(name, "name")
        catalog = self._current()
        ids = catalog.names.get(wanted.casefold())
        if not ids:
            close = catalog.close_names(wanted)
            if close:
                return f"No entity profile named {_quoted(wanted)}. Close known names: {_names(close)}."
            return (
                f"No entity profile named {_quoted(wanted)}. "
                f"Known names: {_names(catalog.by_mentions[:_SUGGESTED])}."
            )
        text = self._blocks(catalog, [ScoredAnchor(AnchorKind.ENTITY, ids[0], 1.0)], detail=True)
        return text or f"The profile of {_quoted(wanted)} does not fit in {self.token_budget} tokens."

    def timeline(
        self,
        person: str | None = None,
        start: date | None = None,
        end: date | None = None,
        *,
        limit: int = 20,
    ) -> str:
        """Event records in chronological order, the most recent ``limit`` (and what fits the budget).

        Args:
            person: only events this person (a name or alias, case-insensitive) takes part in.
            start: only events whose days reach ``start`` or later.
            end: only events whose days reach ``end`` or earlier.
            limit: the most events shown (the latest ones).

        An event's days are its resolved time ('in March 2024' is the whole month), else the day it
        was mentioned. When the budget holds fewer events, the latest ones are kept.

        Raises:
            InputDataError: ``person`` is not ``None`` or a non-empty string, ``start`` or ``end``
                not a date, ``start`` after ``end``, or ``limit`` not an int of at least 1.
        """
        who = None if person is None else required_text(person, "person")
        first = _optional_date(start, "start")
        last = _optional_date(end, "end")
        if first is not None and last is not None and first > last:
            raise InputDataError(f"start ({first.isoformat()}) is after end ({last.isoformat()})")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InputDataError(f"limit must be an int of at least 1, got {limit!r}")
        catalog = self._current()
        events = catalog.events
        if who is not None:
            key = who.casefold()
            ids = frozenset(catalog.names.get(key, ()))
            events = [e for e in events if key in e.who or ids & e.who_ids]
            if not events:
                known = _names(catalog.people_in_events[:_SUGGESTED])
                return f"No event records with {_quoted(who)}. People in the event records: {known}."
        chosen = [
            e for e in events if (first is None or e.end >= first) and (last is None or e.start <= last)
        ][-limit:]
        if not chosen:
            return f"No event records {_filters(who, first, last)}."
        # Scored by recency, so the budget drops the oldest first; then only the latest run of events
        # that fits is kept, so the timeline has no gap.
        scored = [ScoredAnchor(AnchorKind.EVENT, e.id, float(n)) for n, e in enumerate(chosen, 1)]
        served = catalog.snapshot
        _, _, kept, _ = format_blocks(
            served.kb,
            scored,
            counter=self.engine.counter,
            token_budget=self.token_budget,
            rendered=served.rendered,
        )
        fitting = {a.id for a in kept}
        latest: list[ScoredAnchor] = []
        for anchor in reversed(scored):
            if anchor.id not in fitting:
                break
            latest.append(anchor)
        text = self._blocks(catalog, latest[::-1])
        if text:
            return text
        filters = _filters(who, first, last)
        return f"Not even the latest event record {filters} fits in {self.token_budget} tokens."

    def topic_arc(self, topic: str) -> str:
        """The best-matching topic's arc (what it was about in each session) and key facts.

        The topic is the one GRAVITY's topic module selects for ``topic`` (a label matching it
        exactly, case-insensitive, first). None: a short text saying so, with known topic labels.

        Raises:
            InputDataError: ``topic`` is not a non-empty string.
        """
        wanted = required_text(topic, "topic")
        catalog = self._current()
        topic_id = catalog.topic_ids.get(wanted.casefold())
        if topic_id is None:
            topic_id = self._matching_topic(wanted)
            catalog = self._current(self.engine.snapshot)  # the version that query read
        if topic_id is None or topic_id not in catalog.snapshot.kb.topics:
            labels = _names(catalog.topic_labels[:_SUGGESTED])
            return f"No topic matches {_quoted(wanted)}. Known topics: {labels}."
        text = self._blocks(catalog, [ScoredAnchor(AnchorKind.TOPIC, topic_id, 1.0)], detail=True)
        return text or f"The arc of {_quoted(wanted)} does not fit in {self.token_budget} tokens."

    def _matching_topic(self, wanted: str) -> str | None:
        base = self.config or self.engine.config
        only_topics = base.model_copy(
            update={
                "modules": frozenset({AnchorKind.TOPIC}),
                "k_topic": 1,
                "expand": False,
                "token_budget": None,
            }
        )
        context = self.engine.query(wanted, config=only_topics)
        return next((a.id for a in context.anchors if a.kind is AnchorKind.TOPIC), None)

    def stats(self) -> str:
        """How much the memory holds: entities, events, topics, utterances, sessions and their dates."""
        catalog = self._current()
        kb = catalog.snapshot.kb
        utterances, sessions, first, last = catalog.utterance_span
        counts = (
            f"{len(kb.entities)} entities, {len(kb.events)} events, {len(kb.topics)} topics, "
            f"{utterances} utterances in {sessions} sessions"
        )
        if first is None or last is None:
            return f"Memory: {counts}; nothing remembered yet."
        return f"Memory: {counts}, from {day_label(first)} to {day_label(last)}."


def _filters(who: str | None, first: date | None, last: date | None) -> str:
    """The filters of a timeline that found nothing: ``with 'Maya' from 1 March 2024 until 31 March 2024``."""
    parts = [f"with {_quoted(who)}"] if who is not None else []
    if first is not None:
        parts.append(f"from {day_label(first)}")
    if last is not None:
        parts.append(f"until {day_label(last)}")
    return " ".join(parts) if parts else "in the memory"


class UserMemoryTools:
    """The :class:`MemoryTools` of each user of a :class:`~gravity_core.serving.users.UserKBs`; thread-safe.

    :meth:`for_user` gives tools over ``users.engine(user_id)``, made again when that engine changes
    (the LRU dropped and loaded it again, or the user's KB was deleted), so one user's tools only
    ever read that user's KB. The tools of the ``users.max_engines`` users asked for most recently
    are kept.

    Args:
        users: the users' KBs.
        token_budget: as :class:`MemoryTools`.
        config: as :class:`MemoryTools` (default: each engine's, i.e. ``users.config``).
    """

    def __init__(
        self, users: UserKBs, *, token_budget: int = DEFAULT_TOOL_BUDGET, config: QueryConfig | None = None
    ) -> None:
        if not isinstance(users, UserKBs):
            raise ConfigurationError(f"UserMemoryTools needs a UserKBs, got {type(users).__name__}")
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
            raise ConfigurationError(f"token_budget must be an int of at least 1, got {token_budget!r}")
        self.users = users
        self.token_budget = token_budget
        self.config = config
        self._lock = threading.Lock()
        self._tools: OrderedDict[str, MemoryTools] = OrderedDict()

    def for_user(self, user_id: object) -> MemoryTools:
        """The tools over the KB that serves ``user_id`` now.

        Raises:
            ConfigurationError: ``user_id`` cannot name a user
                (:func:`~gravity_core.serving.users.check_user_id`).
            AnchorStoreError: the user's folder holds a KB that does not load.
        """
        checked = check_user_id(user_id)
        engine = self.users.engine(checked)
        with self._lock:
            kept = self._tools.get(checked)
            if kept is not None and kept.engine is engine:
                self._tools.move_to_end(checked)
                return kept
        tools = MemoryTools(engine, token_budget=self.token_budget, config=self.config)
        if not engine.records.utterances:  # no KB yet: the empty engine is not the user's to keep
            return tools
        with self._lock:
            self._tools[checked] = tools
            self._tools.move_to_end(checked)
            while len(self._tools) > self.users.max_engines:
                dropped, _ = self._tools.popitem(last=False)
                logger.debug("memory tools of user %s dropped", dropped)
        return tools


# -- what the model reads ---------------------------------------------------------------------
# The tools' names, descriptions and argument schemas, shared by the agent integrations so every
# framework offers the model the same four tools. Dates are text (models write them as strings);
# the wrappers read them with date_argument, and the tools check every value themselves.


class SearchMemoryArguments(BaseModel):
    """The arguments of ``search_memory``."""

    query: str = Field(
        description='What to look for, a question or keywords, e.g. "Where does Maya work now?".'
    )
    question_date: str | None = Field(
        default=None,
        description=(
            'The day the question is asked, YYYY-MM-DD, for phrases such as "last month"; '
            "leave it out to use the latest day in memory."
        ),
    )


class EntityProfileArguments(BaseModel):
    """The arguments of ``entity_profile``."""

    name: str = Field(description='The name or an alias, e.g. "Maya" (case does not matter).')


class TimelineArguments(BaseModel):
    """The arguments of ``timeline``."""

    person: str | None = Field(
        default=None, description="Only the events this person takes part in (a name or alias)."
    )
    start: str | None = Field(default=None, description="Only events on or after this day, YYYY-MM-DD.")
    end: str | None = Field(default=None, description="Only events on or before this day, YYYY-MM-DD.")
    limit: int = Field(default=20, description="How many of the latest matching events to show (at least 1).")


class TopicArcArguments(BaseModel):
    """The arguments of ``topic_arc``."""

    topic: str = Field(description='The topic in a few words, e.g. "pottery" or "the half marathon".')


@dataclass(frozen=True)
class ToolSpec:
    """One memory tool as a model sees it: its name, what it does, and its arguments' schema."""

    name: str
    description: str
    arguments: type[BaseModel]


TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "search_memory",
        "Search the long-term memory of earlier conversations for anything about the query. Returns the "
        "topic summaries, entity profiles and dated event records GRAVITY selects, each citing its source "
        "turns as [session:turn] (then the app's own stored memories, if it has a store). Use it for any "
        "question about what was said, done, planned or felt before.",
        SearchMemoryArguments,
    ),
    ToolSpec(
        "entity_profile",
        "Everything remembered about one person, pet, place or organisation: its type, attributes, "
        "relations, how they changed and when, who it is often mentioned with, and the source turns. "
        "An unknown name gets the closest known names.",
        EntityProfileArguments,
    ),
    ToolSpec(
        "timeline",
        "The remembered events in the order they happened, with their dates and participants; optionally "
        "only one person's, only those between two days, the latest few.",
        TimelineArguments,
    ),
    ToolSpec(
        "topic_arc",
        "How one topic of the conversations developed: what was said about it in each session, and its "
        "key facts.",
        TopicArcArguments,
    ),
)
"""The four tools, in the order the integrations list them."""

TOOL_NAMES: tuple[str, ...] = tuple(spec.name for spec in TOOL_SPECS)
"""``search_memory``, ``entity_profile``, ``timeline``, ``topic_arc``."""


class MemoryToolsSource:
    """The tools the wrappers answer with: one engine's, or each user's of a :class:`UserKBs`.

    Args:
        engine: the one KB's engine (not together with ``users``).
        users: the users' KBs.
        token_budget: as :class:`MemoryTools`.

    Raises:
        ConfigurationError: both or neither of ``engine`` and ``users``.
    """

    def __init__(
        self, engine: GravityEngine | None, users: UserKBs | None, *, token_budget: int = DEFAULT_TOOL_BUDGET
    ) -> None:
        if (engine is None) == (users is None):
            raise ConfigurationError(
                "gravity_tools needs exactly one of engine (one KB) or users= (a KB per user)"
            )
        self._one = None if engine is None else MemoryTools(engine, token_budget=token_budget)
        self._users = None if users is None else UserMemoryTools(users, token_budget=token_budget)

    def tools(self, user_id: Callable[[], object]) -> MemoryTools:
        """The one engine's tools, or those of the user ``user_id()`` names (asked only with ``users``)."""
        if self._one is not None:
            return self._one
        assert self._users is not None  # one of the two is set (__init__)
        return self._users.for_user(user_id())
