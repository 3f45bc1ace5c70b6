"""Many users' KBs built as independent tasks: a process pool, Dask on a LocalCluster, the CLI.

Every KB built by a worker must equal the one ``UserKBs.add`` builds in this process; a bad
conversation, a bad id or a dead worker fails its own users and no other.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from benchmarks.conversation import synthetic_conversation
from gravity_core.cli import main
from gravity_core.embeddings import HashingEmbedder
from gravity_core.errors import ConfigurationError, InputDataError
from gravity_core.schema import Utterance
from gravity_core.serving.many_users import (
    ManyUsersSettings,
    UserConversation,
    build_users,
    conversations_in,
    peak_rss_mb,
)
from gravity_core.serving.users import UserKBs
from gravity_core.storage.store import AnchorStore

SETTINGS = ManyUsersSettings(embedder="hashing:64", chunk_size=2)


def chats(n: int) -> list[UserConversation]:
    return [UserConversation(f"user-{i}", tuple(synthetic_conversation(24, seed=i))) for i in range(n)]


def spawned(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def assert_built_as_in_process(root: Path, users: list[UserConversation], nlp: Any, tmp_path: Path) -> None:
    """Each user's KB under ``root`` is the KB ``UserKBs.add`` makes here from the same turns."""
    here = UserKBs(tmp_path / "here", embedder=HashingEmbedder(dim=64))
    for user in users:
        here.add(user.user_id, user.load())
        assert AnchorStore(root / user.user_id).load().kb.to_dict() == (
            AnchorStore(here.folder(user.user_id)).load().kb.to_dict()
        ), user.user_id


def test_a_process_pool_builds_each_users_kb_and_reports_the_bad_ones(nlp: Any, tmp_path: Path) -> None:
    good = chats(4)
    broken = UserConversation("user-broken", path=str(tmp_path / "missing.jsonl"))
    users = [*good[:2], UserConversation("../escape"), broken, *good[2:], UserConversation("user-0")]
    with spawned(2) as pool:
        results = build_users(users, tmp_path / "root", executor=pool, settings=SETTINGS)
    assert [r.user_id for r in results] == [u.user_id for u in users]
    by_id = {(r.user_id, r.ok): r for r in results}
    assert all(by_id[(u.user_id, True)].added == 24 for u in good)
    assert len({r.worker for r in results if r.ok}) == 2, "both workers built users"
    assert all(r.worker_peak_rss_mb > 0 for r in results if r.ok)
    assert "cannot name a folder" in (by_id[("../escape", False)].error or "")
    assert "missing.jsonl" in (by_id[("user-broken", False)].error or "")
    assert "appears more than once" in (results[-1].error or "")
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == sorted(u.user_id for u in good)
    assert_built_as_in_process(tmp_path / "root", good, nlp, tmp_path)


class DyingConversation(UserConversation):
    """A conversation whose loading kills the worker process (a crash, an OOM kill)."""

    def load(self) -> list[Utterance]:
        os._exit(1)


def test_a_dead_worker_fails_the_users_of_its_task_only(tmp_path: Path) -> None:
    users = [*chats(2), DyingConversation("user-dies")]
    with spawned(1) as pool:
        results = build_users(users, tmp_path / "root", executor=pool, settings=SETTINGS)
    # user-0 and user-1 are one task, done before the dying one starts in the only worker
    assert [r.ok for r in results] == [True, True, False]
    assert "BrokenProcessPool" in (results[2].error or "")


@pytest.fixture(scope="module")
def dask_cluster() -> Iterator[Any]:
    """Two Dask worker processes on 127.0.0.1."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        yield cluster


@pytest.mark.loopback
def test_dask_on_a_local_cluster_builds_the_same_kbs(nlp: Any, tmp_path: Path, dask_cluster: Any) -> None:
    from distributed import Client

    users = chats(4)
    with Client(dask_cluster) as client:
        results = build_users(users, tmp_path / "root", executor=client.get_executor(), settings=SETTINGS)
    assert all(r.ok for r in results), [r.error for r in results]
    assert len({r.worker for r in results}) == 2
    assert_built_as_in_process(tmp_path / "root", users, nlp, tmp_path)


@pytest.mark.loopback
def test_the_cli_builds_on_a_dask_scheduler(
    tmp_path: Path, dask_cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "users.jsonl"
    lines = [
        {
            "user_id": f"user-{i}",
            "utterances": [json.loads(u.model_dump_json()) for u in synthetic_conversation(10, seed=i)],
        }
        for i in range(3)
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    argv = ["build-users", str(source), str(tmp_path / "root"), "--scheduler", dask_cluster.scheduler_address]
    main([*argv, "--embedder", "hashing:64"])  # returns: every user built
    assert "3 user(s) built (+30 utterances) by 2 worker process(es)" in " ".join(
        capsys.readouterr().err.split()
    )
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == ["user-0", "user-1", "user-2"]
    with pytest.raises(SystemExit) as refused:
        main([*argv, "--workers", "2"])
    assert refused.value.code == 1
    assert "--workers is for the local process pool" in capsys.readouterr().err


def test_the_commands_settings_share_this_machines_cores_among_local_workers() -> None:
    cores = os.cpu_count() or 1
    local = ManyUsersSettings.for_workers(16, 2, local=True)
    assert (local.chunk_size, local.threads_per_worker) == (8, max(1, cores // 2))
    few = ManyUsersSettings.for_workers(3, 2, local=False, chunk_size=4)
    assert (few.chunk_size, few.threads_per_worker) == (2, None)
    assert ManyUsersSettings.for_workers(3, 8, local=True).threads_per_worker == max(1, cores // 8)
    with pytest.raises(ConfigurationError, match="threads_per_worker"):
        ManyUsersSettings(threads_per_worker=0)


def test_without_an_executor_the_users_are_built_here_in_order(nlp: Any, tmp_path: Path) -> None:
    users = chats(3)
    seen: list[tuple[int, int]] = []
    results = build_users(
        users, tmp_path / "root", settings=SETTINGS, progress=lambda d, n: seen.append((d, n))
    )
    assert [r.user_id for r in results] == ["user-0", "user-1", "user-2"]
    assert {r.worker for r in results} == {results[0].worker}
    assert seen == [(0, 3), (2, 3), (3, 3)]
    assert_built_as_in_process(tmp_path / "root", users, nlp, tmp_path)


def test_a_jsonl_of_conversations_reads_one_user_a_line_and_names_bad_lines(tmp_path: Path) -> None:
    turns = [json.loads(u.model_dump_json()) for u in synthetic_conversation(3)]
    lines = [
        {"user_id": "anna", "utterances": turns},
        {"utterances": turns},
        {"user_id": "bob", "utterances": [{**turns[0], "timestamp": None}]},
    ]
    source = tmp_path / "users.jsonl"
    source.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    anna, nameless, bob = conversations_in(source)
    assert anna.user_id == "anna" and [u.id for u in anna.load()] == [t["id"] for t in turns]
    assert "line 2" in (nameless.problem or "") and "'user_id'" in (nameless.problem or "")
    with pytest.raises(InputDataError, match=r"users.jsonl line 3, user bob.*timestamp"):
        bob.load()
    results = build_users([nameless, bob], tmp_path / "root", settings=SETTINGS)
    assert [r.ok for r in results] == [False, False]
    assert "timestamp" in (results[1].error or "")


def test_the_cli_builds_a_folder_of_conversations_and_lists_the_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "conversations"
    folder.mkdir()
    for i in range(3):
        turns = synthetic_conversation(12, seed=i)
        (folder / f"user-{i}.jsonl").write_text("".join(u.model_dump_json() + "\n" for u in turns))
    (folder / "user-bad.json").write_text('[{"speaker": "A", "text": "hi", "session": "s1"}]')
    (folder / "notes.txt").write_text("not a conversation")
    report = tmp_path / "report.json"
    argv = ["build-users", str(folder), str(tmp_path / "root"), "--workers", "2"]
    argv += ["--embedder", "hashing:64", "--report", str(report), "--quiet"]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 1
    results = {r["user_id"]: r for r in json.loads(report.read_text())}
    assert sorted(results) == ["user-0", "user-1", "user-2", "user-bad"]
    assert all(results[f"user-{i}"]["added"] == 12 for i in range(3))
    assert "field 'timestamp'" in results["user-bad"]["error"]
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == ["user-0", "user-1", "user-2"]
    capsys.readouterr()


def test_a_spawned_workers_peak_memory_is_its_own_not_its_parents() -> None:
    # Linux keeps ru_maxrss across exec: a worker spawned by a big parent reported the parent's size.
    held = bytearray(400 * 2**20)
    held[::4096] = b"x" * len(held[::4096])  # touch every page
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        worker_peak = pool.submit(peak_rss_mb).result()
    assert 0 < worker_peak < 300, worker_peak
    assert peak_rss_mb() >= 400
