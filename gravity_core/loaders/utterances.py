"""Loader for plain utterance files: JSON Lines, or a JSON list, of utterance objects.

Each record is ``{speaker, text, session, timestamp, id?, attachments?}``::

    {"speaker": "Maya", "text": "We adopted a dog!", "session": "s1", "timestamp": "2024-03-09T16:45:00Z"}
"""

from __future__ import annotations

import logging
from datetime import datetime

from gravity_core.loaders._common import (
    DEFAULT_MAX_INPUT_BYTES,
    Document,
    PathLike,
    Where,
    check_unique_ids,
    json_type,
    make_utterance,
    read_document,
)
from gravity_core.loaders.timestamps import aware_timestamp
from gravity_core.schema import Utterance

__all__ = ["load_utterances", "utterances_from_document"]

logger = logging.getLogger(__name__)


def load_utterances(path: PathLike, *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> list[Utterance]:
    """Load a plain utterance file.

    Records:

    - ``speaker``, ``text``, ``session`` (strings) and ``timestamp`` are required. The timestamp is
      an ISO 8601 datetime (a naive one is taken as UTC) or date, or text such as
      "1:56 pm on 8 May, 2023".
    - ``id`` defaults to ``"<session>:<n>"``, n counting the session's records from 1.
    - ``attachments`` is an optional list of strings, e.g. ``["photo: a dog on a beach"]``.

    Sessions are ordered by their earliest timestamp (ties keep file order); within a session
    records keep file order. Blank lines in JSON Lines are skipped.

    Args:
        path: a ``.jsonl`` file of one object per line, or a ``.json`` list of objects.
        max_bytes: the most bytes read from the file (default 512 MiB); a larger file is an
            :class:`~gravity_core.errors.InputDataError`.

    Returns:
        The utterances in conversation order.

    Raises:
        InputDataError: the file is unreadable, malformed, empty, or repeats an id; the message
            names the record ("line 17" in JSON Lines, "item 3" in a JSON list) and the field.
    """
    return utterances_from_document(read_document(path, max_bytes=max_bytes))


def utterances_from_document(document: Document) -> list[Utterance]:
    """Like :func:`load_utterances`, for a file already parsed by the loaders."""
    if not isinstance(document.value, list | dict):
        raise Where(document.path).error(
            "expected a JSON list of utterance objects, or one object per line; "
            f"got {json_type(document.value)}"
        )
    items = document.items()
    if not items:
        raise Where(document.path).error("no utterances; expected at least one utterance record")

    read: list[tuple[Where, Utterance]] = []
    per_session: dict[str, int] = {}
    for name, item in items:
        where = Where(document.path, name)
        record = where.mapping(item, "an utterance")
        session = where.require(record, "session", str, nonempty=True)
        per_session[session] = per_session.get(session, 0) + 1
        utterance_id = where.get(record, "id", str, required=False, nonempty=True)
        attachments = where.get(record, "attachments", list, required=False) or []
        for index, attachment in enumerate(attachments):
            if not isinstance(attachment, str):
                raise where.error(
                    f"expected a string, got {json_type(attachment)}", field=f"attachments[{index}]"
                )
            where.text(attachment, f"attachments[{index}]")
        if "timestamp" not in record:
            raise where.error(
                "missing required field (expected a date or datetime string)", field="timestamp"
            )
        utterance = make_utterance(
            where,
            id=utterance_id if utterance_id is not None else f"{session}:{per_session[session]}",
            speaker=where.require(record, "speaker", str, nonempty=True),
            text=where.require(record, "text", str),
            session=session,
            timestamp=aware_timestamp(record["timestamp"], where, "timestamp"),
            attachments=attachments,
        )
        read.append((where, utterance))
    check_unique_ids(read)

    session_start: dict[str, datetime] = {}
    for _, utterance in read:
        start = session_start.get(utterance.session)
        if start is None or utterance.timestamp < start:
            session_start[utterance.session] = utterance.timestamp
    order = {session: rank for rank, session in enumerate(session_start)}
    utterances = [utterance for _, utterance in read]
    # sorted() is stable: records of one session keep their file order.
    utterances.sort(key=lambda u: (session_start[u.session], order[u.session]))
    logger.debug("%s: %d sessions, %d utterances", document.path, len(session_start), len(utterances))
    return utterances
