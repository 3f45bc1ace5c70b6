"""Fixtures of the MCP server tests: the sample KB (a copy a test may write) and a root of two users.

Everything is built offline, with the offline extractor and the hashing embedder (the server finds
the embedder the KB names, so a spawned server needs no model either).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.schema import Utterance
from gravity_core.serving.users import UserKBs

#: The sessions of the sample conversation each user of the users root holds.
USER_SESSIONS = {"ana": ("session_1", "session_2"), "ben": ("session_5", "session_6")}


@pytest.fixture
def kb_dir(sample_kb_dir: Path, tmp_path: Path) -> Path:
    """A copy of the sample KB folder, the test's own (``remember`` writes to it)."""
    return Path(shutil.copytree(sample_kb_dir, tmp_path / "kb"))


@pytest.fixture(scope="session")
def built_users_root(
    tmp_path_factory: pytest.TempPathFactory, sample_utterances: list[Utterance], nlp: Any
) -> Path:
    """A users root: "ana" holds sessions 1-2 of the sample conversation, "ben" sessions 5-6."""
    root = tmp_path_factory.mktemp("users") / "root"
    users = UserKBs(
        root,
        embedder=HashingEmbedder(),
        extractor=lambda embedder, _: OfflineExtractor(embedder, pipeline=nlp),
    )
    for user, sessions in USER_SESSIONS.items():
        users.add(user, [u for u in sample_utterances if u.session in sessions])
    return root


@pytest.fixture
def users_root(built_users_root: Path, tmp_path: Path) -> Path:
    """A copy of the users root, the test's own."""
    return Path(shutil.copytree(built_users_root, tmp_path / "users"))
