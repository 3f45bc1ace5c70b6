"""One retriever or chain for many users: the user of each call, and the store search that is theirs.

A chat service keeps one :class:`~gravity_langchain.retriever.GravityRetriever` (or one chain of
:func:`~gravity_langchain.chain.build_gravity_chain`) over a :class:`~gravity_core.serving.users.UserKBs`, and
names the user per call, as it dates the question: ``retriever.invoke(q, user_id="u1")``, or
``config={"configurable": {"user_id": "u1"}}``, which LangChain hands to every runnable of a chain.
The call then uses only that user's anchors (``users.engine(user_id)``) and, through the
``user_filter`` the host gives, only that user's documents of the shared store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig, ensure_config

from gravity_core.errors import ConfigurationError
from gravity_core.serving.users import check_user_id

__all__ = ["USER_ID_KEY", "UserFilter", "configured_user_id", "required_user_id", "user_search_arguments"]

USER_ID_KEY = "user_id"
"""The ``invoke`` keyword and the ``config["configurable"]`` key naming the user of a call."""

UserFilter = Callable[[str], Mapping[str, Any]]
"""The host store's extra search arguments that limit a search to one user's documents, e.g.
``lambda u: {"filter": {"user_id": u}}`` for ``langchain_chroma.Chroma`` or
``lambda u: {"filter": lambda doc: doc.metadata.get("user_id") == u}`` for ``InMemoryVectorStore``."""

_HOW = (
    "pass config={'configurable': {'user_id': '...'}} to the call (it reaches every runnable of a "
    "chain); a GravityRetriever also takes invoke(question, user_id='...')"
)


def configured_user_id(config: RunnableConfig | None) -> object | None:
    """The value of ``config["configurable"]["user_id"]`` (``None`` when not set), unchecked."""
    configurable = ensure_config(config).get("configurable") or {}
    return configurable.get(USER_ID_KEY)


def required_user_id(user_id: object | None, owner: str) -> str:
    """The user id of a call to a per-user ``owner``, checked.

    The check is :func:`~gravity_core.serving.users.check_user_id`.

    Raises:
        ConfigurationError: no user id was given (saying how to give one), or it cannot name a user.
    """
    if user_id is None:
        raise ConfigurationError(f"{owner} serves many users (users=) and this call names none: {_HOW}")
    return check_user_id(user_id)


def user_search_arguments(user_filter: UserFilter, user_id: str) -> dict[str, Any]:
    """The search arguments ``user_filter`` gives for ``user_id``, refused when they limit nothing.

    Raises:
        ConfigurationError: ``user_filter`` returned something other than a non-empty mapping (an
            empty one would search every user's documents).
    """
    search = user_filter(user_id)
    if not isinstance(search, Mapping) or not search:
        raise ConfigurationError(
            f"user_filter must return the store's search arguments that keep to user {user_id!r}'s "
            f"documents (e.g. {{'filter': ...}}), got {search!r}"
        )
    return dict(search)
