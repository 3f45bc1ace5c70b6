"""Benchmark questions with their gold answers and evidence, next to the conversation they are about.

The conversation loaders (:mod:`gravity_core.loaders`) read only the conversation; this module adds the
benchmark side: questions, gold answers, question categories and the ids of the evidence turns, in the
same utterance ids the loaders give, so "is the evidence in the context" is a set lookup.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from types import MappingProxyType
from typing import Any

from gravity_core.errors import InputDataError
from gravity_core.loaders._common import PathLike, Where, keyed_records, read_document
from gravity_core.loaders.locomo import locomo_from_document
from gravity_core.loaders.longmemeval import longmemeval_from_document
from gravity_core.schema import Utterance
from gravity_core.temporal import parse_timestamp

__all__ = [
    "LOCOMO_CATEGORIES",
    "LOCOMO_SKIPPED",
    "LONGMEMEVAL_RUBRIC_TYPES",
    "EvalQuestion",
    "EvalSample",
    "load_locomo_eval",
    "load_longmemeval_eval",
    "normalize_evidence",
]

logger = logging.getLogger(__name__)

LOCOMO_CATEGORIES: MappingProxyType[int, str] = MappingProxyType(
    {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
)
"""LoCoMo's question categories, by the number the benchmark file uses."""

LOCOMO_SKIPPED = frozenset({5})
"""Categories left out by default: adversarial questions have no gold answer, only a trap."""

LONGMEMEVAL_RUBRIC_TYPES = frozenset({"single-session-preference"})
"""LongMemEval question types whose gold answer is a rubric for a judge, not an answer to find."""

_DIA_ID = re.compile(r"D:?(\d+):0*(\d+)")
_ABSTENTION_SUFFIX = "_abs"


@dataclass(frozen=True)
class EvalQuestion:
    """One benchmark question.

    Attributes:
        id: unique within the benchmark file, e.g. ``"conv-26/q12"`` or a LongMemEval question id.
        question: the question as asked.
        answer: the gold answer (numbers turned into text).
        category: the question's category label, e.g. ``"temporal"``.
        evidence: ids of the utterances that hold the answer (may be empty).
        question_date: the day the question is asked, when the benchmark says.
        rubric: the gold answer describes what a good answer does rather than stating it
            (LongMemEval's preference questions: "The user would prefer suggestions that ..."),
            so answer coverage cannot grade it and leaves the question out.
    """

    id: str
    question: str
    answer: str
    category: str
    evidence: tuple[str, ...] = ()
    question_date: date | None = None
    rubric: bool = False


@dataclass(frozen=True)
class EvalSample:
    """One conversation with the questions asked about it.

    Attributes:
        id: the sample id (LoCoMo ``sample_id``, LongMemEval ``question_id``).
        utterances: the conversation, as the loaders give it.
        questions: the questions kept for evaluation.
        categories: the category labels of this benchmark, in report order.
    """

    id: str
    utterances: list[Utterance]
    questions: list[EvalQuestion]
    categories: tuple[str, ...] = field(default=())


def normalize_evidence(raw: Sequence[object], known: set[str] | frozenset[str]) -> tuple[str, ...]:
    """LoCoMo evidence ids cleaned up and checked against the conversation's turn ids.

    The benchmark file has a few malformed entries: two ids in one string (``"D8:6; D9:17"``),
    a stray colon (``"D:11:26"``), zero-padding (``"D30:05"``) or a bare ``"D"``. Ids that still
    name no turn of the conversation are dropped (and logged), so they count neither as found nor
    as missed.

    Args:
        raw: the ``evidence`` list as in the file.
        known: the conversation's utterance ids.

    Returns:
        The distinct ids, in order.
    """
    found: list[str] = []
    for entry in raw:
        for part in re.split(r"[;,\s]+", str(entry)):
            match = _DIA_ID.fullmatch(part)
            if match is None:
                if part:
                    logger.debug("ignoring malformed evidence id %r", part)
                continue
            dia_id = f"D{match.group(1)}:{match.group(2)}"
            if dia_id not in known:
                logger.debug("ignoring evidence id %r: no such turn", dia_id)
                continue
            if dia_id not in found:
                found.append(dia_id)
    return tuple(found)


def _answer_text(value: object) -> str:
    return "" if value is None else str(value).strip()


def load_locomo_eval(
    path: PathLike,
    *,
    samples: Sequence[str] | None = None,
    skip_categories: frozenset[int] = LOCOMO_SKIPPED,
) -> list[EvalSample]:
    """The samples of a LoCoMo file with their questions.

    Utterance ids are the benchmark's ``dia_id`` (``"D1:3"``), as :func:`~gravity_core.loaders.load_locomo`
    gives them for one sample, so evidence ids match directly. Question ids are
    ``"<sample_id>/q<n>"`` with ``n`` the question's position in the sample's ``qa`` list (from 1).

    Args:
        path: the LoCoMo JSON file.
        samples: sample ids to keep (default: all, in file order).
        skip_categories: category numbers left out (default: 5, adversarial).

    Returns:
        One :class:`EvalSample` per sample.

    Raises:
        InputDataError: the file is malformed, a question lacks a field, or a requested sample is missing.
    """
    document = read_document(path)
    records = keyed_records(document, what="LoCoMo sample", id_field="sample_id")
    wanted = list(samples) if samples is not None else [record_id for record_id, _, _ in records]
    by_id = {record_id: (data, where) for record_id, data, where in records}
    missing = [sample_id for sample_id in wanted if sample_id not in by_id]
    if missing:
        raise InputDataError(
            f"no sample {', '.join(missing)} in this file; available: {', '.join(by_id)}",
            path=document.path,
            field="sample_id",
        )
    labels = tuple(label for number, label in LOCOMO_CATEGORIES.items() if number not in skip_categories)
    loaded: list[EvalSample] = []
    for sample_id in wanted:
        data, where = by_id[sample_id]
        utterances = locomo_from_document(document, sample_id)
        known = frozenset(u.id for u in utterances)
        questions = _locomo_questions(sample_id, data, where, known, skip_categories)
        loaded.append(EvalSample(sample_id, utterances, questions, labels))
    return loaded


def _locomo_questions(
    sample_id: str, data: dict[str, Any], where: Where, known: frozenset[str], skip: frozenset[int]
) -> list[EvalQuestion]:
    qa = where.get(data, "qa", list, required=False) or []
    questions: list[EvalQuestion] = []
    for number, raw in enumerate(qa, start=1):
        item_where = where.at(f"{sample_id} qa {number}")
        item = item_where.mapping(raw, "a question")
        category = item.get("category")
        if not isinstance(category, int) or category not in LOCOMO_CATEGORIES:
            raise item_where.error(
                f"expected a category number among {sorted(LOCOMO_CATEGORIES)}, got {category!r}",
                field="category",
            )
        if category in skip:
            continue
        answer = _answer_text(item.get("answer"))
        if not answer:
            raise item_where.error("missing gold answer", field="answer")
        questions.append(
            EvalQuestion(
                id=f"{sample_id}/q{number}",
                question=item_where.require(item, "question", str, nonempty=True),
                answer=answer,
                category=LOCOMO_CATEGORIES[category],
                evidence=normalize_evidence(item.get("evidence") or [], known),
            )
        )
    return questions


def load_longmemeval_eval(
    path: PathLike,
    *,
    question_ids: Sequence[str] | None = None,
    include_abstention: bool = False,
) -> list[EvalSample]:
    """The instances of a LongMemEval file, each its own haystack with one question.

    Follows the benchmark's documented schema: ``question_id, question_type, question, answer,
    question_date, haystack_session_ids, haystack_dates, haystack_sessions`` (turns ``{role, content,
    has_answer?}``) and ``answer_session_ids``. The evidence of a question is the turns marked
    ``has_answer``, under the utterance ids :func:`~gravity_core.loaders.load_longmemeval` gives
    (``"<session_id>:<turn number>"``); if no turn is marked, every turn of the answer sessions counts.

    Args:
        path: the LongMemEval JSON file.
        question_ids: instances to keep (default: all, in file order).
        include_abstention: keep the abstention questions (ids ending in ``_abs``), whose gold answer
            says the information was never given; left out by default like LoCoMo's adversarial ones.

    Returns:
        One :class:`EvalSample` per instance; ``categories`` are the question types seen in the file.

    Raises:
        InputDataError: the file is malformed, or a requested instance is missing.
    """
    document = read_document(path)
    records = keyed_records(document, what="LongMemEval instance", id_field="question_id")
    by_id = {record_id: (data, where) for record_id, data, where in records}
    wanted = list(question_ids) if question_ids is not None else list(by_id)
    missing = [qid for qid in wanted if qid not in by_id]
    if missing:
        raise InputDataError(
            f"no question {', '.join(missing)} in this file; available: {', '.join(by_id)}",
            path=document.path,
            field="question_id",
        )
    types = tuple(dict.fromkeys(str(data.get("question_type", "")) for data, _ in by_id.values()))
    loaded: list[EvalSample] = []
    for qid in wanted:
        if qid.endswith(_ABSTENTION_SUFFIX) and not include_abstention:
            continue
        data, where = by_id[qid]
        utterances = longmemeval_from_document(document, qid)
        question = EvalQuestion(
            id=qid,
            question=where.require(data, "question", str, nonempty=True),
            answer=_answer_text(data.get("answer")),
            category=where.require(data, "question_type", str, nonempty=True),
            evidence=_longmemeval_evidence(data, where, utterances),
            question_date=_question_date(data, where),
            rubric=data.get("question_type") in LONGMEMEVAL_RUBRIC_TYPES,
        )
        loaded.append(EvalSample(qid, utterances, [question], types))
    return loaded


def _question_date(data: dict[str, Any], where: Where) -> date | None:
    raw = where.get(data, "question_date", str, required=False)
    if raw is None:
        return None
    parsed = parse_timestamp(raw)
    if parsed is None:
        raise where.error(f"cannot read {raw!r} as a date", field="question_date")
    return parsed.date()


def _longmemeval_evidence(data: dict[str, Any], where: Where, utterances: list[Utterance]) -> tuple[str, ...]:
    session_ids = where.require(data, "haystack_session_ids", list)
    sessions = where.require(data, "haystack_sessions", list)
    marked: list[str] = []
    for session_id, turns in zip(session_ids, sessions, strict=True):
        for number, turn in enumerate(turns, start=1):
            if isinstance(turn, dict) and turn.get("has_answer") is True:
                marked.append(f"{session_id}:{number}")
    if marked:
        return tuple(marked)
    answer_sessions = {str(s) for s in (where.get(data, "answer_session_ids", list, required=False) or [])}
    return tuple(u.id for u in utterances if u.session in answer_sessions)
