"""The LLM extractor: prompts a chat model per batch and turns its JSON into observations.

Every observation must cite utterances of the batch: ids the model invents are dropped, and an
observation left without a valid source is dropped too (logged and counted in
:attr:`LLMExtractor.dropped_observations`).
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from pydantic import BaseModel

from gravity_core.errors import ConfigurationError, GravityError
from gravity_core.llm.base import ChatModel
from gravity_core.llm.cache import ResponseCache
from gravity_core.llm.json_call import call_json
from gravity_core.prompts import (
    DEFAULT_MAX_KNOWN_ENTITIES,
    DEFAULT_MAX_KNOWN_TOPICS,
    ENTITIES,
    EVENTS,
    FUSED,
    SUMMARIES,
    TOPICS,
    BatchSummary,
    EntityExtraction,
    EventExtraction,
    ExtractedEntity,
    ExtractedEvent,
    ExtractedTopic,
    FusedExtraction,
    PromptContext,
    PromptLibrary,
    TopicExtraction,
    default_prompts,
)
from gravity_core.prompts.entities import ExtractedAttribute, ExtractedRelation
from gravity_core.schema import (
    AnchorUpdate,
    AttributeObservation,
    EntityObservation,
    EventObservation,
    KnowledgeBase,
    RelationObservation,
    SummaryObservation,
    TimeRef,
    TopicObservation,
    Utterance,
)
from gravity_core.storage.file_cache import RecordedFiles
from gravity_core.temporal import normalize
from gravity_core.temporal.context import tense_cue

__all__ = ["DEFAULT_EXCLUSIVE_ATTRIBUTES", "DEFAULT_MODULES", "LLMExtractor"]

logger = logging.getLogger(__name__)

DEFAULT_MODULES: tuple[str, ...] = (ENTITIES, EVENTS, TOPICS)

DEFAULT_EXCLUSIVE_ATTRIBUTES: frozenset[str] = frozenset(
    {
        "age",
        "occupation",
        "job",
        "job_title",
        "employer",
        "location",
        "residence",
        "home",
        "city",
        "country",
        "relationship_status",
        "marital_status",
    }
)
"""Attribute names treated as single-valued even when the model does not flag them."""

_EXPECTED_MODELS: dict[str, type[BaseModel]] = {
    ENTITIES: EntityExtraction,
    EVENTS: EventExtraction,
    TOPICS: TopicExtraction,
    FUSED: FusedExtraction,
}


def _snake(name: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", name.strip().casefold()).strip("_")


def _clean(texts: Iterable[str]) -> list[str]:
    """Stripped, non-empty, without duplicates (case-insensitive), in order."""
    seen: set[str] = set()
    out: list[str] = []
    for text in texts:
        value = " ".join(text.split())
        if value and value.casefold() not in seen:
            seen.add(value.casefold())
            out.append(value)
    return out


def _confidence(value: float) -> float:
    if math.isnan(value):
        return 0.7
    return min(1.0, max(0.0, value))


class _BatchConverter:
    """Turns one batch's parsed answers into observations, checking every source id."""

    def __init__(
        self, batch: Sequence[Utterance], kb: KnowledgeBase, exclusive_attributes: Collection[str]
    ) -> None:
        self.by_id = {u.id: u for u in batch}
        self.order = {u.id: i for i, u in enumerate(batch)}
        self.speakers = {u.speaker.casefold() for u in batch}
        self.topic_ids = set(kb.topics)
        self.exclusive_attributes = exclusive_attributes
        self.dropped = 0
        self.unknown_ids = 0

    # -- provenance -------------------------------------------------------------------------

    def _sources(self, ids: Iterable[str], what: str) -> list[str]:
        valid: set[str] = set()
        for raw in ids:
            source = raw.strip().strip("[]").strip()
            if source in self.by_id:
                valid.add(source)
            else:
                self.unknown_ids += 1
                logger.debug("dropping unknown source id %r cited for %s", raw, what)
        if not valid:
            self.dropped += 1
            logger.warning("dropping %s: it cites no utterance of the batch", what)
        return sorted(valid, key=self.order.__getitem__)

    def _time(self, phrase: str | None, sources: Sequence[str]) -> TimeRef | None:
        if phrase is None or not phrase.strip():
            return None
        phrase = phrase.strip()
        source = self.by_id[sources[0]]
        # The phrase alone rarely shows the tense ('in June'); the sentence it was said in does.
        prefer = tense_cue(_sentence_with(source.text, phrase))
        try:
            return normalize(phrase, source.timestamp, prefer=prefer)
        except (ValueError, GravityError) as exc:
            logger.warning("could not normalize time phrase %r: %s", phrase, exc)
            return TimeRef(raw=phrase)

    # -- entities -----------------------------------------------------------------------------

    def _attribute(self, item: ExtractedAttribute, owner: str) -> AttributeObservation | None:
        name, value = _snake(item.name), item.value.strip()
        if not name or not value:
            self.dropped += 1
            logger.warning("dropping an attribute of %r without name or value", owner)
            return None
        sources = self._sources(item.sources, f"attribute {name}={value!r} of {owner!r}")
        if not sources:
            return None
        return AttributeObservation(
            name=name,
            value=value,
            confidence=_confidence(item.confidence),
            exclusive=item.exclusive or name in self.exclusive_attributes,
            sources=sources,
        )

    def _relation(self, item: ExtractedRelation, owner: str) -> RelationObservation | None:
        relation, obj = _snake(item.relation), item.object.strip()
        if not relation or not obj:
            self.dropped += 1
            logger.warning("dropping a relation of %r without type or object", owner)
            return None
        sources = self._sources(item.sources, f"relation {owner!r} {relation} {obj!r}")
        if not sources:
            return None
        return RelationObservation(
            relation=relation,
            object=obj,
            object_type=item.object_type,
            time=self._time(item.when, sources),
            confidence=_confidence(item.confidence),
            sources=sources,
        )

    def entity(self, item: ExtractedEntity) -> EntityObservation | None:
        name = " ".join(item.name.split())
        if not name:
            self.dropped += 1
            logger.warning("dropping an entity without a name")
            return None
        sources = self._sources(item.sources, f"entity {name!r}")
        if not sources:
            return None
        attributes = [a for a in (self._attribute(x, name) for x in item.attributes) if a is not None]
        relations = [r for r in (self._relation(x, name) for x in item.relations) if r is not None]
        return EntityObservation(
            name=name,
            type=item.type,
            aliases=[a for a in _clean(item.aliases) if a.casefold() != name.casefold()],
            is_speaker=item.is_speaker or name.casefold() in self.speakers,
            attributes=attributes,
            relations=relations,
            sources=sources,
        )

    # -- events -------------------------------------------------------------------------------

    def event(self, item: ExtractedEvent) -> EventObservation | None:
        what = " ".join(item.what.split())
        if not what:
            self.dropped += 1
            logger.warning("dropping an event without a 'what'")
            return None
        sources = self._sources(item.sources, f"event {what!r}")
        if not sources:
            return None
        return EventObservation(
            who=_clean(item.who),
            what=what,
            when=self._time(item.when, sources),
            where=item.where.strip() if item.where else None,
            outcome=item.outcome.strip() if item.outcome else None,
            sources=sources,
        )

    # -- topics -------------------------------------------------------------------------------

    def topics(self, item: ExtractedTopic) -> list[TopicObservation]:
        label = " ".join(item.label.split())
        if not label:
            self.dropped += 1
            logger.warning("dropping a topic without a label")
            return []
        sources = self._sources(item.sources, f"topic {label!r}")
        if not sources:
            return []
        topic_id = item.topic_id.strip() if item.topic_id else None
        if topic_id is not None and topic_id not in self.topic_ids:
            logger.warning("topic %r names unknown topic id %r; treating it as a new topic", label, topic_id)
            topic_id = None
        # One observation per session: a topic the model spread over two sessions is split.
        by_session: dict[str, list[str]] = {}
        for source in sources:
            by_session.setdefault(self.by_id[source].session, []).append(source)
        observations = []
        for session, session_sources in by_session.items():
            participants = _clean(item.participants) or _clean(self.by_id[s].speaker for s in session_sources)
            observations.append(
                TopicObservation(
                    label=label,
                    keywords=_clean(item.keywords),
                    participants=participants,
                    session=session,
                    summary=item.summary.strip(),
                    facts=_clean(item.facts),
                    topic_id=topic_id,
                    sources=session_sources,
                )
            )
        return observations


def _summary_observations(answer: BatchSummary, batch: Sequence[Utterance]) -> list[SummaryObservation]:
    """The batch summary, attributed to each session it cites (all of the batch when it cites none)."""
    known = {u.id: u for u in batch}
    cited = [known[s] for s in answer.sources if s in known] or list(batch)
    sessions = dict.fromkeys(u.session for u in cited)
    return [
        SummaryObservation(
            session=session,
            text=answer.summary,
            sources=[u.id for u in cited if u.session == session],
        )
        for session in sessions
        if answer.summary.strip()
    ]


class LLMExtractor:
    """Extracts entities, events and topics from a batch with a chat model.

    In module mode (the default) it makes one call per module; with ``fused=True`` one call
    returns all three, and the builder fills its batches across sessions (:attr:`spans_sessions`).
    Event and relation time phrases are normalized against the timestamp of the first utterance
    they cite.

    Args:
        model: the chat model.
        modules: which modules to run in module mode, any of ``"entities"``, ``"events"``,
            ``"topics"``.
        fused: one call for all three modules instead of one call per module.
        prompts: the prompt library; :func:`~gravity_core.prompts.default_prompts` if omitted.
        cache: optional response cache (re-asks are cached too).
        max_attempts: requests per call at most, re-asks included.
        max_known_entities: how many known entities the prompts list.
        max_known_topics: how many known topics the prompts list.
        exclusive_attributes: attribute names always treated as single-valued.
        summaries: also ask for a free-form summary of each batch (one more call per batch),
            kept for the '+Sum' baseline of the evaluation.
        max_concurrency: in module mode, how many of a batch's calls (one per module, plus the
            summary) are sent at once; 1 sends them one after another.

    Raises:
        ConfigurationError: unknown modules, or a prompt library whose response models the
            extractor cannot read.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        modules: Sequence[str] = DEFAULT_MODULES,
        fused: bool = False,
        prompts: PromptLibrary | None = None,
        cache: ResponseCache | None = None,
        max_attempts: int = 3,
        max_known_entities: int = DEFAULT_MAX_KNOWN_ENTITIES,
        max_known_topics: int = DEFAULT_MAX_KNOWN_TOPICS,
        exclusive_attributes: Collection[str] = DEFAULT_EXCLUSIVE_ATTRIBUTES,
        summaries: bool = False,
        max_concurrency: int = 1,
    ) -> None:
        modules = tuple(dict.fromkeys(modules))
        unknown = [m for m in modules if m not in DEFAULT_MODULES]
        if unknown or not modules:
            raise ConfigurationError(
                f"modules must be a non-empty subset of {list(DEFAULT_MODULES)}, got {list(modules)}"
            )
        if fused and set(modules) != set(DEFAULT_MODULES):
            raise ConfigurationError("fused=True extracts all three modules; do not restrict modules")
        if max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be at least 1, got {max_attempts}")
        if max_concurrency < 1:
            raise ConfigurationError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self.max_concurrency = max_concurrency
        self.model = model
        self.modules = modules
        self.fused = fused
        self.prompts = prompts if prompts is not None else default_prompts()
        for task in (FUSED,) if fused else modules:
            got, expected = self.prompts.response_model(task), _EXPECTED_MODELS[task]
            if not issubclass(got, expected):
                raise ConfigurationError(
                    f"the response model of prompt task {task!r} must subclass {expected.__name__}, "
                    f"got {got.__name__}"
                )
        self.cache = cache
        self.summaries = summaries
        self.max_attempts = max_attempts
        self.max_known_entities = max_known_entities
        self.max_known_topics = max_known_topics
        self.exclusive_attributes = frozenset(_snake(a) for a in exclusive_attributes)
        self._lock = threading.Lock()
        self._dropped = 0
        self._unknown_ids = 0

    @property
    def name(self) -> str:
        """``llm:<model_name>:fused`` or ``llm:<model_name>:modules``."""
        return f"llm:{self.model.model_name}:{'fused' if self.fused else 'modules'}"

    @property
    def spans_sessions(self) -> bool:
        """True in fused mode: its prompt marks each session, so a batch may hold several.

        In module mode batches keep to one session each, as before.
        """
        return self.fused

    def caches(self) -> list[RecordedFiles]:
        """The file caches a forget prunes: the response cache, if any."""
        return [self.cache] if self.cache is not None else []

    @property
    def dropped_observations(self) -> int:
        """Observations dropped so far because they cited no utterance of their batch."""
        return self._dropped

    @property
    def unknown_source_ids(self) -> int:
        """Source ids cited so far that were not in the batch (and were removed)."""
        return self._unknown_ids

    def _ask(self, task: str, context: PromptContext) -> BaseModel:
        messages = self.prompts.build(task, context)
        parsed, _ = call_json(
            self.model,
            messages,
            self.prompts.response_model(task),
            max_attempts=self.max_attempts,
            cache=self.cache,
        )
        return parsed

    def _ask_all(self, tasks: Sequence[str], context: PromptContext) -> dict[str, BaseModel]:
        """Each task's answer, the calls sent ``max_concurrency`` at a time (first error raised)."""
        workers = min(self.max_concurrency, len(tasks))
        if workers <= 1:
            return {task: self._ask(task, context) for task in tasks}
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gravity-extract") as pool:
            return dict(zip(tasks, pool.map(lambda task: self._ask(task, context), tasks), strict=True))

    def extract(self, batch: Sequence[Utterance], kb: KnowledgeBase) -> AnchorUpdate:
        """Observations of ``batch``; the KB is read for known entity names and topic ids.

        Raises:
            UnexpectedModelOutput: an answer stayed invalid after the re-asks.
            ProviderError: the model's provider failed.
        """
        update = AnchorUpdate()
        if not batch:
            return update
        context = PromptContext.from_kb(
            batch, kb, max_entities=self.max_known_entities, max_topics=self.max_known_topics
        )
        entities: list[ExtractedEntity] = []
        events: list[ExtractedEvent] = []
        topics: list[ExtractedTopic] = []
        tasks = [FUSED] if self.fused else list(self.modules)
        if self.summaries:
            tasks.append(SUMMARIES)
        answers = self._ask_all(tasks, context)
        if self.fused:
            fused = cast(FusedExtraction, answers[FUSED])
            entities, events, topics = fused.entities, fused.events, fused.topics
        else:
            if ENTITIES in answers:
                entities = cast(EntityExtraction, answers[ENTITIES]).entities
            if EVENTS in answers:
                events = cast(EventExtraction, answers[EVENTS]).events
            if TOPICS in answers:
                topics = cast(TopicExtraction, answers[TOPICS]).topics
        if SUMMARIES in answers:
            update.summaries = _summary_observations(cast(BatchSummary, answers[SUMMARIES]), batch)
        converter = _BatchConverter(batch, kb, self.exclusive_attributes)
        update.entities = [e for e in map(converter.entity, entities) if e is not None]
        update.events = [e for e in map(converter.event, events) if e is not None]
        update.topics = [t for item in topics for t in converter.topics(item)]
        with self._lock:
            self._dropped += converter.dropped
            self._unknown_ids += converter.unknown_ids
        if converter.dropped or converter.unknown_ids:
            logger.warning(
                "batch %s..%s: dropped %d observation(s) and %d unknown source id(s)",
                batch[0].id,
                batch[-1].id,
                converter.dropped,
                converter.unknown_ids,
            )
        return update


_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")


def _sentence_with(text: str, phrase: str) -> str:
    """The sentence of ``text`` that contains ``phrase`` (case-insensitive), else the whole text."""
    needle = phrase.casefold()
    for match in _SENTENCE.finditer(text):
        if needle in match.group().casefold():
            return match.group()
    return text
