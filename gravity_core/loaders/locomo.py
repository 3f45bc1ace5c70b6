"""Loader for the LoCoMo benchmark format (snap-research/LoCoMo, ``locomo10.json``).

A LoCoMo file is a JSON list of samples ``{sample_id, conversation, qa, ...}``. ``conversation``
holds ``session_N`` (a list of turns ``{speaker, dia_id, text}``, photo turns also with
``blip_caption``) and ``session_N_date_time`` ("1:56 pm on 8 May, 2023"). Only those are read:
``qa`` is the benchmark's questions, and ``observation``, ``event_summary`` and
``session_summary`` are LLM-written annotations, not conversation input.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime
from typing import Any

from gravity_core.errors import InputDataError
from gravity_core.loaders._common import (
    DEFAULT_MAX_INPUT_BYTES,
    Document,
    PathLike,
    Unit,
    Where,
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

__all__ = ["load_locomo", "locomo_from_document", "locomo_sample_ids"]

logger = logging.getLogger(__name__)

_SESSION_KEY = re.compile(r"session_([0-9]+)")
_DATE_EXAMPLE = "1:56 pm on 8 May, 2023"


def load_locomo(
    path: PathLike, sample: str | None = None, *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES
) -> list[Utterance]:
    """Load the utterances of a LoCoMo file.

    Sessions come in time order (``session_N_date_time``), turns in file order; every turn of a
    session carries the session's timestamp. A photo turn gets ``attachments=["photo: <caption>"]``
    from its ``blip_caption``.

    Args:
        path: the LoCoMo JSON file (a list of samples, or one sample object).
        sample: the ``sample_id`` to load (e.g. ``"conv-26"``). Utterance ids are then the
            ``dia_id`` as-is (``"D1:3"``, matching the benchmark's evidence ids) and session ids
            are ``"session_1"``, ... ``None`` is for a file of one sample: both ids are then
            prefixed with the sample id (``"conv-26/D1:3"``, ``"conv-26/session_1"``). A file of
            several samples holds unrelated conversations, which one KB must not mix: load each
            by its id (:func:`locomo_sample_ids` lists them).
        max_bytes: the most bytes read from the file (default 512 MiB); a larger file is an
            :class:`~gravity_core.errors.InputDataError`.

    Returns:
        The utterances in conversation order.

    Raises:
        InputDataError: the file is unreadable or malformed, has no sample ``sample``, or holds
            several samples and ``sample`` is ``None`` (both messages list the available ids;
            ``field`` is ``"sample_id"``).
    """
    return locomo_from_document(read_document(path, max_bytes=max_bytes), sample)


def locomo_sample_ids(path: PathLike, *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> list[str]:
    """The ``sample_id`` of every sample of a LoCoMo file, in file order.

    ``max_bytes``: as for :func:`load_locomo`.

    Raises:
        InputDataError: the file is unreadable or is not a list of LoCoMo samples.
    """
    return [sample_id for sample_id, _, _ in _samples(read_document(path, max_bytes=max_bytes))]


def locomo_from_document(document: Document, sample: str | None = None) -> list[Utterance]:
    """Like :func:`load_locomo`, for a file already parsed by the loaders."""
    samples = _samples(document)
    if sample is None and len(samples) > 1:
        raise InputDataError(
            f"{len(samples)} conversations (LoCoMo samples) in this file, and one KB must not mix them: "
            f"choose one sample; available: {listed_ids([sample_id for sample_id, _, _ in samples])}",
            path=document.path,
            field="sample_id",
        )
    return select_records(
        document,
        samples,
        sample,
        lambda data, where, prefix: _sample_utterances(data, where, prefix=prefix),
        kind="sample",
        id_field="sample_id",
    )


def _number_key(digits: str) -> tuple[int, str]:
    """Sorts digit strings by value without ``int()``, which refuses more than 4300 digits."""
    significant = digits.lstrip("0")
    return len(significant), significant


def _samples(document: Document) -> list[Unit]:
    return keyed_records(document, what="LoCoMo sample", id_field="sample_id")


def _sample_utterances(sample: dict[str, Any], where: Where, *, prefix: str) -> list[Utterance]:
    sample_id = where.record
    conversation = where.require(sample, "conversation", dict)
    sessions: list[tuple[datetime, tuple[int, str], str, list[Any]]] = []
    for key, turns in conversation.items():
        match = _SESSION_KEY.fullmatch(key)
        if match is None:
            continue
        session_where = where.at(f"{sample_id} {key}")
        if not isinstance(turns, list):
            raise session_where.error(f"expected a list of turns, got {json_type(turns)}", field=key)
        date_key = f"{key}_date_time"
        if conversation.get(date_key) is None:
            raise session_where.error(
                f"missing required field (expected a date like {_DATE_EXAMPLE!r})", field=date_key
            )
        stamp = aware_timestamp(
            conversation[date_key], session_where, date_key, expected=f"a date like {_DATE_EXAMPLE!r}"
        )
        sessions.append((stamp, _number_key(match.group(1)), key, turns))
    if not sessions:
        raise where.error("no sessions; expected keys 'session_1', 'session_2', ...", field="conversation")
    sessions.sort(key=lambda session: (session[0], session[1]))

    read: list[tuple[Where, Utterance]] = []
    for stamp, _, key, turns in sessions:
        for index, raw in enumerate(turns, start=1):
            turn_where = where.at(f"{sample_id} {key} turn {index}")
            turn = turn_where.mapping(raw, "a turn")
            dia_id = turn_where.require(turn, "dia_id", str, nonempty=True)
            caption = turn_where.get(turn, "blip_caption", str, required=False)
            utterance = make_utterance(
                turn_where,
                id=f"{prefix}{dia_id}",
                speaker=turn_where.require(turn, "speaker", str, nonempty=True),
                text=turn_where.require(turn, "text", str),
                session=f"{prefix}{key}",
                timestamp=stamp,
                attachments=[f"photo: {caption.strip()}"] if caption and caption.strip() else [],
            )
            read.append((turn_where, utterance))
    check_unique_ids(read, field="dia_id")
    logger.debug("LoCoMo sample %s: %d sessions, %d utterances", sample_id, len(sessions), len(read))
    return [utterance for _, utterance in read]
