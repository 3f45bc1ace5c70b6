"""The prompt library: task name -> (prompt builder, response model), immutable and overridable."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from pydantic import BaseModel

from gravity_core.errors import ConfigurationError
from gravity_core.llm.base import Message
from gravity_core.prompts.context import PromptContext
from gravity_core.prompts.entities import EntityExtraction, build_entity_messages
from gravity_core.prompts.events import EventExtraction, build_event_messages
from gravity_core.prompts.fused import FusedExtraction, build_fused_messages
from gravity_core.prompts.summaries import BatchSummary, build_summary_messages
from gravity_core.prompts.topics import TopicExtraction, build_topic_messages

__all__ = [
    "ENTITIES",
    "EVENTS",
    "FUSED",
    "SUMMARIES",
    "TOPICS",
    "PromptBuilder",
    "PromptLibrary",
    "PromptTask",
    "default_prompts",
]

ENTITIES = "entities"
EVENTS = "events"
TOPICS = "topics"
FUSED = "fused"
SUMMARIES = "summaries"

PromptBuilder = Callable[[PromptContext], list[Message]]
"""A pure function from the prompt context to the messages sent to the model."""


@dataclass(frozen=True)
class PromptTask:
    """One extraction task: how to ask, and the model the answer must fill."""

    name: str
    build: PromptBuilder
    response_model: type[BaseModel]


@dataclass(frozen=True)
class PromptLibrary:
    """An immutable set of prompt tasks, looked up by name.

    Use :func:`default_prompts` for GRAVITY's prompts and :meth:`with_override` to swap one.
    """

    tasks: Mapping[str, PromptTask] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", MappingProxyType(dict(self.tasks)))

    def __getitem__(self, task: str) -> PromptTask:
        try:
            return self.tasks[task]
        except KeyError:
            known = ", ".join(sorted(self.tasks)) or "none"
            raise ConfigurationError(f"unknown prompt task {task!r} (known: {known})") from None

    def __contains__(self, task: object) -> bool:
        return task in self.tasks

    def __iter__(self) -> Iterator[str]:
        return iter(self.tasks)

    def build(self, task: str, context: PromptContext) -> list[Message]:
        """The messages of ``task`` for ``context``."""
        return self[task].build(context)

    def response_model(self, task: str) -> type[BaseModel]:
        """The pydantic model the answer to ``task`` must fill."""
        return self[task].response_model

    def with_override(
        self,
        task: str,
        build: PromptBuilder,
        response_model: type[BaseModel] | None = None,
    ) -> PromptLibrary:
        """A copy of the library where ``task`` uses another prompt builder.

        Args:
            task: name of an existing task, e.g. ``"entities"``.
            build: the new prompt builder.
            response_model: optionally a subclass of the task's response model (the extractor
                reads the answer through the original fields).

        Raises:
            ConfigurationError: unknown task, or a response model the extractor cannot read.
        """
        current = self[task]
        if not callable(build):
            raise ConfigurationError(f"the prompt builder for {task!r} must be callable")
        model = response_model or current.response_model
        if not (isinstance(model, type) and issubclass(model, current.response_model)):
            raise ConfigurationError(
                f"the response model for {task!r} must subclass {current.response_model.__name__}"
            )
        tasks = dict(self.tasks)
        tasks[task] = PromptTask(name=task, build=build, response_model=model)
        return PromptLibrary(tasks)


def default_prompts() -> PromptLibrary:
    """GRAVITY's prompts: entities, events, topics, fused and summaries."""
    return PromptLibrary(
        {
            ENTITIES: PromptTask(ENTITIES, build_entity_messages, EntityExtraction),
            EVENTS: PromptTask(EVENTS, build_event_messages, EventExtraction),
            TOPICS: PromptTask(TOPICS, build_topic_messages, TopicExtraction),
            FUSED: PromptTask(FUSED, build_fused_messages, FusedExtraction),
            SUMMARIES: PromptTask(SUMMARIES, build_summary_messages, BatchSummary),
        }
    )
