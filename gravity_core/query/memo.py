"""Bounded memos of what a query derives from one KB (renders, expansion texts)."""

from __future__ import annotations

from typing import TypeVar

__all__ = ["remember"]

K = TypeVar("K")
V = TypeVar("V")


def remember(memo: dict[K, V], key: K, value: V, limit: int) -> V:
    """Store ``value`` under ``key`` and return it; a memo holding ``limit`` entries starts again empty.

    Starting again (rather than evicting one entry at a time) keeps a hit a plain dict read, with no
    bookkeeping, which is what a query path that reads a few dozen entries needs.
    """
    if len(memo) >= limit:
        memo.clear()
    memo[key] = value
    return value
