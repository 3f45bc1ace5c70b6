"""What an MCP server serves: one KB folder, or a root folder of users' KBs.

Both give the :class:`~gravity_core.serving.memory_tools.MemoryTools` that answer a tool call and
add remembered utterances to the KB, where the engine that serves the tools sees them at its next
call (it follows its folder). Nothing here imports ``mcp``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from gravity_core.build.builder import AnchorBuilder, BuildReport
from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError
from gravity_core.extract.choice import make_extractor
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.schema import Utterance
from gravity_core.serving.memory_tools import DEFAULT_TOOL_BUDGET, MemoryTools, UserMemoryTools
from gravity_core.serving.users import UserKBs, check_user_id
from gravity_core.storage.store import AnchorStore

__all__ = ["MemorySource", "SingleKB", "UserRoot"]

logger = logging.getLogger(__name__)


class MemorySource(Protocol):
    """The KB or KBs a server answers from.

    ``per_user`` sources need a user id in every call; the others take ``None``.
    """

    @property
    def per_user(self) -> bool:
        """Whether every call names a user."""
        ...

    def memory(self, user_id: str | None) -> MemoryTools:
        """The tools over the KB that serves the call."""
        ...

    def remember(self, user_id: str | None, utterances: Sequence[Utterance]) -> BuildReport:
        """Build the utterances into the KB that serves the call."""
        ...


class SingleKB:
    """One KB folder written by ``gravity build``, served by an engine that follows the folder.

    Remembered utterances are built into the folder with the offline extractor over the KB's own
    embedder (one builder, kept between calls: it reads the folder again when another process
    changed it).

    Args:
        kb_dir: the KB folder.
        embedder: the KB's embedder (default: the one the KB names, ``minilm-...`` or ``hashing-N``).
        token_budget: the most tokens one tool answer takes.
        config: the query settings of the tools (default: the engine's).

    Raises:
        ConfigurationError: ``kb_dir`` is not a folder, or holds no KB.
        AnchorStoreError: the KB does not load.
    """

    per_user = False

    def __init__(
        self,
        kb_dir: str | os.PathLike[str],
        *,
        embedder: Embedder | None = None,
        token_budget: int = DEFAULT_TOOL_BUDGET,
        config: QueryConfig | None = None,
    ) -> None:
        folder = Path(kb_dir)
        if not folder.is_dir():
            raise ConfigurationError(
                f"{folder}: there is no such folder; give a KB folder written by 'gravity build'"
            )
        if not AnchorStore(folder).exists():
            raise ConfigurationError(
                f"{folder}: holds no KB; build one first with 'gravity build CONVERSATION -o {folder}'"
            )
        self.kb_dir = folder
        self.engine = GravityEngine.from_dir(folder, embedder=embedder)
        self.tools = MemoryTools(self.engine, token_budget=token_budget, config=config)
        self._builder: AnchorBuilder | None = None
        self._lock = threading.Lock()

    def memory(self, user_id: str | None) -> MemoryTools:
        """The tools over the KB (``user_id`` must be ``None``)."""
        _no_user(user_id)
        return self.tools

    def remember(self, user_id: str | None, utterances: Sequence[Utterance]) -> BuildReport:
        """Build the new utterances into the KB folder (those it holds already are skipped).

        Raises:
            InputDataError: an utterance has the id of another one in the KB.
            AnchorStoreError: another build holds the folder's writer lock.
        """
        _no_user(user_id)
        with self._lock:
            if self._builder is None:
                store = AnchorStore(self.kb_dir)
                embedder = self.engine.embedder
                extractor = make_extractor(embedder, cache_dir=store.cache_dir)
                self._builder = AnchorBuilder(extractor, embedder, store=store)
            try:
                report = self._builder.add(utterances)
            except BaseException:
                self._builder = None  # the next call starts from what the folder holds
                raise
        logger.info("KB %s: +%d utterances remembered", self.kb_dir, report.added)
        return report


class UserRoot:
    """A root folder of users' KBs (:class:`~gravity_core.serving.users.UserKBs`): every call names its user.

    A user who has no KB under the root is refused by the read-only tools; remembering for a new
    user starts the user's KB.

    Args:
        root: the folder holding the users' KB folders (as ``gravity build-users`` writes them).
        embedder: the embedder of every user's KB (default: the offline MiniLM).
        token_budget: the most tokens one tool answer takes.
        config: the query settings of the tools (default: the engines').
        max_engines: users' engines kept loaded at most.

    Raises:
        ConfigurationError: ``root`` is not a folder.
    """

    per_user = True

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        embedder: Embedder | None = None,
        token_budget: int = DEFAULT_TOOL_BUDGET,
        config: QueryConfig | None = None,
        max_engines: int = 64,
    ) -> None:
        folder = Path(root)
        if not folder.is_dir():
            raise ConfigurationError(
                f"{folder}: there is no such folder; give the root folder of the users' KBs "
                "(as 'gravity build-users' writes it)"
            )
        self.users = UserKBs(folder, embedder=embedder, max_engines=max_engines)
        self.tools = UserMemoryTools(self.users, token_budget=token_budget, config=config)

    def memory(self, user_id: str | None) -> MemoryTools:
        """The tools over the user's KB.

        Raises:
            ConfigurationError: the id cannot name a user, or the user has no KB under the root.
        """
        user = check_user_id(user_id)
        if not AnchorStore(self.users.folder(user)).exists():
            raise ConfigurationError(f"user {user!r} has no memory here (no KB of that user)")
        return self.tools.for_user(user)

    def remember(self, user_id: str | None, utterances: Sequence[Utterance]) -> BuildReport:
        """Build the new utterances into the user's KB (started if the user has none).

        Raises:
            ConfigurationError: the id cannot name a user, or differs only by case from another user's.
            InputDataError: an utterance has the id of another one in the user's KB.
            AnchorStoreError: another build of the user holds the folder's writer lock.
        """
        return self.users.add(check_user_id(user_id), utterances)


def _no_user(user_id: str | None) -> None:
    if user_id is not None:
        raise ConfigurationError("this server serves one KB: its calls name no user")
