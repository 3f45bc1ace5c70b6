r"""Model answers as clean text, before anything is stored, cached or hashed.

A model can answer with characters that cannot be written as UTF-8 (lone surrogates such as
``"Maya\ud800"``, either in the text or as a JSON escape that decodes to one) or with control
characters; stored in a KB, such a string breaks every later run (the response-cache key and the
anchor digests encode text as UTF-8). A model can also answer ``None`` or ``bytes`` instead of
text. :func:`answer_text` turns any answer into a clean ``str`` and :func:`clean_value` cleans the
strings of a decoded JSON answer.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from pydantic import BaseModel

__all__ = ["answer_text", "clean_text", "clean_value"]

logger = logging.getLogger(__name__)

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 and C1 control characters but tab and newline (a carriage return becomes a newline first).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean_text(text: str) -> str:
    r"""``text`` with lone surrogates replaced by U+FFFD and control characters removed.

    Control characters other than ``\n`` and ``\t`` are removed (``\r\n`` and ``\r`` become ``\n``);
    a clean text is returned as it is.

    A surrogate pair spelled as two code points is joined into the character it encodes.
    """
    if _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if _CONTROL.search(text):
        text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    return text


def clean_value(value: Any) -> Any:
    """A decoded JSON value with every string (keys included) passed through :func:`clean_text`."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    return value


def answer_text(answer: object, model_name: str) -> str:
    """A model's answer as clean text, whatever the model returned.

    ``None`` is the empty answer; ``bytes`` are decoded as UTF-8 (undecodable bytes become
    U+FFFD); a pydantic object, dict or list is written as JSON; anything else is ``str()``-ed.
    Each of these is logged, since the model broke its contract; then :func:`clean_text`.
    """
    if isinstance(answer, str):
        return clean_text(answer)
    kind = type(answer).__name__
    if answer is None:
        text = ""
    elif isinstance(answer, bytes | bytearray):
        text = bytes(answer).decode("utf-8", errors="replace")
    elif isinstance(answer, BaseModel | dict | list):
        data = answer.model_dump() if isinstance(answer, BaseModel) else answer
        text = json.dumps(data, ensure_ascii=False, default=str)
    else:
        text = str(answer)
    logger.warning("%s answered with %s instead of text; read as %r", model_name, kind, text[:60])
    return clean_text(text)
