"""Helpers of the LangGraph store tests: one API over a store's sync and async methods, a recording store.

Not a conftest: the store tests import what they use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from langgraph.store.base import (
    BaseStore,
    IndexConfig,
    Item,
    NotProvided,
    Op,
    Result,
    SearchItem,
    TTLConfig,
)
from langgraph.store.memory import InMemoryStore

from gravity_core.embeddings.base import Embedder
from gravity_langchain import GravityEmbeddings

Mode = Literal["sync", "async"]
MODES: tuple[Mode, ...] = ("sync", "async")

Row = tuple[tuple[str, ...], str, dict[str, Any], float | None]


def index_config(embedder: Embedder) -> IndexConfig:
    """A vector index of the items' ``text`` field, embedded by GRAVITY's offline embedder."""
    return {"dims": embedder.dim, "embed": GravityEmbeddings(embedder), "fields": ["text"]}


def rows(items: Sequence[SearchItem]) -> list[Row]:
    """What two stores' search results must agree on (their timestamps differ)."""
    return [(item.namespace, item.key, item.value, item.score) for item in items]


def keys(items: Sequence[Item]) -> list[str]:
    return [item.key for item in items]


class Api:
    """A store's public methods, called sync or async: each test runs the same case both ways."""

    def __init__(self, store: BaseStore, mode: Mode) -> None:
        self.store = store
        self.mode = mode

    async def get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        if self.mode == "sync":
            return self.store.get(namespace, key)
        return await self.store.aget(namespace, key)

    async def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        index: Literal[False] | list[str] | None = None,
        **ttl: float | None | NotProvided,
    ) -> None:
        if self.mode == "sync":
            self.store.put(namespace, key, value, index, **ttl)
        else:
            await self.store.aput(namespace, key, value, index, **ttl)

    async def delete(self, namespace: tuple[str, ...], key: str) -> None:
        if self.mode == "sync":
            self.store.delete(namespace, key)
        else:
            await self.store.adelete(namespace, key)

    async def search(self, prefix: tuple[str, ...], **kwargs: Any) -> list[SearchItem]:
        if self.mode == "sync":
            return self.store.search(prefix, **kwargs)
        return await self.store.asearch(prefix, **kwargs)

    async def list_namespaces(self, **kwargs: Any) -> list[tuple[str, ...]]:
        if self.mode == "sync":
            return self.store.list_namespaces(**kwargs)
        return await self.store.alist_namespaces(**kwargs)

    async def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self.mode == "sync":
            return self.store.batch(ops)
        return await self.store.abatch(ops)


class RecordingStore(BaseStore):
    """An ``InMemoryStore`` that records every batch it runs, and may claim TTL support."""

    def __init__(
        self, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None, supports_ttl: bool = False
    ) -> None:
        self.inner = InMemoryStore(index=index)
        self.batches: list[list[Op]] = []
        self.supports_ttl = supports_ttl
        self.ttl_config = ttl

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        self.batches.append(list(ops))
        return self.inner.batch(self.batches[-1])

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        self.batches.append(list(ops))
        return await self.inner.abatch(self.batches[-1])

    @property
    def ops(self) -> list[Op]:
        """Every op run, in order."""
        return [op for batch in self.batches for op in batch]


def comparable(result: object) -> object:
    """A store's answer without what two stores differ in (timestamps); a search hit keeps its score."""
    if isinstance(result, SearchItem):
        return (result.namespace, result.key, result.value, result.score)
    if isinstance(result, Item):
        return (result.namespace, result.key, result.value)
    if isinstance(result, list):
        return [comparable(part) for part in result]
    return result


class Twin:
    """The store under test and a plain ``InMemoryStore``, given the same calls: their answers must agree."""

    def __init__(self, subject: Api, reference: Api) -> None:
        self.subject = subject
        self.reference = reference

    async def _both(self, method: str, *args: Any, **kwargs: Any) -> Any:
        ours = await getattr(self.subject, method)(*args, **kwargs)
        theirs = await getattr(self.reference, method)(*args, **kwargs)
        assert comparable(ours) == comparable(theirs), method
        return ours

    async def get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        return await self._both("get", namespace, key)

    async def put(self, namespace: tuple[str, ...], key: str, value: dict[str, Any], **kwargs: Any) -> None:
        await self._both("put", namespace, key, value, **kwargs)

    async def delete(self, namespace: tuple[str, ...], key: str) -> None:
        await self._both("delete", namespace, key)

    async def search(self, prefix: tuple[str, ...], **kwargs: Any) -> list[SearchItem]:
        return await self._both("search", prefix, **kwargs)

    async def list_namespaces(self, **kwargs: Any) -> list[tuple[str, ...]]:
        return await self._both("list_namespaces", **kwargs)

    async def batch(self, ops: Sequence[Op]) -> list[Result]:
        return await self._both("batch", ops)
