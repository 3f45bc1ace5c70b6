"""Input checking shared by the embedders."""

from __future__ import annotations

from collections.abc import Sequence

from gravity_core.errors import ConfigurationError

__all__ = ["text_list"]


def text_list(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, after checking it is a sequence of strings (and not one string).

    Raises:
        ConfigurationError: ``texts`` is a string, or holds something else than strings.
    """
    if isinstance(texts, str):
        raise ConfigurationError("embed() takes a sequence of texts, not a single string")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise ConfigurationError(f"embed(): text {i} is {type(text).__name__}, not str")
    return items
