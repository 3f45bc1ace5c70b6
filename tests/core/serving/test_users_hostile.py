"""Hostile users of ``UserKBs``: a deleted user's KB served by another process, ids that end in a
newline, and ids that differ only by case (one folder on macOS and Windows).

A deleted user's KB must never be served again, by any process: an engine that follows the
folder serves nothing once it is gone, and the id given to someone new starts empty. Ids are
matched in full, and a root never holds two ids that differ only by case.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from gravity_core.cli import main
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError
from gravity_core.loaders import load_conversation
from gravity_core.query.config import QueryConfig
from gravity_core.schema import Utterance
from gravity_core.serving.many_users import ManyUsersSettings, UserConversation, build_users
from gravity_core.serving.users import UserKBs, check_user_id
from tests.core.serving.test_users import user_chat

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sample_conversation.jsonl"
# The deleted user's conversation (the example) names these; the new user's never does.
OLD = re.compile(r"Maya|Jonas|Northwind|Fernleaf|Bristol|Leeds")
NEW = re.compile(r"quokka\d+|Wombat\d+")
# Routing, not ranking: no relevance floor, so a context holds every anchor that matches at all.
FAST: dict[str, Any] = {"embedder": HashingEmbedder(dim=64), "config": QueryConfig(relevance_floor=0.0)}
QUESTIONS = ("Where does Maya work?", "Who adopted a dog and where did they walk?")


def old_turns() -> list[Utterance]:
    return load_conversation(EXAMPLE)[:30]


def new_turns(n: int, session: int = 1) -> list[Utterance]:
    """Someone new: every turn names words (``quokka<n>``, ``Wombat<n>``) the example never does."""
    return user_chat(n, session)


def offline(nlp: Any) -> Any:
    from gravity_core.extract.offline import OfflineExtractor

    return lambda embedder, store: OfflineExtractor(embedder, pipeline=nlp)


def writer(root: Path, nlp: Any) -> UserKBs:
    return UserKBs(root, extractor=offline(nlp), **FAST)


def seen(users: UserKBs, user: str) -> str:
    """Everything the user's contexts hold (text and expansions) for all the questions."""
    contexts = [users.query(user, question) for question in QUESTIONS]
    return "\n".join(part for c in contexts for part in (c.text, *c.expansions) if part)


# -- a deleted user's KB, queried by another process -----------------------------------------------


def _reader(root: str, conn: Connection) -> None:
    """Another process: a UserKBs that answers queries until it gets ``None``."""
    users = UserKBs(root, **FAST)
    while (user := conn.recv()) is not None:
        conn.send((seen(users, user), users.loaded()))


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Any]:
    """Queries of user ids, answered by a spawned process that keeps its engines loaded."""
    context = multiprocessing.get_context("spawn")
    mine, theirs = context.Pipe()
    process = context.Process(target=_reader, args=(str(tmp_path / "users"), theirs), daemon=True)
    process.start()

    def ask(user: str) -> tuple[str, list[str]]:
        mine.send(user)
        if not mine.poll(120):
            raise AssertionError("the reader process did not answer")
        answer: tuple[str, list[str]] = mine.recv()
        return answer

    yield ask
    mine.send(None)
    process.join(30)
    if process.is_alive():
        process.kill()


def test_a_user_deleted_in_one_process_is_served_no_more_by_another(
    tmp_path: Path, nlp: Any, reader: Any
) -> None:
    users = writer(tmp_path / "users", nlp)
    users.add("u", old_turns())
    text, loaded = reader("u")
    assert OLD.search(text) and loaded == ["u"]  # the other process has u's engine loaded

    assert users.delete("u") is True
    text, _ = reader("u")
    assert OLD.search(text) is None, "the deleted user's anchors were served by the other process"

    users.add("u", new_turns(1))  # the id given to someone new
    text, _ = reader("u")
    assert NEW.search(text) and OLD.search(text) is None

    # Deleted and given to someone else again before the other process asks: its engine (loaded
    # again at its last query) serves the newest KB only.
    _, loaded = reader("u")
    assert loaded == ["u"]
    users.delete("u")
    users.add("u", new_turns(2))
    text, _ = reader("u")
    assert set(NEW.findall(text)) <= {"quokka2", "Wombat2"} and NEW.search(text) and OLD.search(text) is None


# -- the same in one process: another UserKBs over the root (a second service, a worker thread) --


def test_a_reused_id_starts_empty_for_every_userkbs_of_the_root(tmp_path: Path, nlp: Any) -> None:
    users = writer(tmp_path / "users", nlp)
    other = UserKBs(tmp_path / "users", **FAST)
    users.add("u", old_turns())
    assert OLD.search(seen(other, "u"))
    users.delete("u")
    assert seen(other, "u") == "" and seen(users, "u") == ""
    users.add("u", new_turns(1))
    for kbs in (users, other):
        text = seen(kbs, "u")
        assert NEW.search(text) and OLD.search(text) is None


def test_a_reused_id_whose_new_kb_cannot_be_read_serves_nothing_not_the_old_one(
    tmp_path: Path, nlp: Any
) -> None:
    users = writer(tmp_path / "users", nlp)
    other = UserKBs(tmp_path / "users", **FAST)
    users.add("u", old_turns())
    other.engine("u")  # loaded, following the folder
    users.delete("u")
    users.add("u", new_turns(1))
    damaged = users.folder("u") / "g000001" / "entities.json"
    damaged.write_bytes(damaged.read_bytes() + b" ")  # still JSON; its digest no longer matches
    context = other.query("u", QUESTIONS[0])
    assert (context.anchors, context.text) == ([], "")


def test_a_folder_deleted_by_hand_is_served_no_more(tmp_path: Path, nlp: Any) -> None:
    import shutil

    users = writer(tmp_path / "users", nlp)
    users.add("u", old_turns())
    engine = users.engine("u")
    assert OLD.search(seen(users, "u"))
    shutil.rmtree(users.folder("u"))
    assert seen(users, "u") == "" and engine.generation is None
    assert "u" not in users.loaded()  # an engine that serves nothing is dropped


# -- ids that end in a newline -----------------------------------------------------------------

NEWLINE_IDS = ["u1\n", "a" * 128 + "\n", "alice\n", "u-17.x\n", "sha256=ab12\n"]


@pytest.mark.parametrize("bad", NEWLINE_IDS)
def test_an_id_ending_in_a_newline_is_refused(bad: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot name a folder"):
        check_user_id(bad)
    users = UserKBs(tmp_path / "users", **FAST)
    with pytest.raises(ConfigurationError, match="cannot name a folder"):
        users.add(bad, new_turns(1))
    for call in (users.engine, users.delete, users.folder):
        with pytest.raises(ConfigurationError, match="cannot name a folder"):
            call(bad)
    assert not (tmp_path / "users").exists() or list((tmp_path / "users").iterdir()) == []


def test_build_users_refuses_ids_ending_in_a_newline(tmp_path: Path) -> None:
    turns = tuple(new_turns(1))
    results = build_users(
        [UserConversation(bad, turns) for bad in NEWLINE_IDS],
        tmp_path / "root",
        settings=ManyUsersSettings(embedder="hashing:64"),
    )
    assert all("cannot name a folder" in (r.error or "") for r in results)
    assert not (tmp_path / "root").exists() or list((tmp_path / "root").iterdir()) == []


def _jsonl(path: Path, users: dict[str, list[Utterance]]) -> Path:
    lines = [
        json.dumps({"user_id": user, "utterances": [json.loads(u.model_dump_json()) for u in turns]})
        for user, turns in users.items()
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _cli(source: Path, root: Path, report: Path, *, quiet: bool = True) -> dict[str, dict[str, Any]]:
    argv = ["build-users", str(source), str(root), "--workers", "1"]
    argv += ["--embedder", "hashing:64", "--report", str(report), *(["--quiet"] if quiet else [])]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 1
    return {r["user_id"]: r for r in json.loads(report.read_text(encoding="utf-8"))}


def test_both_build_users_inputs_refuse_ids_ending_in_a_newline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A JSON Lines file of users, and a folder of one file per user (the file name is the id).
    source = _jsonl(
        tmp_path / "users.jsonl", {"u1\n": new_turns(1), "a" * 128 + "\n": new_turns(2), "ok": new_turns(3)}
    )
    folder = tmp_path / "conversations"
    folder.mkdir()
    for name, n in (("u1\n", 1), ("ok", 3)):
        (folder / f"{name}.jsonl").write_text("".join(u.model_dump_json() + "\n" for u in new_turns(n)))
    for given, root in ((source, tmp_path / "root-jsonl"), (folder, tmp_path / "root-folder")):
        results = _cli(given, root, tmp_path / f"{root.name}.json", quiet=False)
        assert results["ok"]["error"] is None
        refused = {user for user, r in results.items() if "cannot name a folder" in (r["error"] or "")}
        assert refused == set(results) - {"ok"} and "u1\n" in refused
        assert sorted(p.name for p in root.iterdir()) == ["ok"]
    summary = capsys.readouterr().err
    assert "'u1\\n'" in summary  # the refused id is shown quoted, on one line


# -- ids that differ only by case ---------------------------------------------------------------


def test_an_id_that_differs_only_by_case_from_a_users_is_refused(tmp_path: Path, nlp: Any) -> None:
    users = writer(tmp_path / "users", nlp)
    users.add("Alice", new_turns(1))
    for twin in ("alice", "ALICE", "aLiCe"):
        with pytest.raises(
            ConfigurationError, match=r"'(alice|ALICE|aLiCe)' differs only by case from user 'Alice'"
        ):
            users.add(twin, new_turns(2))
    assert sorted(p.name for p in users.root.iterdir()) == ["Alice"]
    assert users.users() == ["Alice"]
    users.add("Alice", new_turns(3, session=2))  # the user's own id, as given, goes on
    assert users.delete("Alice") and users.users() == []
    users.add("alice", new_turns(2))  # once Alice is gone, the id is free
    assert users.users() == ["alice"]


def _make_at_once(users: UserKBs, ids: tuple[str, ...]) -> list[str]:
    """Make the users' folders from one thread each, all at once; the ids refused."""
    barrier = threading.Barrier(len(ids))
    refused: list[str] = []

    def make(user: str) -> None:
        barrier.wait()
        try:
            users.builder(user)
        except ConfigurationError:
            refused.append(user)

    threads = [threading.Thread(target=make, args=(user,)) for user in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return refused


def test_two_threads_making_case_twins_at_once_leave_at_most_one(tmp_path: Path, nlp: Any) -> None:
    for round_ in range(30):
        users = UserKBs(tmp_path / f"users{round_}", extractor=offline(nlp), **FAST)
        refused = _make_at_once(users, ("Bob", "bob"))
        folders = sorted(p.name for p in users.root.iterdir())
        assert len(folders) <= 1 and len(refused) >= 1, (round_, folders, refused)
        assert set(folders).isdisjoint(refused)


def test_on_a_case_insensitive_disk_a_twin_id_never_reaches_the_others_kb(
    tmp_path: Path, nlp: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # macOS and Windows, emulated: every spelling of 'bo' is a link to the folder 'Bo', and a
    # listing shows the folder's real name only.
    users = writer(tmp_path / "users", nlp)
    users.add("Bo", old_turns())
    for spelling in ("bo", "bO", "BO"):
        (users.root / spelling).symlink_to("Bo", target_is_directory=True)
    listdir = os.listdir

    def real_names(path: Any) -> list[str]:
        return [name for name in listdir(path) if not os.path.islink(os.path.join(path, name))]

    monkeypatch.setattr(os, "listdir", real_names)
    assert OLD.search(seen(users, "Bo"))
    for call in (
        lambda: users.query("bo", QUESTIONS[0]),
        lambda: users.delete("bo"),
        lambda: users.forget("bo", sessions=["session_1"]),
        lambda: users.add("bo", new_turns(1)),
    ):
        with pytest.raises(ConfigurationError, match="'bo' differs only by case from user 'Bo'"):
            call()
    assert OLD.search(seen(users, "Bo"))  # Bo's KB is whole


def test_build_users_refuses_ids_of_one_input_that_differ_only_by_case(tmp_path: Path) -> None:
    turns = tuple(new_turns(1))
    root = tmp_path / "root"
    results = build_users(
        [
            UserConversation("Alice", turns),
            UserConversation("alice", turns),
            UserConversation("Carol", turns),
        ],
        root,
        settings=ManyUsersSettings(embedder="hashing:64"),
    )
    assert [r.ok for r in results] == [True, False, True]
    assert "'alice' differs only by case from user 'Alice' earlier in the input" in (results[1].error or "")
    # A later run: an id that differs only by case from a user already under the root.
    again = build_users(
        [UserConversation("CAROL", turns)], root, settings=ManyUsersSettings(embedder="hashing:64")
    )
    assert "'CAROL' differs only by case from user 'Carol'" in (again[0].error or "")
    assert sorted(p.name for p in root.iterdir()) == ["Alice", "Carol"]


def test_the_cli_refuses_ids_of_one_input_that_differ_only_by_case(tmp_path: Path) -> None:
    source = _jsonl(tmp_path / "users.jsonl", {"Alice": new_turns(1), "alice": new_turns(2)})
    results = _cli(source, tmp_path / "root", tmp_path / "report.json")
    assert results["Alice"]["error"] is None
    assert "differs only by case from user 'Alice'" in results["alice"]["error"]
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == ["Alice"]
