"""Lenient field types for response models: small slips of a model are repaired, not re-asked."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator

from gravity_core.schema import EntityType

__all__ = ["LenientEntityType", "OptionalText", "StrList"]


def _as_str_list(value: Any) -> Any:
    # A lone string where a list is expected ("who": "Caroline") is the commonest slip.
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return value


def _as_entity_type(value: Any) -> Any:
    if isinstance(value, EntityType) or value is None:
        return value
    if isinstance(value, str):
        key = value.strip().casefold()
        return EntityType(key) if key in {t.value for t in EntityType} else EntityType.OTHER
    return value


def _as_optional_text(value: Any) -> Any:
    # Models write "null", "none" or "" for "not stated"; all mean absent.
    if isinstance(value, str) and value.strip().casefold() in {"", "null", "none", "n/a", "unknown"}:
        return None
    return value


StrList = Annotated[list[str], BeforeValidator(_as_str_list)]
"""A list of strings that also accepts a single string or null."""

LenientEntityType = Annotated[EntityType, BeforeValidator(_as_entity_type)]
"""An :class:`EntityType` that accepts any casing and maps unknown types to ``other``."""

OptionalText = Annotated[str | None, BeforeValidator(_as_optional_text)]
"""Optional text where empty strings and 'null'/'none'/'unknown' mean absent."""
