"""One counting fake model for the build-cost benchmark, usable from GRAVITY and from LangChain.

:func:`fake_answer` answers any prompt it is given with well-formed output: a GRAVITY extraction
task (``FusedExtraction``, ``EntityExtraction``, ``EventExtraction``, ``TopicExtraction``,
``BatchSummary``; found by its response model's name in the prompt) gets JSON citing the batch's
utterance ids; LangChain's ``ConversationEntityMemory`` prompts get a comma-separated entity list or an
updated one-line summary. Its answers grow with the batch (one entity per speaker, one event per
four turns, one topic per ten), so completion tokens are of a plausible order, but they are the
fake's, not a real model's.

:class:`TokenMeter` counts calls and tokens (cl100k, offline) for either side:
:meth:`TokenMeter.gravity_model` is a :class:`~gravity_core.testing.FakeChatModel`,
:meth:`TokenMeter.langchain_model` a LangChain ``FakeListChatModel``, both answering with
:func:`fake_answer` and recording into the same kind of meter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gravity_core.llm.base import Message
from gravity_core.testing import FakeChatModel
from gravity_core.text.tokens import TokenCounter

if TYPE_CHECKING:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

__all__ = ["TokenMeter", "fake_answer"]

_LINE = re.compile(r"^\[(?P<id>[^\]]+)\] (?:\([^)]*\) )?(?P<speaker>[^:]+): (?P<text>.*)$", re.MULTILINE)
_CONVERSATION = re.compile(r"<CONVERSATION>\n(.*?)\n</CONVERSATION>", re.DOTALL)
_KNOWN = re.compile(r"<KNOWN (?:ENTITIES|TOPICS)>\n(.*?)\n</KNOWN (?:ENTITIES|TOPICS)>", re.DOTALL)
_CAPITALIZED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]{2,})\b")
_NOT_NAMES = frozenset(
    [
        "The",
        "This",
        "That",
        "What",
        "When",
        "Where",
        "Why",
        "How",
        "Hey",
        "Thanks",
        "Thank",
        "Wow",
        "Yeah",
        "Yes",
        "Sure",
        "Sounds",
        "Great",
        "Good",
        "Nice",
    ]
)
_TASKS = ("FusedExtraction", "EntityExtraction", "EventExtraction", "TopicExtraction", "BatchSummary")

_EVENTS_EVERY = 4
_TOPIC_EVERY = 10
_MAX_SOURCES = 10


@dataclass(frozen=True)
class _Turn:
    id: str
    speaker: str
    text: str


def _words(text: str, count: int) -> str:
    return " ".join(text.split()[:count])


def _entities(turns: Sequence[_Turn]) -> list[dict[str, Any]]:
    speakers = list(dict.fromkeys(t.speaker for t in turns))
    out = []
    for speaker in speakers:
        own = [t for t in turns if t.speaker == speaker]
        out.append(
            {
                "name": speaker,
                "type": "person",
                "is_speaker": True,
                "attributes": [{"name": "said", "value": _words(own[0].text, 6), "sources": [own[0].id]}],
                "sources": [t.id for t in own][:_MAX_SOURCES],
            }
        )
    return out


def _events(turns: Sequence[_Turn]) -> list[dict[str, Any]]:
    return [
        {"who": [t.speaker], "what": _words(t.text, 10), "when": None, "sources": [t.id]}
        for t in turns[::_EVENTS_EVERY]
    ]


def _topics(turns: Sequence[_Turn]) -> list[dict[str, Any]]:
    out = []
    for start in range(0, len(turns), _TOPIC_EVERY):
        chunk = turns[start : start + _TOPIC_EVERY]
        words = [w.strip(".,!?").lower() for w in chunk[0].text.split() if len(w) > 4][:4]
        out.append(
            {
                "label": " ".join(words[:3]) or "conversation",
                "keywords": words,
                "participants": list(dict.fromkeys(t.speaker for t in chunk)),
                "summary": _words(chunk[0].text, 20),
                "facts": [],
                "sources": [t.id for t in chunk],
            }
        )
    return out


def _gravity_answer(task: str, prompt: str) -> str:
    block = _CONVERSATION.search(prompt)
    turns = [_Turn(m["id"], m["speaker"], m["text"]) for m in _LINE.finditer(block.group(1) if block else "")]
    if task == "BatchSummary":
        return json.dumps(
            {"summary": " ".join(_words(t.text, 8) for t in turns[:5]), "sources": [t.id for t in turns][:5]}
        )
    answer: dict[str, Any] = {}
    if task in ("FusedExtraction", "EntityExtraction"):
        answer["entities"] = _entities(turns)
    if task in ("FusedExtraction", "EventExtraction"):
        answer["events"] = _events(turns)
    if task in ("FusedExtraction", "TopicExtraction"):
        answer["topics"] = _topics(turns)
    return json.dumps(answer, ensure_ascii=False)


def _after(prompt: str, marker: str, end: str | None = None) -> str:
    tail = prompt.rsplit(marker, 1)[-1]
    return tail.split(end, 1)[0] if end else tail


def _entity_memory_answer(prompt: str) -> str:
    if "Updated summary:" in prompt:
        entity = _after(prompt, "Entity to summarize:\n", "\n").strip()
        summary = _after(prompt, f"Existing summary of {entity}:\n", "\n\nLast line").strip()
        line = _after(prompt, "Last line of conversation:\nHuman: ", "\nUpdated summary:").strip()
        # A bounded summary, as a model keeps it: the last two sentences plus the new one.
        sentences = [s for s in summary.split(". ") if s][-2:]
        return ". ".join([*sentences, f"{entity}: {_words(line, 12)}"])
    line = _after(prompt, "Human: ", "\n\nOutput:")
    speaker, _, text = line.partition(": ")
    names = [speaker.strip()] if text else []
    names += [w for w in _CAPITALIZED.findall(text) if w not in _NOT_NAMES]
    unique = list(dict.fromkeys(n for n in names if n))[:3]
    return ", ".join(unique) if unique else "NONE"


def fake_answer(prompt: str) -> str:
    """A well-formed answer to a GRAVITY extraction prompt or a ConversationEntityMemory prompt."""
    for task in _TASKS:
        # The task's response model names it: as the JSON schema's title, or as an outline's first line.
        if f'"title": "{task}"' in prompt or f"\n{task}\n" in prompt:
            return _gravity_answer(task, prompt)
    return _entity_memory_answer(prompt)


@dataclass
class TokenMeter:
    """Calls, prompt tokens and completion tokens of one fake model, plus where the prompt tokens went.

    Prompt tokens are the cl100k tokens of every message's content (no per-message overhead);
    ``conversation_tokens`` and ``known_tokens`` are the parts of them inside GRAVITY's
    ``<CONVERSATION>`` and ``<KNOWN ...>`` sections, the rest being instructions and schema.
    """

    counter: TokenCounter = field(default_factory=TokenCounter)
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    conversation_tokens: int = 0
    known_tokens: int = 0

    def answer(self, prompt: str) -> str:
        """Answer ``prompt`` with :func:`fake_answer`, counting the call and its tokens."""
        completion = fake_answer(prompt)
        self.calls += 1
        self.prompt_tokens += self.counter.count(prompt)
        self.completion_tokens += self.counter.count(completion)
        block = _CONVERSATION.search(prompt)
        if block:
            self.conversation_tokens += self.counter.count(block.group(1))
        self.known_tokens += sum(self.counter.count(m.group(1)) for m in _KNOWN.finditer(prompt))
        return completion

    def _answer_messages(self, messages: Sequence[Message]) -> str:
        return self.answer("\n".join(m["content"] for m in messages))

    def gravity_model(self) -> FakeChatModel:
        """A GRAVITY :class:`~gravity_core.llm.base.ChatModel` that answers through this meter."""
        return FakeChatModel(self._answer_messages, model_name="counting-fake")

    def langchain_model(self) -> FakeListChatModel:
        """A LangChain chat model (a ``FakeListChatModel``) that answers through this meter."""
        from langchain_core.language_models.fake_chat_models import FakeListChatModel
        from langchain_core.messages import BaseMessage

        meter = self

        class _MeteredChatModel(FakeListChatModel):
            def _call(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> str:
                return meter.answer("\n".join(str(m.content) for m in messages))

        return _MeteredChatModel(responses=[])

    def summary(self, utterances: int) -> dict[str, Any]:
        """The counts, and calls and tokens per utterance."""
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "prompt_conversation_tokens": self.conversation_tokens,
            "prompt_known_tokens": self.known_tokens,
            "prompt_instruction_tokens": self.prompt_tokens - self.conversation_tokens - self.known_tokens,
            "calls_per_utterance": round(self.calls / max(utterances, 1), 4),
            "prompt_tokens_per_utterance": round(self.prompt_tokens / max(utterances, 1), 1),
        }
