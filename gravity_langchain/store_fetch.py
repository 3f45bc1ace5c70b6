"""The source turns of a GravityStore batch: which namespaces to look in, which keys to get, what to add.

For each queried search GRAVITY adds to, the turns the policy asks for are looked up by key in
every namespace under the search's prefix (listed first), in one batch of ``GetOp`` for the whole
batch; the items found are paired with the anchors that asked for them and kept when they pass
the search's filter.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import cast

from langgraph.store.base import GetOp, Item, ListNamespacesOp, MatchCondition, Result, SearchItem, SearchOp

from gravity_core.context.policy import ContextPolicy
from gravity_core.context.provenance import SourceTurn
from gravity_core.serving.provenance import ProvenanceNotices, held_utterances
from gravity_langchain.store_filter import matches_filter
from gravity_langchain.store_items import item_key, merged_items

__all__ = ["Addition", "SourceLookup", "Wanted"]

Namespace = tuple[str, ...]


@dataclass(frozen=True)
class Wanted:
    """A queried search and the turns GRAVITY's selected anchors come from."""

    search: SearchOp
    turns: Sequence[SourceTurn]


@dataclass(frozen=True)
class Addition:
    """A queried search GRAVITY adds to, and the store's items holding the turns, each with its anchor."""

    asked: SearchOp
    sourced: Sequence[tuple[str, Item]]

    @property
    def search(self) -> SearchOp:
        """The search the wrapped store runs: its first ``offset + limit`` hits (offset applied later)."""
        return self.asked._replace(limit=self.asked.offset + self.asked.limit, offset=0)

    def results(self, policy: ContextPolicy, hits: Sequence[SearchItem]) -> list[SearchItem]:
        """The store's ``hits`` merged with the turns by ``policy``, cut to the asked offset and limit."""
        top = self.asked.offset + self.asked.limit
        merged = policy.merge(self.asked.query or "", hits, [], [], item_key, top_n=top, sourced=self.sourced)
        return merged_items(merged[self.asked.offset :])


def _holds(item: Item) -> list[str]:
    return held_utterances(item.key, item.value)


class SourceLookup:
    """One batch's lookups of source turns: list the namespaces, get the turns by key, pair them.

    Args:
        wanted: the queried searches GRAVITY has turns for, by their place in the batch.
        max_namespaces: namespaces under a prefix in which turns are looked up, at most.
        too_many: told a prefix that holds more namespaces than that (its searches get nothing).
    """

    def __init__(
        self, wanted: dict[int, Wanted], max_namespaces: int, too_many: Callable[[Namespace], None]
    ) -> None:
        self.wanted = wanted
        self.max_namespaces = max_namespaces
        self.too_many = too_many
        self.prefixes = list(dict.fromkeys(w.search.namespace_prefix for w in wanted.values()))
        self.namespaces: dict[Namespace, list[Namespace]] = {}
        self.gets: list[GetOp] = []

    def listing(self) -> list[ListNamespacesOp]:
        """One listing per prefix, of one namespace more than may be searched (to see when there are more)."""
        return [
            ListNamespacesOp(
                match_conditions=(MatchCondition("prefix", prefix),) if prefix else None,
                limit=self.max_namespaces + 1,
            )
            for prefix in self.prefixes
        ]

    def fetches(self, listed: Sequence[Result]) -> list[GetOp]:
        """The gets of every wanted turn in every namespace under its search's prefix, each once.

        ``listed``: the results of :meth:`listing`. A get never refreshes a TTL: the turn may
        not be returned.
        """
        for prefix, result in zip(self.prefixes, listed, strict=True):
            found = cast(list[Namespace], result)  # a listing's result
            if len(found) > self.max_namespaces:
                self.too_many(prefix)
                found = []
            # A listing's prefix treats "*" as a wildcard; a search's prefix does not.
            self.namespaces[prefix] = [ns for ns in found if ns[: len(prefix)] == prefix]
        gets: dict[tuple[Namespace, str], GetOp] = {}
        for wanted in self.wanted.values():
            for namespace in self.namespaces[wanted.search.namespace_prefix]:
                for turn in wanted.turns:
                    key = (namespace, turn.utterance_id)
                    gets.setdefault(key, GetOp(namespace, turn.utterance_id, refresh_ttl=False))
        self.gets = list(gets.values())
        return self.gets

    def additions(self, fetched: Sequence[Result], notices: ProvenanceNotices) -> dict[int, Addition]:
        """The searches GRAVITY adds turns to, with the turns; ``fetched``: the results of :meth:`fetches`."""
        items: dict[Hashable, Item] = {}
        for get, item in zip(self.gets, fetched, strict=True):
            if isinstance(item, Item):
                items[(get.namespace, get.key)] = item
        found: dict[int, Addition] = {}
        for at, wanted in self.wanted.items():
            search = wanted.search
            namespaces = self.namespaces[search.namespace_prefix]
            if not namespaces:
                continue
            held = [
                item
                for namespace in namespaces
                for turn in wanted.turns
                if (item := items.get((namespace, turn.utterance_id))) is not None
            ]
            paired = notices.paired(wanted.turns, held, _holds, item_key)
            kept = [(anchor, item) for anchor, item in paired if matches_filter(item.value, search.filter)]
            if kept:
                found[at] = Addition(search, kept)
        return found
