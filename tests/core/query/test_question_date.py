"""The one question-date rule that both integrations apply."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from gravity_core.errors import ConfigurationError
from gravity_core.query.question_date import as_question_date


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (date(2024, 6, 1), date(2024, 6, 1)),
        (datetime(2024, 6, 1, 23, 30, tzinfo=UTC), date(2024, 6, 1)),
        ("2024-06-01", date(2024, 6, 1)),
        (" 2024-06-01T09:30:00+00:00 ", date(2024, 6, 1)),
    ],
)
def test_accepted_values_become_a_date(value: object, expected: date | None) -> None:
    assert as_question_date(value) == expected


@pytest.mark.parametrize("value", ["last Tuesday", "06/01/2024", 20240601])
def test_anything_else_names_the_argument(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"metadata\['question_date'\] must be a date"):
        as_question_date(value, "metadata['question_date']")


def test_both_integrations_use_the_core_rule() -> None:
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from gravity_langchain import as_question_date as langchain_rule
    from gravity_llamaindex.provider import as_question_date as llamaindex_rule

    assert langchain_rule is as_question_date
    assert llamaindex_rule is as_question_date
