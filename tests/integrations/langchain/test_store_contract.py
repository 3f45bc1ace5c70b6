"""The LangGraph store contract, run on ``InMemoryStore`` and on ``GravityStore`` wrapping one.

Every case of the first part runs four ways (each store, sync and async) and gives each call to
the store under test and to a plain ``InMemoryStore`` holding the same items, asserting both the
documented behaviour and that the two answer alike: the items here are not turns of the engine's
KB, so GRAVITY has nothing to add (the cases are modelled on LangGraph's
``libs/checkpoint/tests/test_store.py`` and Zep's ``integrations/langgraph/python/tests/test_store.py``).
The second part holds the sample conversation's turns, keyed by utterance id, where GRAVITY adds
the selected anchors' source turns, and checks their reason, the filter, the namespace, limit and
offset, and the ops the wrapped store is given.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from gravity_core.context.policy import DEFAULT_POLICY
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.serving.users import UserKBs
from gravity_langchain.store import GravityStore
from gravity_langchain.store_filter import matches_filter
from gravity_langchain.store_items import GravitySearchItem
from tests.core.serving.test_users import marks_of_others, offline, user_chat
from tests.integrations.langchain.store_cases import (
    MODES,
    Api,
    Mode,
    RecordingStore,
    Twin,
    index_config,
    keys,
    rows,
)

DOCS = ("docs",)
ITEMS = {
    "doc1": {"text": "red apple", "color": "red", "score": 4.5, "shop": {"town": "Leeds"}},
    "doc2": {"text": "red car", "color": "red", "score": 3.0, "shop": {"town": "Bristol"}},
    "doc3": {"text": "green apple", "color": "green", "score": 4.0, "tags": ["fruit", "green"]},
    "doc4": {"text": "blue car", "color": "blue", "score": 3.5, "tags": ["car"]},
}
STORES = ("InMemoryStore", "GravityStore")


def make(kind: str, engine: GravityEngine, embedder: HashingEmbedder) -> InMemoryStore | GravityStore:
    inner = InMemoryStore(index=index_config(embedder))
    return inner if kind == "InMemoryStore" else GravityStore(inner, engine)


@pytest.fixture(params=STORES)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> Mode:
    return request.param


@pytest.fixture
def twin(kind: str, mode: Mode, engine: GravityEngine, embedder: HashingEmbedder) -> Twin:
    """The store under test beside a plain InMemoryStore, both empty."""
    return Twin(
        Api(make(kind, engine, embedder), mode), Api(InMemoryStore(index=index_config(embedder)), mode)
    )


@pytest.fixture
async def docs(twin: Twin) -> Twin:
    """Both stores holding :data:`ITEMS` under ``("docs",)``."""
    for key, value in ITEMS.items():
        await twin.put(DOCS, key, value)
    return twin


# -- the contract: get, put, delete --------------------------------------------------------------


async def test_put_get_update_delete(twin: Twin) -> None:
    assert await twin.get(("users", "u1"), "prefs") is None
    await twin.put(("users", "u1"), "prefs", {"theme": "dark"})
    item = await twin.get(("users", "u1"), "prefs")
    assert item is not None and item.value == {"theme": "dark"} and item.namespace == ("users", "u1")
    await twin.put(("users", "u1"), "prefs", {"theme": "light"})
    updated = await twin.get(("users", "u1"), "prefs")
    assert updated is not None and updated.value == {"theme": "light"}
    assert updated.created_at >= item.created_at
    await twin.delete(("users", "u1"), "prefs")
    assert await twin.get(("users", "u1"), "prefs") is None
    await twin.delete(("users", "u1"), "never-there")  # deleting a missing item is no error


@pytest.mark.parametrize("namespace", [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")])
async def test_bad_namespaces_are_refused(twin: Twin, namespace: tuple[str, ...]) -> None:
    for api in (twin.subject, twin.reference):
        with pytest.raises(InvalidNamespaceError):
            await api.put(namespace, "key", {"foo": "bar"})


async def test_ttl_is_refused_as_the_wrapped_store_refuses_it(twin: Twin) -> None:
    assert twin.subject.store.supports_ttl is False
    for api in (twin.subject, twin.reference):
        with pytest.raises(NotImplementedError, match="TTL is not supported"):
            await api.put(DOCS, "doc", {"text": "x"}, ttl=5.0)
    await twin.put(DOCS, "doc", {"text": "x"}, ttl=None)
    assert await twin.get(DOCS, "doc") is not None


# -- the contract: namespaces --------------------------------------------------------------------

NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "123"),
    ("users", "456", "settings"),
    ("admin", "users", "789"),
]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            {"prefix": ("a", "b")},
            [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")],
        ),
        ({"suffix": ("f",)}, [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]),
        ({"prefix": ("a",), "suffix": ("f",)}, [("a", "b", "f"), ("a", "c", "f")]),
        ({"prefix": ("a", "b"), "max_depth": 3}, [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]),
        ({"max_depth": 1}, [("a",), ("admin",), ("b",), ("users",)]),
        ({"prefix": ("a", "b"), "limit": 2}, [("a", "b", "c"), ("a", "b", "d", "e")]),
        ({"prefix": ("a", "b"), "offset": 2}, [("a", "b", "d", "i"), ("a", "b", "f")]),
        ({"prefix": ("a", "*", "f")}, [("a", "b", "f"), ("a", "c", "f")]),
        ({"suffix": ("*", "settings")}, [("users", "456", "settings")]),
        ({"prefix": ("nonexistent",)}, []),
        ({"limit": 3, "offset": 6}, [("b", "a", "f"), ("users", "123"), ("users", "456", "settings")]),
    ],
)
async def test_list_namespaces(
    twin: Twin, arguments: dict[str, Any], expected: list[tuple[str, ...]]
) -> None:
    for n, namespace in enumerate(NAMESPACES):
        await twin.put(namespace, f"id_{n}", {"data": f"value_{n:02d}"})
    assert sorted(await twin.list_namespaces(**arguments)) == sorted(expected)


# -- the contract: search ------------------------------------------------------------------------


FILTERS = [
    ({"color": "red"}, {"doc1", "doc2"}),
    ({"color": {"$eq": "blue"}}, {"doc4"}),
    ({"color": {"$ne": "red"}}, {"doc3", "doc4"}),
    ({"score": {"$gt": 3.5}}, {"doc1", "doc3"}),
    ({"score": {"$gte": 3.5}}, {"doc1", "doc3", "doc4"}),
    ({"score": {"$lt": 4.0}}, {"doc2", "doc4"}),
    ({"score": {"$lte": 4.0}}, {"doc2", "doc3", "doc4"}),
    ({"score": {"$gt": 3.0, "$lt": 4.5}}, {"doc3", "doc4"}),
    ({"score": {"$gte": 4.0}, "color": "green"}, {"doc3"}),
    ({"shop": {"town": "Leeds"}}, {"doc1"}),
    ({"tags": ["fruit", "green"]}, {"doc3"}),
    ({"color": "purple"}, set()),
]
"""Filters of :data:`ITEMS` and the keys they keep."""


@pytest.mark.parametrize("query", [None, "apple"])
@pytest.mark.parametrize(("search_filter", "expected"), FILTERS)
async def test_search_filters(
    docs: Twin, query: str | None, search_filter: dict[str, Any], expected: set[str]
) -> None:
    found = await docs.search(DOCS, query=query, filter=search_filter)
    assert set(keys(found)) == expected
    assert all((item.score is not None) == (query is not None) for item in found)


@pytest.mark.parametrize(("search_filter", "expected"), FILTERS)
def test_the_filter_of_the_turns_gravity_adds_is_the_stores(
    search_filter: dict[str, Any], expected: set[str]
) -> None:
    assert {key for key, value in ITEMS.items() if matches_filter(value, search_filter)} == expected


def test_a_turn_the_filter_cannot_compare_is_left_out() -> None:
    assert not matches_filter({"text": "no score"}, {"score": {"$gt": 3}})
    assert not matches_filter({"score": "high"}, {"score": {"$lte": 3}})
    assert matches_filter({"score": "4"}, {"score": {"$gt": 3}})  # compared as numbers, as InMemoryStore does
    with pytest.raises(ConfigurationError, match=r"unsupported filter operator '\$in'"):
        matches_filter({"color": "red"}, {"color": {"$in": ["red"]}})


async def test_a_query_ranks_by_similarity(docs: Twin) -> None:
    found = await docs.search(DOCS, query="red car")
    assert found[0].key == "doc2"
    scores = [item.score for item in found]
    assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]


@pytest.mark.parametrize("query", [None, "test document"])
async def test_limit_and_offset_page_through_the_results(twin: Twin, query: str | None) -> None:
    for n in range(5):
        await twin.put(DOCS, f"doc{n}", {"text": f"test document number {n}"})
    everything = await twin.search(DOCS, query=query, limit=10)
    assert len(everything) == 5
    pages = [await twin.search(DOCS, query=query, limit=2, offset=offset) for offset in (0, 2, 4)]
    assert [len(page) for page in pages] == [2, 2, 1]
    assert [key for page in pages for key in keys(page)] == keys(everything)
    assert await twin.search(DOCS, query=query, limit=2, offset=5) == []


async def test_put_then_search_and_update_re_embeds(twin: Twin) -> None:
    await twin.put(DOCS, "doc1", {"text": "zany zebra Xerxes"})
    await twin.put(DOCS, "doc2", {"text": "something about dogs"})
    await twin.put(DOCS, "doc3", {"text": "text about birds"})
    before = await twin.search(DOCS, query="zany zebra Xerxes")
    assert before[0].key == "doc1"
    await twin.put(DOCS, "doc1", {"text": "new text about dogs"})
    after = await twin.search(DOCS, query="zany zebra Xerxes")
    score = next(item.score for item in after if item.key == "doc1")
    assert score is not None and before[0].score is not None and score < before[0].score
    assert (await twin.search(DOCS, query="new text about dogs"))[0].key == "doc1"


async def test_items_not_indexed_are_not_ranked(twin: Twin) -> None:
    for n, text in enumerate(["dogs in the park", "birds in the sky", "fish in the sea"]):
        await twin.put(DOCS, f"doc{n}", {"text": text})
    await twin.put(DOCS, "hidden", {"text": "dogs in the park"}, index=False)
    await twin.put(DOCS, "other", {"text": "cats", "note": "dogs in the park"}, index=["note"])
    found = await twin.search(DOCS, query="dogs in the park", limit=3)
    assert "hidden" not in keys(found) and set(keys(found)[:2]) == {"doc0", "other"}
    everything = await twin.search(DOCS, query="dogs in the park", limit=10)
    assert keys(everything)[-1] == "hidden" and everything[-1].score is None


async def test_delete_then_search(docs: Twin) -> None:
    await docs.delete(DOCS, "doc1")
    assert "doc1" not in keys(await docs.search(DOCS, query="red apple"))
    assert "doc1" not in keys(await docs.search(DOCS))
    assert await docs.get(DOCS, "doc1") is None


async def test_a_batch_keeps_its_order(docs: Twin) -> None:
    results = await docs.batch(
        [
            PutOp(DOCS, "doc5", {"text": "yellow banana", "color": "yellow", "score": 2.0}),
            GetOp(DOCS, "doc1"),
            SearchOp(DOCS, {"color": "red"}, 10, 0, "apple"),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", DOCS),), limit=10),
            PutOp(DOCS, "doc2", None),
            SearchOp(DOCS, None, 2, 1, None),
            GetOp(DOCS, "doc5"),
        ]
    )
    assert results[0] is None and results[4] is None
    assert results[1] is not None and results[1].key == "doc1"  # type: ignore[union-attr]
    assert keys(results[2]) == ["doc1", "doc2"]  # type: ignore[arg-type]
    assert results[3] == [DOCS]
    assert keys(results[5]) == ["doc2", "doc3"]  # type: ignore[arg-type]
    # InMemoryStore reads before it writes: the batch's own put is not seen by its get.
    assert results[6] is None
    assert await docs.get(DOCS, "doc5") is not None and await docs.get(DOCS, "doc2") is None


# -- the ops the wrapped store is given ----------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_the_wrapped_store_gets_the_callers_ops_unchanged(
    mode: Mode, engine: GravityEngine, embedder: HashingEmbedder
) -> None:
    ttl = {"default_ttl": 7.0, "refresh_on_read": False}
    direct = RecordingStore(index=index_config(embedder), ttl=ttl, supports_ttl=True)  # type: ignore[arg-type]
    wrapped = RecordingStore(index=index_config(embedder), ttl=ttl, supports_ttl=True)  # type: ignore[arg-type]
    gravity = GravityStore(wrapped, engine)
    assert gravity.supports_ttl is True and gravity.ttl_config == ttl
    for store in (direct, gravity):
        api = Api(store, mode)
        await api.put(DOCS, "a", {"text": "red apple"})
        await api.put(DOCS, "b", {"text": "red car"}, index=False, ttl=2.0)
        await api.put(DOCS, "c", {"text": "blue car"}, ttl=None)
        await api.get(DOCS, "a")
        await api.search(DOCS, filter={"text": "red car"}, limit=3, offset=1)
        await api.list_namespaces(prefix=DOCS, max_depth=1)
        await api.delete(DOCS, "a")
    assert wrapped.ops == direct.ops
    puts = [op for op in wrapped.ops if isinstance(op, PutOp)]
    assert [op.ttl for op in puts] == [7.0, 2.0, None, None]
    assert [op.refresh_ttl for op in wrapped.ops if isinstance(op, GetOp)] == [False]


# -- what GRAVITY adds ---------------------------------------------------------------------------

CHAT = ("chat", "u1")


def turn_value(u: Utterance) -> dict[str, Any]:
    return {"text": f"{u.speaker}: {u.text}", "session": u.session, "speaker": u.speaker}


@pytest.fixture
def turns(embedder: HashingEmbedder, utterances: list[Utterance]) -> InMemoryStore:
    """The sample conversation, one item per turn keyed by its utterance id, under ``("chat", "u1")``."""
    store = InMemoryStore(index=index_config(embedder))
    store.batch([PutOp(CHAT, u.id, turn_value(u)) for u in utterances])
    return store


def provenance(items: list[SearchItem]) -> list[GravitySearchItem]:
    return [
        i for i in items if isinstance(i, GravitySearchItem) and i.gravity["gravity_slot"] == "provenance"
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_gravity_adds_the_anchors_source_turns_saying_why(
    mode: Mode, turns: InMemoryStore, engine: GravityEngine, question: str
) -> None:
    store = GravityStore(turns, engine)
    plain = turns.search(CHAT, query=question, limit=6)
    ours = await Api(store, mode).search(CHAT, query=question, limit=6)
    assert len(ours) == 6 and all(isinstance(item, GravitySearchItem) for item in ours)
    added = provenance(ours)
    assert added, "the selected anchors' source turns should join the store's hits"
    context = store.anchors(question, CHAT)
    assert context is not None
    sources = {s.label: set(s.utterance_ids) for s in context.sources}
    found = {item.key: item.score for item in plain}
    assert any(item.key not in found for item in added), "provenance should add a turn the search missed"
    for item in added:
        assert item.score == found.get(item.key)  # the store's score when its search found it too
        stored = turns.get(CHAT, item.key)
        assert stored is not None and item.value == stored.value and item.namespace == CHAT
        anchor = item.gravity["gravity_found_by"][-1]  # type: ignore[index]
        assert anchor["query"] == "provenance" and item.key in sources[anchor["text"]]
    # The store's own hits keep their order and scores.
    own = [item for item in ours if item.gravity["gravity_slot"] == "question"]  # type: ignore[attr-defined]
    taken = set(keys(added))
    assert rows(own) == [row for row in rows(plain) if row[1] not in taken][: len(own)]
    assert keys(ours)[:2] == keys(plain)[:2]  # the policy's lead
    assert item.dict()["gravity"] == item.gravity


async def test_sync_and_async_searches_agree(
    turns: InMemoryStore, engine: GravityEngine, question: str
) -> None:
    store = GravityStore(turns, engine)
    assert rows(await store.asearch(CHAT, query=question, limit=8)) == rows(
        store.search(CHAT, query=question, limit=8)
    )


def test_limit_and_offset_apply_to_the_merged_results(
    turns: InMemoryStore, engine: GravityEngine, question: str
) -> None:
    store = GravityStore(turns, engine)
    everything = store.search(CHAT, query=question, limit=9)
    pages = [store.search(CHAT, query=question, limit=3, offset=offset) for offset in (0, 3, 6)]
    assert [len(page) for page in pages] == [3, 3, 3]
    assert [key for page in pages for key in keys(page)] == keys(everything)
    assert provenance(pages[1]) or provenance(pages[2])


def test_the_turns_added_pass_the_searchs_filter(
    turns: InMemoryStore, engine: GravityEngine, question: str
) -> None:
    store = GravityStore(turns, engine)
    added = provenance(store.search(CHAT, query=question, limit=6))[0]
    session = added.value["session"]
    kept = store.search(CHAT, query=question, limit=6, filter={"session": session})
    assert added.key in keys(kept) and all(item.value["session"] == session for item in kept)
    dropped = store.search(CHAT, query=question, limit=6, filter={"session": {"$ne": session}})
    assert added.key not in keys(dropped) and all(item.value["session"] != session for item in dropped)
    assert provenance(dropped), "turns of other sessions still join"


def test_the_turns_added_come_from_the_searchs_namespace(
    turns: InMemoryStore, engine: GravityEngine, question: str, utterances: list[Utterance]
) -> None:
    turns.batch([PutOp(("archive", "old"), u.id, {**turn_value(u), "archived": True}) for u in utterances])
    store = GravityStore(turns, engine)
    for prefix in (("chat",), CHAT, ("archive",)):
        found = store.search(prefix, query=question, limit=6)
        assert provenance(found) and all(item.namespace[: len(prefix)] == prefix for item in found), prefix
    everywhere = provenance(store.search((), query=question, limit=10))
    assert everywhere and {item.namespace for item in everywhere} <= {CHAT, ("archive", "old")}
    assert store.search(("nowhere",), query=question, limit=6) == []
    assert store.search(("chat", "*"), query=question, limit=6) == []  # no wildcard in a search's prefix
    assert store.search(("chat", "u2"), query=question, limit=6) == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_search_only_reads_and_refreshes_no_turn_it_looks_up(
    mode: Mode, engine: GravityEngine, embedder: HashingEmbedder, utterances: list[Utterance], question: str
) -> None:
    wrapped = RecordingStore(index=index_config(embedder), ttl={"refresh_on_read": True}, supports_ttl=True)
    wrapped.batch([PutOp(CHAT, u.id, turn_value(u)) for u in utterances])
    wrapped.batches.clear()
    found = await Api(GravityStore(wrapped, engine), mode).search(CHAT, query=question, limit=4, offset=2)
    assert provenance(found)
    gets = [op for op in wrapped.ops if isinstance(op, GetOp)]
    assert gets and all(op.refresh_ttl is False for op in gets)
    assert not any(isinstance(op, PutOp) for op in wrapped.ops)
    searches = [op for op in wrapped.ops if isinstance(op, SearchOp)]
    assert searches == [
        SearchOp(CHAT, None, 6, 0, question, True)
    ]  # offset + limit hits, offset applied after


def test_too_many_namespaces_add_nothing_and_say_so(
    turns: InMemoryStore, engine: GravityEngine, question: str, caplog: pytest.LogCaptureFixture
) -> None:
    turns.put(("chat", "u2"), "note", {"text": "another user"})
    store = GravityStore(turns, engine, max_namespaces=1)
    with caplog.at_level(logging.INFO, logger="gravity_langchain.store"):
        found = store.search(("chat",), query=question, limit=6)
    assert rows(found) == rows(turns.search(("chat",), query=question, limit=6))
    assert "more than 1 namespaces" in caplog.text
    assert provenance(store.search(CHAT, query=question, limit=6))


def test_a_batch_with_gravity_searches_keeps_its_order(
    turns: InMemoryStore, engine: GravityEngine, question: str
) -> None:
    store = GravityStore(turns, engine)
    first = store.search(CHAT, query=question, limit=6)
    maya = store.search(CHAT, query=question, limit=4, offset=1, filter={"speaker": "Maya"})
    listed = turns.search(CHAT, limit=3)
    assert provenance(first) and provenance(maya) and len(maya) == 4
    results = store.batch(
        [
            SearchOp(CHAT, None, 6, 0, question),
            GetOp(CHAT, "session_1:1"),
            SearchOp(CHAT, {"speaker": "Maya"}, 4, 1, question),
            PutOp(
                CHAT, "new", {"text": "Maya now works in Bristol", "session": "session_9", "speaker": "Maya"}
            ),
            SearchOp(CHAT, None, 3, 0, None),
        ]
    )
    assert rows(results[0]) == rows(first)  # type: ignore[arg-type]
    assert results[1] == turns.get(CHAT, "session_1:1") and results[3] is None
    assert rows(results[2]) == rows(maya)  # type: ignore[arg-type]
    assert rows(results[4]) == rows(listed)  # type: ignore[arg-type]
    assert store.get(CHAT, "new") is not None


# -- when GRAVITY has nothing to add, the wrapped store's answer is returned as it is ---------------


@pytest.mark.parametrize(
    ("limit", "policy"),
    [
        (2, DEFAULT_POLICY),  # both places are the store's hits'
        (6, dataclasses.replace(DEFAULT_POLICY, source_every=0)),  # a policy adding no turn
        (6, dataclasses.replace(DEFAULT_POLICY, sources_per_anchor=0)),
    ],
)
def test_nothing_to_add_returns_the_stores_results(
    turns: InMemoryStore, engine: GravityEngine, question: str, limit: int, policy: Any
) -> None:
    store = GravityStore(turns, engine, policy=policy)
    found = store.search(CHAT, query=question, limit=limit)
    assert rows(found) == rows(turns.search(CHAT, query=question, limit=limit))
    assert not any(isinstance(item, GravitySearchItem) for item in found)


def test_a_store_without_the_turns_is_told_once(
    engine: GravityEngine,
    embedder: HashingEmbedder,
    utterances: list[Utterance],
    question: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    inner = InMemoryStore(index=index_config(embedder))
    inner.batch([PutOp(CHAT, f"memory-{n}", turn_value(u)) for n, u in enumerate(utterances)])
    store = GravityStore(inner, engine)
    with caplog.at_level(logging.WARNING, logger="gravity_core.serving.provenance"):
        for _ in range(2):
            assert rows(store.search(CHAT, query=question, limit=6)) == rows(
                inner.search(CHAT, query=question, limit=6)
            )
    assert caplog.text.count("holds none of the turns") == 1


def test_an_item_may_hold_several_turns(
    engine: GravityEngine, embedder: HashingEmbedder, utterances: list[Utterance], question: str
) -> None:
    """A chunk keyed by its first turn's id, listing its turns under ``gravity_utterance_ids``."""
    inner = InMemoryStore(index=index_config(embedder))
    chunks = [utterances[n : n + 3] for n in range(0, len(utterances), 3)]
    inner.batch(
        [
            PutOp(
                CHAT,
                chunk[0].id,
                {
                    "text": " ".join(turn_value(u)["text"] for u in chunk),
                    "gravity_utterance_ids": [u.id for u in chunk],
                },
            )
            for chunk in chunks
        ]
    )
    store = GravityStore(inner, engine)
    added = provenance(store.search(CHAT, query=question, limit=6))
    assert added
    context = store.anchors(question, CHAT)
    assert context is not None
    wanted = {u for s in context.sources for u in s.utterance_ids}
    assert all(wanted & set(item.value["gravity_utterance_ids"]) for item in added)


# -- many users ----------------------------------------------------------------------------------

USER_QUESTION = "When did Ana adopt a dog?"


@pytest.fixture(scope="module")
def kbs(tmp_path_factory: pytest.TempPathFactory, nlp: Any) -> UserKBs:
    """KBs of users u1 and u2 (each chat names its own marks, Wombat<n> and quokka<n>)."""
    users = UserKBs(tmp_path_factory.mktemp("users"), embedder=HashingEmbedder(), extractor=offline(nlp))
    for n in (1, 2):
        users.add(f"u{n}", user_chat(n))
    return users


@pytest.fixture
def shared(embedder: HashingEmbedder) -> InMemoryStore:
    """One store holding the chats of u1, u2 and u9 (no KB), each under ``("chat", user)``, same keys."""
    store = InMemoryStore(index=index_config(embedder))
    for n in (1, 2, 9):
        store.batch([PutOp(("chat", f"u{n}"), u.id, turn_value(u)) for u in user_chat(n)])
    return store


@pytest.mark.parametrize("mode", MODES)
async def test_each_user_gets_their_anchors_and_their_turns(
    mode: Mode, kbs: UserKBs, shared: InMemoryStore
) -> None:
    store = GravityStore(shared, users=kbs, user_namespace_index=1)
    for n in (1, 2):
        found = await Api(store, mode).search(("chat", f"u{n}"), query=USER_QUESTION, limit=4)
        assert found and all(item.namespace == ("chat", f"u{n}") for item in found)
        assert not marks_of_others([item.value["text"] for item in found], n)
        labels = {s.label for s in kbs.query(f"u{n}", USER_QUESTION).sources}
        by_anchor = [
            hit["text"]
            for item in found
            for hit in item.gravity["gravity_found_by"]  # type: ignore[attr-defined]
            if hit["query"] == "provenance"
        ]
        assert by_anchor and set(by_anchor) <= labels
        anchors = await store.aanchors(USER_QUESTION, ("chat", f"u{n}"))
        assert anchors is not None and f"Wombat{n}" in anchors.text
        assert not marks_of_others([anchors.text], n)


def test_a_user_without_a_kb_gets_the_stores_results(kbs: UserKBs, shared: InMemoryStore) -> None:
    store = GravityStore(shared, users=kbs, user_namespace_index=1)
    found = store.search(("chat", "u9"), query=USER_QUESTION, limit=4)
    assert rows(found) == rows(shared.search(("chat", "u9"), query=USER_QUESTION, limit=4))
    assert not any(isinstance(item, GravitySearchItem) for item in found)


def test_a_search_naming_no_user_gets_the_stores_results(
    kbs: UserKBs, shared: InMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    store = GravityStore(shared, users=kbs, user_namespace_index=1)
    with caplog.at_level(logging.INFO, logger="gravity_langchain.store"):
        for _ in range(2):
            found = store.search(("chat",), query=USER_QUESTION, limit=6)
            assert rows(found) == rows(shared.search(("chat",), query=USER_QUESTION, limit=6))
    assert caplog.text.count("names no user") == 1
    assert store.anchors(USER_QUESTION, ("chat",)) is None


def test_a_namespace_label_that_cannot_name_a_user_is_refused(kbs: UserKBs, shared: InMemoryStore) -> None:
    store = GravityStore(shared, users=kbs, user_namespace_index=1)
    with pytest.raises(ConfigurationError, match="cannot name a folder"):
        store.search(("chat", "bad id"), query=USER_QUESTION)


# -- configuration -------------------------------------------------------------------------------


def test_misuse_is_refused(engine: GravityEngine, tmp_path: Any) -> None:
    users = UserKBs(tmp_path, embedder=HashingEmbedder())
    inner = InMemoryStore()
    with pytest.raises(ConfigurationError, match="exactly one of engine"):
        GravityStore(inner)
    with pytest.raises(ConfigurationError, match="exactly one of engine"):
        GravityStore(inner, engine, users=users, user_namespace_index=1)
    with pytest.raises(ConfigurationError, match="user_namespace_index"):
        GravityStore(inner, users=users)
    with pytest.raises(ConfigurationError, match="user_namespace_index"):
        GravityStore(inner, engine, user_namespace_index=1)
    with pytest.raises(ConfigurationError, match="max_namespaces"):
        GravityStore(inner, engine, max_namespaces=0)
    with pytest.raises(ConfigurationError, match="BaseStore"):
        GravityStore({}, engine)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="question_date"):
        GravityStore(inner, engine, question_date="soon")
