"""Loader for the LongMemEval benchmark format (xiaowu0162/LongMemEval).

A LongMemEval file is a JSON list of instances ``{question_id, question_type, question, answer,
question_date, haystack_session_ids, haystack_dates, haystack_sessions}``; each haystack session
is a list of turns ``{role: "user" | "assistant", content, has_answer?}``. Only the haystack is
read: the question and answer are the benchmark's, not conversation input.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from gravity_core.errors import InputDataError
from gravity_core.loaders._common import (
    DEFAULT_MAX_INPUT_BYTES,
    Document,
    PathLike,
    Unit,
    Where,
    brief_repr,
    check_unique_ids,
    json_type,
    keyed_records,
    listed_ids,
    make_utterance,
    read_document,
    select_records,
)
from gravity_core.loaders.timestamps import aware_timestamp
from gravity_core.schema import Utterance

__all__ = ["load_longmemeval", "longmemeval_from_document"]

logger = logging.getLogger(__name__)

_LME_DATE_FORMS = "a date like '2023/05/20 (Sat) 02:21' or an ISO 8601 datetime"
_ROLES = ("user", "assistant")


def load_longmemeval(
    path: PathLike, question_id: str | None = None, *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> list[Utterance]:
    """Load the haystack sessions of a LongMemEval file as utterances.

    Sessions come in time order (``haystack_dates``; the oracle file does not sort them), turns
    in file order, each turn with its session's timestamp (taken as UTC). The utterance id is
    ``"<session_id>:<turn number>"`` with turns numbered from 1, like the benchmark's turn keys;
    the speaker is the turn's role, ``"user"`` or ``"assistant"``.

    Args:
        path: the LongMemEval JSON file (a list of instances, or one instance object).
        question_id: the instance to load. ``None`` is for a file of one instance: utterance and
            session ids are then prefixed with its question id (``"q1/answer_4be1b6b4_2:3"``). Each
            instance is its own user's history, which one KB must not mix: a file of several
            needs the id of one.
        max_bytes: the most bytes read from the file (default 512 MiB); a larger file is an
            :class:`~gravity_core.errors.InputDataError`.

    Returns:
        The utterances in conversation order.

    Raises:
        InputDataError: the file is unreadable or malformed, has no instance ``question_id``, or
            holds several and ``question_id`` is ``None`` (both messages list the available ids;
            ``field`` is ``"question_id"``).
    """
    return longmemeval_from_document(read_document(path, max_bytes=max_bytes), question_id)


def longmemeval_from_document(document: Document, question_id: str | None = None) -> list[Utterance]:
    """Like :func:`load_longmemeval`, for a file already parsed by the loaders."""
    instances = _instances(document)
    if question_id is None and len(instances) > 1:
        raise InputDataError(
            f"{len(instances)} LongMemEval instances in this file, each its own user's history, and one "
            f"KB must not mix them: choose one question_id; available: "
            f"{listed_ids([record_id for record_id, _, _ in instances])}",
            path=document.path,
            field="question_id",
        )
    return select_records(
        document,
        instances,
        question_id,
        lambda data, where, prefix: _instance_utterances(data, where, prefix=prefix),
        kind="question",
        id_field="question_id",
    )


def _instances(document: Document) -> list[Unit]:
    return keyed_records(document, what="LongMemEval instance", id_field="question_id")


def _instance_utterances(instance: dict[str, Any], where: Where, *, prefix: str) -> list[Utterance]:
    instance_id = where.record
    session_ids = where.require(instance, "haystack_session_ids", list)
    dates = where.require(instance, "haystack_dates", list)
    sessions = where.require(instance, "haystack_sessions", list)
    for field, values in (("haystack_session_ids", session_ids), ("haystack_dates", dates)):
        if len(values) != len(sessions):
            raise where.error(
                f"has {len(values)} entries but haystack_sessions has {len(sessions)}; "
                "expected one entry per session",
                field=field,
            )

    ordered: list[tuple[datetime, int, str, Any]] = []
    first_index: dict[str, int] = {}
    for index, (session_id, date_value, turns) in enumerate(zip(session_ids, dates, sessions, strict=True)):
        if not isinstance(session_id, str) or not session_id.strip():
            raise where.error(
                f"expected a non-empty string, got {json_type(session_id)}",
                field=f"haystack_session_ids[{index}]",
            )
        where.text(session_id, f"haystack_session_ids[{index}]")
        stamp = aware_timestamp(date_value, where, f"haystack_dates[{index}]", expected=_LME_DATE_FORMS)
        if not isinstance(turns, list):
            raise where.error(
                f"expected a list of turns, got {json_type(turns)}", field=f"haystack_sessions[{index}]"
            )
        if session_id in first_index:
            first = first_index[session_id]
            if turns == sessions[first]:
                # LongMemEval-S repeats a few sessions word for word under a later date: the turns
                # are kept once, at their first date.
                logger.warning(
                    "%s: haystack_session_ids[%d] repeats session %s of index %d with the same turns;"
                    " kept once",
                    where.record,
                    index,
                    brief_repr(session_id),
                    first,
                )
                continue
            raise where.error(
                f"session id {brief_repr(session_id)} is listed twice with different turns "
                f"(also at index {first}); expected unique session ids",
                field=f"haystack_session_ids[{index}]",
            )
        first_index[session_id] = index
        ordered.append((stamp, index, session_id, turns))
    ordered.sort(key=lambda session: (session[0], session[1]))

    read: list[tuple[Where, Utterance]] = []
    for stamp, _, session_id, turns in ordered:
        for number, raw in enumerate(turns, start=1):
            turn_where = where.at(f"{instance_id} session {session_id} turn {number}")
            turn = turn_where.mapping(raw, "a turn")
            role = turn_where.require(turn, "role", str)
            if role not in _ROLES:
                raise turn_where.error(
                    f"expected 'user' or 'assistant', got {brief_repr(role)}", field="role"
                )
            utterance = make_utterance(
                turn_where,
                id=f"{prefix}{session_id}:{number}",
                speaker=role,
                text=turn_where.require(turn, "content", str),
                session=f"{prefix}{session_id}",
                timestamp=stamp,
            )
            read.append((turn_where, utterance))
    check_unique_ids(read, field="haystack_session_ids")
    logger.debug("LongMemEval instance %s: %d sessions, %d utterances", instance_id, len(ordered), len(read))
    return [utterance for _, utterance in read]
