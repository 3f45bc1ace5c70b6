"""Chat messages of any framework as GRAVITY utterances, and a KB built from them.

The LangChain and LlamaIndex adapters (``gravity_langchain.utterances_from_messages``,
``gravity_llamaindex.utterances_from_chat_messages``) turn their framework's messages into
:class:`NeutralMessage` and call :func:`utterances_from_neutral_messages`, so both read the same
fields with the same rules and fail the same way; their build functions call
:func:`build_kb_from_utterances` and their forget functions :func:`forget_utterances`. Nothing here
imports a framework.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from types import MappingProxyType
from typing import ParamSpec, TypeVar

from gravity_core.build import DEFAULT_BATCH_SIZE, AnchorBuilder
from gravity_core.build.forget import ForgetReport, ForgetRequest
from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.extract.base import Extractor
from gravity_core.llm.base import ChatModel
from gravity_core.loaders import read_timestamp
from gravity_core.schema import Utterance
from gravity_core.storage.store import AnchorStore

__all__ = [
    "DEFAULT_SESSION",
    "DEFAULT_SPEAKERS",
    "RENAMED_ARGUMENTS",
    "TIMESTAMP_KEYS",
    "NeutralMessage",
    "build_kb_from_utterances",
    "forget_utterances",
    "forgetting_time",
    "normalize_role",
    "renamed_arguments",
    "utterances_from_neutral_messages",
]

logger = logging.getLogger(__name__)

DEFAULT_SESSION = "session_1"
"""The session of messages that name none, unless the caller passes another."""

DEFAULT_SPEAKERS: Mapping[str, str] = MappingProxyType({"user": "User", "assistant": "Assistant"})
"""Speaker names of unnamed messages by role; messages of other roles (system, tool) are skipped.

The offline extractor makes no entity profile for the speaker "Assistant" (an AI is not a person,
see ``gravity_core.extract.offline.entities.GENERIC_ASSISTANT_NAMES``); "User" gets one, since the
user's relations, pets and attributes belong to it. Name the assistant (``speakers={"assistant":
"Nova"}``) to give a persona its own profile.
"""

TIMESTAMP_KEYS = ("timestamp", "time", "created_at")
"""Metadata keys read for a message's timestamp, in this order."""

RENAMED_ARGUMENTS: Mapping[str, str] = MappingProxyType({"roles": "speakers", "timestamp": "default_time"})
"""Old argument names of the framework adapters -> the new ones; the old ones are refused by name."""

_SPEAKER_KEYS = ("speaker", "name")
_SESSION_KEYS = ("session", "session_id")

# The frameworks' names for the same roles: LangChain's message types ("human", "ai"), Cohere's
# "chatbot", Gemini's "model", OpenAI's "developer" (a system prompt).
_ROLE_ALIASES = {
    "human": "user",
    "ai": "assistant",
    "chatbot": "assistant",
    "model": "assistant",
    "developer": "system",
}


def normalize_role(role: str) -> str:
    """A message role in GRAVITY's words: "user", "assistant", "system", "tool", "function", ...

    LangChain's "human" / "ai", and "chatbot", "model" and "developer", become "user",
    "assistant" and "system"; any other role is lowercased and kept.
    """
    low = str(role).strip().lower()
    return _ROLE_ALIASES.get(low, low)


@dataclass(frozen=True)
class NeutralMessage:
    """One chat message as a framework gives it, before any GRAVITY rule is applied.

    Attributes:
        role: the sender's role, normalized by :func:`normalize_role` on construction.
        text: the message's text.
        name: the framework's own name field (LangChain's ``message.name``), if any.
        id: the framework's own id field (LangChain's ``message.id``), if any.
        metadata: the message's metadata mappings with the names error messages give them, in the
            order they are read, e.g. ``(("additional_kwargs", {...}), ("response_metadata", {...}))``.
    """

    role: str
    text: str
    name: str | None = None
    id: str | None = None
    metadata: tuple[tuple[str, Mapping[str, object]], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "role", normalize_role(self.role))

    def fields(self, keys: Sequence[str]) -> list[tuple[str, object]]:
        """Every ``(field label, value)`` of ``keys`` set (not ``None``) in the metadata.

        They come in reading order (mapping by mapping, keys in order); a label reads e.g.
        ``additional_kwargs["time"]``.
        """
        return [
            (f'{source}["{key}"]', mapping[key])
            for source, mapping in self.metadata
            for key in keys
            if mapping.get(key) is not None
        ]


def _record(index: int, turn_id: str | None) -> str:
    return f"messages[{index}] (id {turn_id!r})" if turn_id else f"messages[{index}]"


def _text_field(value: object, *, record: str, field: str) -> str | None:
    """A string field's value stripped; ``None`` when it is blank. Anything else is an error."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputDataError(f"expected a string, got {type(value).__name__}", record=record, field=field)
    return value.strip() or None


def _first_text(message: NeutralMessage, keys: Sequence[str], record: str) -> str | None:
    for field, value in message.fields(keys):
        text = _text_field(value, record=record, field=field)
        if text is not None:
            return text
    return None


def _session(message: NeutralMessage, default: str, record: str) -> str:
    """The message's "session" / "session_id" (they must agree), else ``default``."""
    found = [
        (field, text)
        for field, value in message.fields(_SESSION_KEYS)
        if (text := _text_field(value, record=record, field=field)) is not None
    ]
    if len({text for _, text in found}) > 1:
        said = " but ".join(f"{field} is {text!r}" for field, text in found)
        raise InputDataError(f"{said}; they must agree", record=record, field="session")
    return found[0][1] if found else default


def _timestamp(message: NeutralMessage, default: datetime | None, record: str) -> datetime:
    stamped = message.fields(TIMESTAMP_KEYS)
    if stamped:
        field, value = stamped[0]
        return read_timestamp(value, record=record, field=field)
    if default is None:
        raise InputDataError(
            "the message has no timestamp (metadata 'timestamp', 'time' or 'created_at') and no "
            "default_time was given; pass default_time (e.g. datetime.now(UTC) for a live chat)",
            record=record,
            field="timestamp",
        )
    return default


def _attachments(message: NeutralMessage, record: str) -> list[str]:
    found = message.fields(("attachments",))
    if not found:
        return []
    field, value = found[0]
    if not isinstance(value, list | tuple):
        raise InputDataError(
            f"expected a list of strings, got {type(value).__name__}", record=record, field=field
        )
    for position, item in enumerate(value):
        if not isinstance(item, str):
            raise InputDataError(
                f"expected a list of strings; item {position} is of type {type(item).__name__}",
                record=record,
                field=field,
            )
    return [item for item in value if item.strip()]


def _default_time(value: datetime | date | None) -> datetime | None:
    """``default_time`` as an aware datetime: a plain date is midnight UTC, a naive time is UTC."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime.combine(value, time(0, 0), tzinfo=UTC)
    raise ConfigurationError(f"default_time must be a datetime or a date, got {type(value).__name__}")


def _speaker_names(speakers: Mapping[str, str] | None) -> dict[str, str]:
    names = dict(DEFAULT_SPEAKERS)
    for role, name in (speakers or {}).items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"speakers[{role!r}] must be a non-empty string, got {name!r}")
        names[normalize_role(role)] = name.strip()
    return names


def utterances_from_neutral_messages(
    messages: Sequence[NeutralMessage],
    *,
    session: str = DEFAULT_SESSION,
    default_time: datetime | date | None = None,
    speakers: Mapping[str, str] | None = None,
) -> list[Utterance]:
    """Turn chat messages into GRAVITY utterances, in order, by one set of rules.

    A field is read from the message's metadata mappings in their order; the first that holds it
    (not ``None``) wins, and a blank string counts as absent.

    - speaker: metadata ``"speaker"`` (or ``"name"``), else the message's ``name``, else
      ``speakers[role]`` (default :data:`DEFAULT_SPEAKERS`: "User", "Assistant"). Messages of a role
      without a speaker name (system, tool, function) are skipped, as are messages without text.
    - session: metadata ``"session"`` or ``"session_id"`` (if both are set they must agree), else
      ``session``.
    - timestamp: metadata ``"timestamp"``, ``"time"`` or ``"created_at"``: a datetime (one without a
      zone is taken as UTC), a date (midnight UTC), an ISO 8601 string or a Unix time in seconds
      (finite, years 1-9999; a bool is not one), read by :func:`gravity_core.loaders.read_timestamp`.
      Else ``default_time``; with neither, an :class:`InputDataError`. GRAVITY never guesses a time:
      relative dates ("yesterday") are resolved against it, so a live chat passes
      ``default_time=datetime.now(UTC)`` itself.
    - attachments: metadata ``"attachments"``, a list of strings (e.g. an image caption); blank
      items are dropped.
    - id: the message's ``id``, else metadata ``"id"``, else ``"<session>:<n>"`` where ``n`` counts
      the turns of that session in ``messages`` from 1 (skipped messages do not count). The same
      history grown and passed again keeps its ids, whether or not it holds a system prompt, tool
      calls or other sessions' turns in between, and a session's ids are the same whether it is
      passed alone or in the whole log. Pass the whole history each time (turns already in a KB
      are skipped), or give the messages ids.

    Args:
        messages: the messages.
        session: the session of messages that name none.
        default_time: the time of messages that carry none (a naive datetime is taken as UTC).
        speakers: speaker names by role, over :data:`DEFAULT_SPEAKERS`; a role is normalized by
            :func:`normalize_role`, so ``{"human": "Maya"}`` names the user.

    Raises:
        InputDataError: a message has no timestamp and there is no ``default_time``, or a field
            cannot be used; the error names the message (``messages[i] (id '...')``, ``i`` its
            position in ``messages``), the field (e.g. ``additional_kwargs["timestamp"]``) and what
            was expected.
        ConfigurationError: an item is not a :class:`NeutralMessage`, or an argument is unusable.
    """
    if not isinstance(session, str) or not session.strip():
        raise ConfigurationError(f"session must be a non-empty string, got {session!r}")
    fallback = _default_time(default_time)
    names = _speaker_names(speakers)
    counters: dict[str, int] = {}
    out: list[Utterance] = []
    for index, message in enumerate(messages):
        if not isinstance(message, NeutralMessage):
            raise ConfigurationError(f"item {index} is a {type(message).__name__}, not a NeutralMessage")
        text = message.text.strip()
        if message.role not in names or not text:
            logger.debug(
                "skipping messages[%d] (%s): a role without a speaker, or no text", index, message.role
            )
            continue
        record = _record(index, message.id)
        turn_session = _session(message, session, record)
        counters[turn_session] = counters.get(turn_session, 0) + 1
        turn_id = (
            _text_field(message.id, record=record, field="id")
            or _first_text(message, ("id",), record)
            or f"{turn_session}:{counters[turn_session]}"
        )
        record = _record(index, turn_id)
        speaker = (
            _first_text(message, _SPEAKER_KEYS, record)
            or _text_field(message.name, record=record, field="name")
            or names[message.role]
        )
        out.append(
            Utterance(
                id=turn_id,
                speaker=speaker,
                text=text,
                session=turn_session,
                timestamp=_timestamp(message, fallback, record),
                attachments=_attachments(message, record),
            )
        )
    logger.debug("%d utterances from %d messages", len(out), len(messages))
    return out


def build_kb_from_utterances(
    utterances: Iterable[Utterance],
    kb_dir: str | os.PathLike[str] | None = None,
    *,
    embedder: Embedder | None = None,
    extractor: Extractor | None = None,
    chat_model: ChatModel | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> AnchorBuilder:
    """Build a KB from utterances, or extend the one in ``kb_dir`` with the new ones.

    Utterances already in the KB (same id) are skipped, so calling it again with a grown history
    adds only the new turns.

    Args:
        utterances: the turns, e.g. from :func:`utterances_from_neutral_messages`.
        kb_dir: where the KB is saved (and read from, if it exists); ``None`` keeps it in memory.
        embedder: the anchor embedder (default: the offline MiniLM); must match an existing KB's.
        extractor: the extractor; default: the offline one over ``embedder``, or the fused LLM
            extractor over ``chat_model``.
        chat_model: extract with this model (one fused prompt per batch; answers cached under
            ``kb_dir/cache`` when there is a ``kb_dir``) instead of the offline extractor.
        batch_size: utterances per extractor call.

    Returns:
        The builder: ``builder.kb`` is the KB, ``builder.vectors`` its anchor vectors,
        ``builder.last_report`` what this build did; ``GravityEngine.from_builder(builder)``
        queries it.

    Raises:
        ConfigurationError: both ``extractor`` and ``chat_model`` are given, or the embedder is not
            the existing KB's.
    """
    builder = _open_builder(
        kb_dir, embedder=embedder, extractor=extractor, chat_model=chat_model, batch_size=batch_size
    )
    report = builder.add(utterances)
    logger.info(
        "KB %s: %d turns added, %d already there", kb_dir or "(in memory)", report.added, report.skipped
    )
    return builder


def _open_builder(
    kb_dir: str | os.PathLike[str] | None,
    *,
    embedder: Embedder | None,
    extractor: Extractor | None,
    chat_model: ChatModel | None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> AnchorBuilder:
    """The builder over ``kb_dir`` with the embedder and extractor the arguments name.

    It holds the KB in ``kb_dir``, if any (``None``: in memory); what the arguments leave out takes
    the defaults of :func:`build_kb_from_utterances`.
    """
    if extractor is not None and chat_model is not None:
        raise ConfigurationError("pass extractor= or a chat model (llm=), not both")
    if embedder is None:
        from gravity_core.embeddings import default_embedder

        embedder = default_embedder()
    store = AnchorStore(kb_dir) if kb_dir is not None else None
    if extractor is None:
        from gravity_core.extract.choice import make_extractor

        cache_dir = store.cache_dir if store is not None else None
        extractor = make_extractor(embedder, chat_model=chat_model, cache_dir=cache_dir)
    return AnchorBuilder(extractor, embedder, batch_size=batch_size, store=store)


# Safe for any message: an utterance's id comes from the message's id or its session and place in
# it, never from a time, and a forget uses nothing but ids (and checks speaker, text, session).
_ANY_TIME = datetime(2000, 1, 1, tzinfo=UTC)


def forgetting_time(default_time: datetime | date | None) -> datetime | date:
    """The ``default_time`` to read messages with when they are only forgotten.

    The one given, else a placeholder, so forgetting does not demand the time the build was given.
    """
    return default_time if default_time is not None else _ANY_TIME


def forget_utterances(
    utterances: Iterable[Utterance],
    kb_dir: str | os.PathLike[str] | None = None,
    *,
    builder: AnchorBuilder | None = None,
    embedder: Embedder | None = None,
    extractor: Extractor | None = None,
    chat_model: ChatModel | None = None,
) -> ForgetReport:
    """Forget utterances: remove them from a KB, which becomes what a build of the rest makes.

    Each utterance is found by its id and must match the stored one (speaker, text, session), so
    a wrong id never forgets another turn: ids made by :func:`utterances_from_neutral_messages`
    without a message id count a session's turns (``"<session>:<n>"``), so a message passed
    without the turns of its session before it gets another turn's id, and is refused. See
    :meth:`AnchorBuilder.forget <gravity_core.build.builder.AnchorBuilder.forget>` for what a forget
    removes and keeps (with a ``kb_dir``, earlier generations and unused cached answers go too).

    Args:
        utterances: the turns to forget, e.g. from :func:`utterances_from_neutral_messages`.
        kb_dir: the KB folder, opened as :func:`build_kb_from_utterances` opens it; not with ``builder``.
        builder: forget in this builder's KB instead (e.g. an in-memory one from
            :func:`build_kb_from_utterances`); it stays usable and ``builder.kb`` is the new KB.
        embedder: with ``kb_dir``: the embedder the KB was built with (default: the offline MiniLM).
        extractor: with ``kb_dir``: the extractor the KB was built with (default: the offline one
            over ``embedder``).
        chat_model: with ``kb_dir``: the chat model the KB was built with (the fused LLM extractor,
            replaying the answers cached under ``kb_dir/cache``); not together with ``extractor``.

    Returns:
        What the forget did: utterances forgotten and remaining, anchors before and after.

    Raises:
        ConfigurationError: both or neither of ``kb_dir`` and ``builder``; ``embedder``,
            ``extractor`` or ``chat_model`` with ``builder`` (it has its own); no utterances;
            ``kb_dir`` holds no KB; an utterance id the KB does not hold (the error of
            :meth:`ForgetRequest.select <gravity_core.build.forget.ForgetRequest.select>`, listing the ids
            the KB holds; nothing is forgotten, not even the ids it does hold); or the embedder or
            extractor is not the KB's.
        AnchorStoreError: another build is writing the KB folder.
        ProviderError: the chat model's provider failed during the rebuild (nothing changed).
    """
    if (kb_dir is None) == (builder is None):
        said = "not both" if builder is not None else "got neither"
        raise ConfigurationError(
            f"pass kb_dir= (a KB folder) or builder= (an AnchorBuilder), exactly one of them; {said}"
        )
    given = [
        name
        for name, value in (("embedder", embedder), ("extractor", extractor), ("chat_model", chat_model))
        if value is not None
    ]
    if builder is not None and given:
        raise ConfigurationError(
            f"{', '.join(given)}= only go with kb_dir=; builder= forgets with its own extractor and embedder"
        )
    given_utterances = list(utterances)
    for index, utterance in enumerate(given_utterances):
        if not isinstance(utterance, Utterance):
            raise ConfigurationError(f"item {index} is a {type(utterance).__name__}, not an Utterance")
    ids = [u.id for u in given_utterances]
    if not ids:
        raise ConfigurationError(
            "no utterances to forget: the list is empty (or, from messages, holds only system, tool "
            "or empty ones)"
        )
    request = ForgetRequest(utterances=tuple(ids))
    if builder is None and kb_dir is not None:
        missing = f"there is no KB to forget from in {os.fspath(kb_dir)!r}"
        if not os.path.isdir(kb_dir):  # refused before the default embedder is loaded
            raise ConfigurationError(f"{missing}: it is not a folder")
        builder = _open_builder(kb_dir, embedder=embedder, extractor=extractor, chat_model=chat_model)
        # A first build interrupted before its first save leaves its turns in the journal only.
        if builder.store is not None and not builder.store.exists() and not builder.kb.utterances:
            raise ConfigurationError(missing)
    assert builder is not None  # exactly one of kb_dir and builder, checked above
    _check_stored(given_utterances, builder.kb.utterances)
    report = builder.forget(request)
    logger.info(
        "KB %s: %d turns forgotten, %d remain",
        builder.store.directory if builder.store is not None else "(in memory)",
        report.forgotten,
        report.remaining,
    )
    return report


def _check_stored(utterances: Sequence[Utterance], stored: Mapping[str, Utterance]) -> None:
    """Refuse an utterance whose id the KB holds for another turn.

    Ids unknown to the KB are refused by the forget request, listing what it holds.
    """
    for utterance in utterances:
        known = stored.get(utterance.id)
        if known is not None and (known.speaker, known.text, known.session) != (
            utterance.speaker,
            utterance.text,
            utterance.session,
        ):
            raise InputDataError(
                f"is another turn in the KB ({known.speaker}: {known.text[:60]!r}); nothing was forgotten. "
                "Messages without ids are numbered per session from its first one: pass the session's "
                "messages from its start, or give the messages ids",
                record=utterance.id,
            )


_P = ParamSpec("_P")
_R = TypeVar("_R")


def renamed_arguments(**renamed: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Refuse the old names of renamed keyword arguments, naming the new one.

    ``@renamed_arguments(timestamp="default_time")`` makes ``f(timestamp=...)`` raise a
    :class:`ConfigurationError` that says to pass ``default_time=`` (the meaning changed with the
    name, so the old one is not mapped silently). Other unknown arguments get Python's ``TypeError``.
    """

    def decorate(function: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(function)
        def checked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            for old, new in renamed.items():
                if old in kwargs:
                    raise ConfigurationError(
                        f"{function.__name__}() takes {new}= instead of {old}= "
                        "(one message adapter for LangChain and LlamaIndex: gravity_core.serving.messages)"
                    )
            return function(*args, **kwargs)

        return checked

    return decorate
