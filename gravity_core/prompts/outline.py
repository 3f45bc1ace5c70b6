"""A response model described for a model to read: a typed outline derived from its JSON schema.

The JSON schema of :class:`~gravity_core.prompts.fused.FusedExtraction` is about 1,850 tokens of
braces, titles and repeated text; the outline gives the answer's shape in about 500::

    FusedExtraction
     entities: ExtractedEntity[] - Every entity mentioned
    ExtractedEntity
     name: string - Canonical name
     type?: EntityType = "other"
    ...
    EntityType: "person" | "pet" | ...

Each model the answer uses is listed once, its fields one per line: ``?`` marks an optional field,
``=`` its default (unless it is null, false or empty), and the first clause of its description
follows (the text up to the first ``;``, ``: ``, sentence end, ``e.g.`` or parenthesis; the
examples and details stay in the JSON schema), given once for fields of the same name and phrase.
A description that only lists an enum's values is left out. The outline is derived from
``model_json_schema()``, so a field added to a model shows up in it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

__all__ = ["brief", "render_outline"]

_CLAUSE_END = re.compile(r";|\.(?:\s|$)|,?\s+e\.g\.|\s+\(|:\s")
_REF_PREFIX = "#/$defs/"


def brief(description: str) -> str:
    """The first clause of a field's description (see the module doc)."""
    match = _CLAUSE_END.search(description)
    head = description[: match.start()] if match else description
    return head.strip().rstrip(".,")


def _ref_name(node: dict[str, Any]) -> str | None:
    ref = node.get("$ref")
    return ref[len(_REF_PREFIX) :] if isinstance(ref, str) and ref.startswith(_REF_PREFIX) else None


def _enum_text(values: list[Any]) -> str:
    return " | ".join(json.dumps(v, ensure_ascii=False) for v in values)


def _type_text(node: dict[str, Any]) -> str:
    """``string``, ``number``, ``X[]``, ``A | null``, a $defs name, or the enum's values inline."""
    name = _ref_name(node)
    if name is not None:
        return name
    if "anyOf" in node:
        return " | ".join(_type_text(option) for option in node["anyOf"])
    if len(node.get("allOf", [])) == 1:  # how some generators wrap a lone $ref
        return _type_text(node["allOf"][0])
    if "enum" in node:
        return _enum_text(node["enum"])
    kind = node.get("type")
    if kind == "array":
        item = _type_text(node.get("items", {}))
        return f"({item})[]" if " | " in item else f"{item}[]"
    if kind == "integer":
        return "int"
    if kind == "boolean":
        return "bool"
    return str(kind) if isinstance(kind, str) else "any"


class _Outline:
    """The lines of one outline; remembers the phrases given, so a repeated one is not given again."""

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.lines: list[str] = []
        self._said: set[tuple[str, str]] = set()

    def add_object(self, title: str, node: dict[str, Any]) -> None:
        required = set(node.get("required", []))
        self.lines.append(title)
        for name, field in node.get("properties", {}).items():
            self.lines.append(self._field_line(name, field, name in required))

    def _field_line(self, name: str, node: dict[str, Any], required: bool) -> str:
        head = f" {name}{'' if required else '?'}: {_type_text(node)}"
        default = node.get("default")
        if not required and default is not False and default not in (None, [], {}, ""):
            head += f" = {json.dumps(default, ensure_ascii=False)}"
        description = node.get("description", "")
        enum = node.get("enum") or self.defs.get(_ref_name(node) or "", {}).get("enum") or []
        # A description that only lists the enum's values says nothing the type does not.
        if enum and all(str(value) in description for value in enum):
            description = ""
        phrase = brief(description) if description else ""
        if not phrase or (name, phrase) in self._said:
            return head
        self._said.add((name, phrase))
        return f"{head} - {phrase}"


def _refs_in(node: Any) -> list[str]:
    """$defs names ``node`` refers to, in order of appearance."""
    found: list[str] = []
    if isinstance(node, dict):
        name = _ref_name(node)
        if name is not None:
            found.append(name)
        for value in node.values():
            found.extend(_refs_in(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_refs_in(value))
    return found


def render_outline(response_model: type[BaseModel]) -> str:
    """The outline of ``response_model``: the model, then every model and enum it uses, each once.

    Models are listed in the order they are first referred to (depth first), enums last, one line each.
    """
    schema = response_model.model_json_schema()
    defs: dict[str, Any] = schema.get("$defs", {})
    order: list[str] = []

    def visit(node: dict[str, Any]) -> None:
        for name in _refs_in(node.get("properties", {})):
            if name not in order and name in defs:
                order.append(name)
                visit(defs[name])

    visit(schema)
    outline = _Outline(defs)
    outline.add_object(str(schema.get("title", response_model.__name__)), schema)
    enums = [name for name in order if "enum" in defs[name]]
    for name in order:
        if name not in enums:
            outline.add_object(name, defs[name])
    outline.lines += [f"{name}: {_enum_text(defs[name]['enum'])}" for name in enums]
    return "\n".join(outline.lines)
