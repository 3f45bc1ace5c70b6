"""What changed between two JSON values, as a patch that is small when little did.

Anchors that a long conversation keeps touching (a speaker, a topic running through every
session) grow with it: their sources, co-occurrences and arc snapshots are appended to. A patch
carries only what was appended or changed, so a checkpoint's journal record stays the size of
the batches it covers (:mod:`gravity_core.storage.journal`).

Patch forms::

    {"=": value}                          the new value, whole
    {"d": {key: patch, ...}, "r": [key]}  a dict: keys changed or added (in order), keys removed
    {"l": {"i": {"3": patch}, "a": [...]}}  a list no shorter than before: items changed, items appended

:func:`apply` never changes the old value in place: what it does not patch it shares.

Values are compared as Python compares them, so ``1``, ``1.0`` and ``True`` in one place count
as equal: patches are for values whose every place keeps one type, as a pydantic model's dump does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["apply", "diff"]

# A list whose items mostly changed is sent whole.
_MAX_CHANGED_SHARE = 0.5


def diff(old: Any, new: Any) -> dict[str, Any] | None:
    """The patch that turns ``old`` into ``new`` (``None`` when they are equal)."""
    if type(old) is type(new) and old == new:
        return None
    if isinstance(old, dict) and isinstance(new, dict):
        return _diff_dict(old, new)
    if isinstance(old, list) and isinstance(new, list) and len(new) >= len(old):
        return _diff_list(old, new)
    return {"=": new}


def _diff_dict(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    removed = [k for k in old if k not in new]
    kept = [k for k in old if k in new]
    # Patched keys keep their place and added ones go last: if that is not new's order, send it whole.
    if kept + [k for k in new if k not in old] != list(new):
        return {"=": new}
    changed: dict[str, Any] = {}
    for key, value in new.items():
        if key not in old:
            changed[key] = {"=": value}
        else:
            patch = diff(old[key], value)
            if patch is not None:
                changed[key] = patch
    out: dict[str, Any] = {"d": changed}
    if removed:
        out["r"] = removed
    return out


def _diff_list(old: list[Any], new: list[Any]) -> dict[str, Any]:
    n = len(old)
    if new[:n] == old:
        return {"l": {"a": new[n:]}}
    changed: dict[str, Any] = {}
    for i in range(n):
        if type(old[i]) is not type(new[i]) or old[i] != new[i]:
            if len(changed) >= _MAX_CHANGED_SHARE * n:
                return {"=": new}
            patch = diff(old[i], new[i])
            if patch is not None:
                changed[str(i)] = patch
    body: dict[str, Any] = {"i": changed}
    if len(new) > n:
        body["a"] = new[n:]
    return {"l": body}


def apply(old: Any, patch: dict[str, Any]) -> Any:
    """``old`` with ``patch`` applied (a new value; ``old`` is left as it was).

    Raises:
        ValueError: the patch does not fit ``old`` (it was made from another value).
    """
    if "=" in patch:
        return patch["="]
    if "d" in patch:
        if not isinstance(old, dict):
            raise ValueError("a dict patch for a value that is not a dict")
        removed = set(patch.get("r", ()))
        out = {k: v for k, v in old.items() if k not in removed}
        for key, sub in patch["d"].items():
            out[key] = apply(out.get(key), sub)
        return out
    if "l" in patch:
        if not isinstance(old, list):
            raise ValueError("a list patch for a value that is not a list")
        body = patch["l"]
        out_list = list(old)
        for index, sub in body.get("i", {}).items():
            i = int(index)
            if not 0 <= i < len(out_list):
                raise ValueError(f"a list patch for item {i} of a list of {len(out_list)}")
            out_list[i] = apply(out_list[i], sub)
        out_list.extend(body.get("a", ()))
        return out_list
    raise ValueError(f"not a patch: {sorted(patch)}")
