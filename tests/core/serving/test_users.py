"""One KB per user: ids checked before they become paths, engines in an LRU, and no anchor or
expansion of one user ever in another's context, with builds, forgets and queries interleaved
across threads and processes."""

from __future__ import annotations

import multiprocessing
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gravity_core.embeddings import HashingEmbedder, default_embedder
from gravity_core.errors import AnchorStoreError, ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.schema import Utterance
from gravity_core.serving.users import UserKBs, check_user_id
from gravity_core.storage.store import AnchorStore

START = datetime(2024, 3, 1, 18, 0, tzinfo=UTC)
MARK = re.compile(r"quokka\d+|Wombat\d+")


def user_chat(n: int, session: int = 1) -> list[Utterance]:
    """A short chat of user ``n``: every turn names words no other user's chat holds."""
    lines = [
        ("Ana", f"I adopted a dog named Wombat{n} last week and we walked to the quokka{n} park."),
        ("Ben", f"Wombat{n} sounds lovely! Did you take him to the quokka{n} lake too?"),
        ("Ana", f"Yes, yesterday Wombat{n} swam in the quokka{n} lake for an hour."),
        ("Ben", f"I went hiking near quokka{n} ridge with my sister on Saturday."),
    ]
    return [
        Utterance(
            id=f"s{session}:{i}",
            speaker=speaker,
            text=text,
            session=f"session_{session}",
            timestamp=START + timedelta(days=7 * session, minutes=i),
        )
        for i, (speaker, text) in enumerate(lines, start=1)
    ]


def marks_of_others(texts: list[str], n: int) -> set[str]:
    own = {f"quokka{n}", f"Wombat{n}"}
    return {m for text in texts for m in MARK.findall(text)} - own


@pytest.fixture
def kbs(tmp_path: Path, nlp: Any) -> UserKBs:
    return UserKBs(tmp_path / "users", embedder=default_embedder(), extractor=offline(nlp), max_engines=3)


def offline(nlp: Any) -> Any:
    from gravity_core.extract.offline import OfflineExtractor

    return lambda embedder, store: OfflineExtractor(embedder, pipeline=nlp)


@pytest.mark.parametrize(
    "bad",
    ["", ".", "..", "../alice", "a/b", "a\\b", ".hidden", "x" * 129, "a\x00b", "ana bel", "ümit", 7, None],
)
def test_ids_that_cannot_name_a_folder_are_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="user id|must be a string"):
        check_user_id(bad)


def test_ids_that_can_are_kept_as_given() -> None:
    for good in ("alice", "u-17", "Team_42", "a.b@example.com", "x" * 128, "sha256=ab12"):
        assert check_user_id(good) == good


def test_each_user_queries_only_their_own_kb(kbs: UserKBs) -> None:
    for n in (1, 2):
        kbs.add(f"user{n}", user_chat(n))
    assert kbs.users() == ["user1", "user2"]
    for n in (1, 2):
        context = kbs.query(f"user{n}", "When did Ana adopt a dog?")
        assert f"Wombat{n}" in context.text
        assert marks_of_others([context.text, *context.expansions], n) == set()
    assert (kbs.root / "user1" / "manifest.json").is_file()


def test_a_user_without_a_kb_gets_no_anchors_and_no_error(kbs: UserKBs) -> None:
    context = kbs.query("newcomer", "When did Ana adopt a dog?")
    assert (context.anchors, context.expansions, context.text) == ([], [], "")
    assert kbs.users() == []  # asking built nothing
    kbs.add("newcomer", user_chat(5))
    assert "Wombat5" in kbs.query("newcomer", "When did Ana adopt a dog?").text


def test_engines_stay_loaded_for_the_most_recent_users_only(kbs: UserKBs) -> None:
    for n in range(1, 5):
        kbs.add(f"user{n}", user_chat(n))
    for n in (1, 2, 3, 1, 4):
        kbs.engine(f"user{n}")
    assert kbs.loaded() == ["user3", "user1", "user4"]


def test_an_engine_follows_its_users_later_builds_and_forgets(kbs: UserKBs) -> None:
    kbs.add("ana", user_chat(1))
    before = kbs.query("ana", "Who went hiking with his sister near the ridge?").text
    assert "quokka1" in before
    kbs.add("ana", user_chat(9, session=2))
    assert "quokka9" in kbs.query("ana", "Who went hiking with his sister near the ridge?").text
    report = kbs.forget("ana", sessions=["session_1"])
    assert report.forgotten == 4
    after = kbs.query("ana", "Who went hiking with his sister near the ridge?")
    assert "quokka1" not in after.text + " ".join(after.expansions)


def test_forgetting_a_user_who_has_no_kb_is_refused(kbs: UserKBs) -> None:
    with pytest.raises(ConfigurationError, match="has no KB"):
        kbs.forget("ghost", sessions=["session_1"])


def test_deleting_a_user_removes_their_folder_and_engine(kbs: UserKBs) -> None:
    kbs.add("ana", user_chat(1))
    kbs.add("ben", user_chat(2))
    kbs.engine("ana")
    assert kbs.delete("ana") is True
    assert not (kbs.root / "ana").exists()
    assert kbs.users() == ["ben"] and "ana" not in kbs.loaded()
    assert kbs.query("ana", "When did Ana adopt a dog?").text == ""
    assert kbs.delete("ana") is False


def test_a_second_build_of_one_user_waits_its_turn_not_another_users(kbs: UserKBs) -> None:
    kbs.add("ana", user_chat(1))
    with AnchorStore(kbs.folder("ana")).writer():
        with pytest.raises(AnchorStoreError):
            kbs.add("ana", user_chat(1, session=2))
        kbs.add("ben", user_chat(2))  # another user's folder, another lock
    assert kbs.users() == ["ana", "ben"]


# -- many users, threads and processes ---------------------------------------------------------

USERS = 50
# The many-user tests route, they do not rank: the hashing embedder (fast) with no relevance floor
# puts every user's context at its fullest (any anchor passes), the hardest case for isolation.
MANY: dict[str, Any] = {"embedder": HashingEmbedder(dim=64), "config": QueryConfig(relevance_floor=0.0)}
QUESTIONS = ("When did Ana adopt a dog?", "Who went hiking with his sister near the ridge?")


def _work(kbs: UserKBs, n: int, rounds: int = 2) -> list[str]:
    """Build, query, forget and query again as user ``n``; the other users' marks it saw."""
    user = f"user{n}"
    leaked: list[str] = []
    for session in range(1, rounds + 1):
        kbs.add(user, user_chat(n, session))
        context = kbs.query(user, QUESTIONS[session % 2])
        own = (f"quokka{n}", f"Wombat{n}")
        assert any(m in context.text for m in own), f"{user} got none of their own anchors"  # not vacuous
        leaked += marks_of_others([context.text, *context.expansions], n)
    kbs.forget(user, sessions=["session_1"])
    context = kbs.query(user, "When did Ana adopt a dog?")
    leaked += marks_of_others([context.text, *context.expansions], n)
    return leaked


def _process_work(root: str, users: list[int]) -> list[str]:
    kbs = UserKBs(root, max_engines=4, **MANY)  # the offline extractor, loaded in this process
    leaked: list[str] = []
    for n in users:
        leaked += _work(kbs, n)
    # Then query users the other process and the threads built.
    for n in range(USERS):
        if (Path(root) / f"user{n}" / "manifest.json").is_file():
            context = kbs.query(f"user{n}", "When did Ana adopt a dog?")
            leaked += marks_of_others([context.text, *context.expansions], n)
    return leaked


def test_fifty_users_in_threads_and_processes_never_see_each_others_memories(
    tmp_path: Path, nlp: Any
) -> None:
    root = tmp_path / "users"
    kbs = UserKBs(root, extractor=offline(nlp), max_engines=8, **MANY)
    in_processes = [list(range(40, 45)), list(range(45, 50))]
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        pending = [pool.apply_async(_process_work, (str(root), users)) for users in in_processes]
        with ThreadPoolExecutor(max_workers=4) as threads:
            leaked = [m for found in threads.map(lambda n: _work(kbs, n), range(40)) for m in found]
        for result in pending:
            leaked += result.get(timeout=600)
    assert leaked == []
    assert kbs.users() == sorted(f"user{n}" for n in range(USERS))
    for n in range(USERS):
        kb = AnchorStore(root / f"user{n}").load().kb
        assert {u.session for u in kb.utterances.values()} == {"session_2"}
        assert marks_of_others([u.text for u in kb.utterances.values()], n) == set()


# -- Chroma collections per user --------------------------------------------------------------


def _chroma_isolation(kbs: UserKBs, client: Any) -> None:
    """50 users from 4 threads; then each user's collections hold exactly that user's anchors."""
    from gravity_core.query.index import ChromaAnchorIndex
    from gravity_core.schema import AnchorKind

    with ThreadPoolExecutor(max_workers=4) as threads:
        leaked = [m for found in threads.map(lambda n: _work(kbs, n), range(USERS)) for m in found]
    assert leaked == []
    for n in range(USERS):
        user = f"user{n}"
        vectors = AnchorStore(kbs.folder(user)).load().vectors
        index = ChromaAnchorIndex.from_client(client, kb_name=f"user-{user}")
        for kind in AnchorKind:
            stored = index.similarities(kind, vectors.get(kind).matrix[:1], vectors.get(kind).ids)
            assert set(stored) == set(vectors.get(kind).ids), (user, kind)
            assert index.count(kind) == len(vectors.get(kind).ids), (user, kind)


def chroma_users(root: Path, nlp: Any, client: Any) -> UserKBs:
    from gravity_core.query.index import ChromaAnchorIndex

    return UserKBs(
        root,
        extractor=offline(nlp),
        **MANY,
        index=lambda user: ChromaAnchorIndex.from_client(client, kb_name=f"user-{user}"),
        max_engines=8,
    )


def test_fifty_users_on_embedded_chroma_never_see_each_others_memories(tmp_path: Path, nlp: Any) -> None:
    chromadb = pytest.importorskip("chromadb")
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    _chroma_isolation(chroma_users(tmp_path / "users", nlp, client), client)


def test_deleting_a_user_drops_their_chroma_collections_only(tmp_path: Path, nlp: Any) -> None:
    chromadb = pytest.importorskip("chromadb")
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    kbs = chroma_users(tmp_path / "users", nlp, client)
    for n in (1, 2):
        kbs.add(f"user{n}", user_chat(n))
        kbs.query(f"user{n}", QUESTIONS[0])  # the engine syncs the user's collections
    names = {c.name for c in client.list_collections()}
    assert any("user1" in name for name in names) and any("user2" in name for name in names)
    kbs.delete("user1")
    left = {c.name for c in client.list_collections()}
    assert not any("user1" in name for name in left)
    assert {name for name in names if "user2" in name} <= left
    assert "Wombat2" in kbs.query("user2", QUESTIONS[0]).text


@pytest.mark.server
def test_fifty_users_on_a_chroma_server_never_see_each_others_memories(
    tmp_path: Path, nlp: Any, chroma_server: tuple[str, int]
) -> None:
    chromadb = pytest.importorskip("chromadb")
    host, port = chroma_server
    client = chromadb.HttpClient(host=host, port=port)
    _chroma_isolation(chroma_users(tmp_path / "users", nlp, client), client)
