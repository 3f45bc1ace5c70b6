"""Reading conversation files: JSON / JSON Lines parsing and field checks (timestamps: :mod:`.timestamps`).

Every failure becomes an :class:`~gravity_core.errors.InputDataError` that names the file, the
record and the field; no ``KeyError``, ``TypeError`` or ``JSONDecodeError`` escapes.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.schema import Utterance

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "Document",
    "PathLike",
    "Unit",
    "Where",
    "brief_repr",
    "check_max_bytes",
    "check_unique_ids",
    "json_type",
    "keyed_records",
    "make_utterance",
    "read_document",
    "select_records",
    "unknown_id_message",
]

PathLike = str | os.PathLike[str]

_MIB = 1024 * 1024

DEFAULT_MAX_INPUT_BYTES = 512 * _MIB
"""The most bytes a loader reads from one file (512 MiB) unless told otherwise (``max_bytes=``).

A conversation file parses into several times its size in memory, so an endless stream
(``/dev/zero``, a FIFO) or a huge file is refused with an :class:`InputDataError` instead of ending
in ``MemoryError``. LoCoMo is about 3 MB and LongMemEval-S about 280 MB.
"""

_T = TypeVar("_T")

_JSON_TYPES: dict[type, str] = {
    dict: "an object",
    list: "a list",
    str: "a string",
    bool: "true/false",
    int: "a number",
    float: "a number",
    type(None): "null",
}


_SHOWN_CHARS = 60


def brief_repr(value: object) -> str:
    """``repr(value)`` for a message, cut to about 60 characters: input values can be huge."""
    text = repr(value)
    if len(text) <= _SHOWN_CHARS:
        return text
    return f"{text[: _SHOWN_CHARS - 12]}…{text[-8:]} ({len(str(value))} characters)"


def _cut(name: str | None) -> str | None:
    """A record or field name built from input ids, cut to a readable length."""
    if name is None or len(name) <= 2 * _SHOWN_CHARS:
        return name
    return f"{name[:_SHOWN_CHARS]}…{name[-_SHOWN_CHARS // 2 :]}"


def json_type(value: object) -> str:
    """The JSON name of a value's type, for error messages ("a string", "null", ...)."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class Where:
    """A position in an input file: the file and the record being read."""

    path: str
    record: str | None = None

    def at(self, record: str) -> Where:
        """The same file, another record."""
        return Where(self.path, record)

    def error(self, message: str, field: str | None = None) -> InputDataError:
        """An :class:`InputDataError` located here."""
        return InputDataError(message, path=self.path, record=_cut(self.record), field=_cut(field))

    def text(self, value: str, field: str) -> str:
        r"""``value`` if it is valid Unicode text, else an error naming the field.

        JSON can spell a lone UTF-16 surrogate (``"\ud800"``), which Python keeps in a ``str`` but
        no UTF-8 file can hold: such a string would fail much later, when the KB is written.
        """
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            code = ord(value[exc.start])
            raise self.error(
                f"invalid Unicode: lone surrogate \\u{code:04x} at character {exc.start}; "
                "expected text that can be written as UTF-8",
                field=field,
            ) from exc
        return value

    def mapping(self, value: object, what: str) -> dict[str, Any]:
        """``value`` if it is a JSON object, else an error naming ``what`` was expected."""
        if not isinstance(value, dict):
            raise self.error(f"expected {what} (a JSON object), got {json_type(value)}")
        return value

    def get(
        self, obj: dict[str, Any], key: str, kind: type[_T], *, required: bool = True, nonempty: bool = False
    ) -> _T | None:
        """Field ``key`` of ``obj``, checked to be of JSON type ``kind``.

        Args:
            obj: the record.
            key: the field name.
            kind: the expected Python type (``str``, ``list``, ``dict``).
            required: whether a missing (or null) field is an error; if not, it reads as ``None``.
            nonempty: for strings, whether an empty or blank value is an error.

        Returns:
            The value, or ``None`` for an absent optional field.
        """
        if key not in obj or obj[key] is None:
            if required:
                raise self.error(f"missing required field (expected {_JSON_TYPES[kind]})", field=key)
            return None
        value = obj[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise self.error(f"expected {_JSON_TYPES[kind]}, got {json_type(value)}", field=key)
        if isinstance(value, str):
            self.text(value, key)
            if nonempty and not value.strip():
                raise self.error("expected a non-empty string", field=key)
        return value

    def require(self, obj: dict[str, Any], key: str, kind: type[_T], *, nonempty: bool = False) -> _T:
        """Like :meth:`get` for a required field, typed as never ``None``."""
        value = self.get(obj, key, kind, nonempty=nonempty)
        assert value is not None  # get() raises for a missing required field
        return value


@dataclass(frozen=True)
class Document:
    """The parsed content of a JSON or JSON Lines file.

    Attributes:
        path: the file, as named in error messages.
        value: the parsed JSON value; for JSON Lines, the list of per-line values.
        lines: for JSON Lines, the line number (1-based) of each value of ``value``; else ``None``.
    """

    path: str
    value: Any
    lines: tuple[int, ...] | None = None

    def record_name(self, index: int) -> str:
        """How to name the ``index``-th (0-based) top-level item in messages: 'line 17' or 'item 3'."""
        if self.lines is not None:
            return f"line {self.lines[index]}"
        return f"item {index + 1}"

    def items(self) -> list[tuple[str, Any]]:
        """The top-level records with their names; a single top-level object is one record."""
        if self.lines is not None:
            return [(self.record_name(i), value) for i, value in enumerate(self.value)]
        if isinstance(self.value, list):
            return [(self.record_name(i), value) for i, value in enumerate(self.value)]
        return [("item 1", self.value)]


def _size(n_bytes: int) -> str:
    """``512 MiB`` for whole mebibytes, else the byte count."""
    return f"{n_bytes // _MIB} MiB" if n_bytes % _MIB == 0 else f"{n_bytes:,} bytes"


def check_max_bytes(max_bytes: int) -> int:
    """``max_bytes`` if it is a usable input cap (a positive int), else a :class:`ConfigurationError`."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ConfigurationError(f"max_bytes must be a positive number of bytes, got {max_bytes!r}")
    return max_bytes


def _read_capped(file: Path, shown: str, max_bytes: int) -> bytes:
    """The file's bytes; reads at most ``max_bytes + 1``, so an endless stream stops too."""
    with file.open("rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputDataError(
            f"larger than the input cap of {_size(max_bytes)}; expected a smaller conversation file "
            "(raise the cap with 'gravity build --max-input-mb N', or max_bytes= in Python)",
            path=shown,
        )
    return data


def _read_text(path: PathLike, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> tuple[str, str]:
    shown = os.fspath(path)
    file = Path(path)
    check_max_bytes(max_bytes)
    try:
        if not file.exists():
            raise InputDataError("no such file", path=shown)
        if file.is_dir():
            raise InputDataError("is a directory; expected a conversation file (.json or .jsonl)", path=shown)
        data = _read_capped(file, shown, max_bytes)
    except InputDataError:
        raise
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputDataError(f"cannot read the file: {reason}", path=shown) from exc
    # UTF-8 (with or without a BOM) is expected; UTF-16 and UTF-32, as some Windows tools write
    # JSON, are recognised by their BOM or their zero bytes, as json.loads does for bytes.
    encoding = json.detect_encoding(data)
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        named = "UTF-8" if encoding in ("utf-8", "utf-8-sig") else encoding.upper()
        raise InputDataError(
            f"not {named} text: byte 0x{data[exc.start]:02x} at offset {exc.start} cannot be decoded; "
            "expected a UTF-8 encoded JSON file",
            path=shown,
            record=f"line {line}",
        ) from exc
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise InputDataError("the file is empty; expected JSON or JSON Lines content", path=shown)
    return shown, text


def _syntax_error(shown: str, exc: json.JSONDecodeError, line: int | None = None) -> InputDataError:
    lineno = line if line is not None else exc.lineno
    return InputDataError(
        f"invalid JSON: {exc.msg} (line {lineno}, column {exc.colno})",
        path=shown,
        record=f"line {lineno}",
    )


def _loads(shown: str, text: str, line: int | None = None) -> Any:
    """``json.loads``, its failures as :class:`InputDataError` (syntax errors are left to the caller)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError as exc:
        raise InputDataError(
            f"JSON nested too deeply (more than about {sys.getrecursionlimit()} levels); "
            "expected utterance records",
            path=shown,
            record=f"line {line}" if line is not None else None,
        ) from exc
    except ValueError as exc:  # an integer of more than 4300 digits ('...; use sys.set_int_max_str_digits()')
        raise InputDataError(
            f"unreadable JSON value: {str(exc).split(';')[0]}",
            path=shown,
            record=f"line {line}" if line is not None else None,
        ) from exc


def _lines(text: str) -> list[str]:
    r"""The file's lines, split only at ``\n``.

    Only ``\n`` ends a JSON Lines record: ``str.splitlines`` would also split at U+2028, U+0085 and
    others, which JSON strings may hold unescaped.
    """
    return text.split("\n")


def _parse_jsonl(shown: str, text: str) -> Document:
    values: list[Any] = []
    lines: list[int] = []
    for number, line in enumerate(_lines(text), start=1):
        if not line.strip():
            continue
        try:
            values.append(_loads(shown, line, number))
        except json.JSONDecodeError as exc:
            raise _syntax_error(shown, exc, line=number) from exc
        lines.append(number)
    return Document(shown, values, tuple(lines))


def read_document(path: PathLike, *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> Document:
    """Read and parse a JSON or JSON Lines file.

    A file that holds one JSON value is JSON; a file of one JSON object per line (blank lines
    allowed) is JSON Lines. A one-line file of a single object reads as JSON Lines too.

    Args:
        path: the file.
        max_bytes: the most bytes read (default :data:`DEFAULT_MAX_INPUT_BYTES`, 512 MiB); a
            longer file or stream is refused after reading ``max_bytes + 1`` bytes.

    Returns:
        The parsed document.

    Raises:
        InputDataError: the file is missing, a directory, unreadable, larger than ``max_bytes``,
            not UTF-8, empty, or not valid JSON / JSON Lines (the message gives the line and column).
        ConfigurationError: ``max_bytes`` is not a positive integer.
    """
    shown, text = _read_text(path, max_bytes)
    try:
        value = _loads(shown, text)
    except json.JSONDecodeError as exc:
        # Several objects one after another: JSON Lines. A '[' document with trailing junk is
        # a broken JSON file, and its own error position is the useful one.
        if exc.msg == "Extra data" and text.lstrip().startswith("{"):
            return _parse_jsonl(shown, text)
        raise _syntax_error(shown, exc) from exc
    if isinstance(value, dict) and len([line for line in _lines(text) if line.strip()]) == 1:
        first = next(i for i, line in enumerate(_lines(text), start=1) if line.strip())
        return Document(shown, [value], (first,))
    return Document(shown, value)


def make_utterance(where: Where, **fields: Any) -> Utterance:
    """Build an :class:`Utterance`, turning a validation failure into an :class:`InputDataError`."""
    for name, value in fields.items():
        if isinstance(value, str):
            where.text(value, name)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, str):
                    where.text(item, f"{name}[{index}]")
    try:
        return Utterance(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        raise where.error(f"invalid value: {first['msg']}", field=field) from exc


def check_unique_ids(utterances: Iterable[tuple[Where, Utterance]], field: str = "id") -> None:
    """Raise an :class:`InputDataError` at the first utterance whose id was already used.

    Args:
        utterances: each utterance with the record it was read from.
        field: the input field the id comes from, for the message.
    """
    seen: dict[str, Where] = {}
    for where, utterance in utterances:
        if utterance.id in seen:
            first = _cut(seen[utterance.id].record)
            raise where.error(
                f"duplicate utterance id {brief_repr(utterance.id)} (already used by {first}); "
                "expected unique ids",
                field=field,
            )
        seen[utterance.id] = where


def listed_ids(ids: Sequence[str], shown: int = 20) -> str:
    """``a, b, c, ... (7 more)``, each id cut to a readable length (input ids can be huge)."""
    listed = ", ".join(_cut(name) or "" for name in ids[:shown])
    return listed + (f", ... ({len(ids) - shown} more)" if len(ids) > shown else "")


def unknown_id_message(kind: str, wanted: str, available: Sequence[str], shown: int = 20) -> str:
    """'no sample 'x' in this file; available: a, b, c' with the list cut after ``shown`` ids."""
    listed = listed_ids(available, shown) or "(none)"
    return f"no {kind} {brief_repr(wanted)} in this file; available: {listed}"


Unit = tuple[str, dict[str, Any], "Where"]
"""A top-level record of a benchmark file: its id, its data, and where it is (for errors)."""


def keyed_records(document: Document, *, what: str, id_field: str) -> list[Unit]:
    """The file's top-level records (a non-empty JSON list), each with a unique ``id_field``.

    Args:
        document: the parsed file.
        what: what one record is, for messages (e.g. "LoCoMo sample").
        id_field: the field holding the record's id.
    """
    if not isinstance(document.value, list | dict):
        raise Where(document.path).error(f"expected a JSON list of {what}s, got {json_type(document.value)}")
    items = document.items()
    if not items:
        raise Where(document.path).error(f"expected a JSON list of {what}s, got an empty list")
    records: list[Unit] = []
    seen: set[str] = set()
    for name, item in items:
        where = Where(document.path, name)
        data = where.mapping(item, f"a {what}")
        record_id = where.require(data, id_field, str, nonempty=True)
        if record_id in seen:
            raise where.error(
                f"duplicate {id_field.replace('_', ' ')} {brief_repr(record_id)}; expected unique ids",
                field=id_field,
            )
        seen.add(record_id)
        records.append((record_id, data, Where(document.path, record_id)))
    return records


def select_records(
    document: Document,
    records: list[Unit],
    wanted: str | None,
    convert: Callable[[dict[str, Any], Where, str], list[Utterance]],
    *,
    kind: str,
    id_field: str,
) -> list[Utterance]:
    """The utterances of the record ``wanted`` (ids as in the file), or of all records (ids prefixed).

    ``convert(data, where, prefix)`` turns one record into utterances.
    """
    if wanted is not None:
        for record_id, data, where in records:
            if record_id == wanted:
                return convert(data, where, "")
        raise InputDataError(
            unknown_id_message(kind, wanted, [record_id for record_id, _, _ in records]),
            path=document.path,
            field=id_field,
        )
    utterances: list[Utterance] = []
    for record_id, data, where in records:
        utterances.extend(convert(data, where, f"{record_id}/"))
    return utterances
