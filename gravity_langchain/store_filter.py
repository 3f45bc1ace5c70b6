"""Whether a LangGraph store item's value passes a search filter, in the filter language of its stores.

:class:`~gravity_langchain.store.GravityStore` fetches the selected anchors' source turns by key,
which no store filters, so it checks each fetched turn against the search's ``filter`` itself,
with the semantics ``InMemoryStore`` gives a filter (LangGraph has no public helper for it):

- each key of the filter names a top-level field of the value; all of them must match;
- a bare value matches an equal field; a mapping without ``$`` keys matches a mapping field whose
  keys match it in turn; a list matches a list of the same length, element by element;
- a mapping of operators applies each: ``$eq``, ``$ne``, and ``$gt``, ``$gte``, ``$lt``, ``$lte``,
  which compare as numbers.

Where ``InMemoryStore`` raises because a field is missing or not a number (``float(None)``), the
item simply does not match here: a turn GRAVITY adds never makes a search fail.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from gravity_core.errors import ConfigurationError

__all__ = ["OPERATORS", "matches_filter"]

_NUMERIC: dict[str, Callable[[float, float], bool]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}

OPERATORS = ("$eq", "$ne", *_NUMERIC)
"""The comparison operators a filter may use."""


def matches_filter(value: Mapping[str, Any], search_filter: Mapping[str, Any] | None) -> bool:
    """Whether an item whose value is ``value`` passes ``search_filter`` (no filter: it does).

    Raises:
        ConfigurationError: the filter uses an operator other than :data:`OPERATORS`.
    """
    if not search_filter:
        return True
    return all(_matches(value.get(key), wanted) for key, wanted in search_filter.items())


def _matches(field: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(key).startswith("$") for key in wanted):
            return all(_compare(field, name, operand) for name, operand in wanted.items())
        return isinstance(field, Mapping) and all(_matches(field.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(field, list | tuple)
            and len(field) == len(wanted)
            and all(_matches(f, w) for f, w in zip(field, wanted, strict=True))
        )
    return bool(field == wanted)


def _compare(field: Any, name: str, operand: Any) -> bool:
    if name == "$eq":
        return bool(field == operand)
    if name == "$ne":
        return bool(field != operand)
    compare = _NUMERIC.get(name)
    if compare is None:
        raise ConfigurationError(f"unsupported filter operator {name!r}; use one of {', '.join(OPERATORS)}")
    try:
        return compare(float(field), float(operand))
    except (TypeError, ValueError):
        return False
