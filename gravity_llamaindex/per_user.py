"""The host retriever of each user: one index holding every user's nodes, searched per user.

With ``users=``, GRAVITY's fusion retriever runs each query's searches on the retriever the host
makes for the query's user: a function from the user id to a ``BaseRetriever``. The helpers here
check that function and make one from an index and the user's metadata filters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.indices.base import BaseIndex
from llama_index.core.vector_stores.types import FilterCondition, MetadataFilters

from gravity_core.errors import ConfigurationError
from gravity_llamaindex.provider import MISSING_USER_ID

__all__ = [
    "UserFilters",
    "UserRetriever",
    "all_of",
    "checked_retriever",
    "checked_user_filters",
    "user_retriever",
]

UserRetriever = Callable[[str], BaseRetriever]
"""The retriever that searches only one user's nodes, made from the user id."""

UserFilters = Callable[[str], MetadataFilters]
"""The metadata filters that keep a search to one user's nodes, made from the user id."""

_USER_RETRIEVER_EXAMPLE = (
    "lambda user_id: index.as_retriever(similarity_top_k=10, filters=MetadataFilters("
    "filters=[ExactMatchFilter(key='user_id', value=user_id)]))"
)


def all_of(first: MetadataFilters | None, second: MetadataFilters) -> MetadataFilters:
    """Filters matching both ``first`` and ``second``, made with the public constructor only.

    Two flat AND lists are flattened into one (LlamaIndex's in-memory vector store refuses nested
    filters); anything else is nested under an AND.
    """
    if first is None or not first.filters:
        return second
    if _is_and_list(first) and _is_and_list(second):
        return MetadataFilters(filters=[*first.filters, *second.filters], condition=FilterCondition.AND)
    return MetadataFilters(filters=[first, second], condition=FilterCondition.AND)


def _is_and_list(filters: MetadataFilters) -> bool:
    """Whether ``filters`` is a flat list that must all match (an AND, or a single filter)."""
    flat = not any(isinstance(f, MetadataFilters) for f in filters.filters)
    joined = filters.condition in (None, FilterCondition.AND) or (
        len(filters.filters) == 1 and filters.condition == FilterCondition.OR
    )
    return flat and joined


def checked_retriever(
    many_users: bool, retriever: BaseRetriever | UserRetriever
) -> tuple[BaseRetriever | None, UserRetriever | None]:
    """(the one host retriever, None) for one KB; (None, the function of the user id) with many users."""
    if not many_users:
        if isinstance(retriever, BaseRetriever):
            return retriever, None
        if callable(retriever):
            raise ConfigurationError(
                "a function from the user id to a retriever serves many users: pass users= "
                "(or an AnchorProvider(users=...)) with it, or pass one BaseRetriever"
            )
        raise ConfigurationError(f"expected a LlamaIndex BaseRetriever, got {type(retriever).__name__}")
    if isinstance(retriever, BaseRetriever):
        raise ConfigurationError(
            "with users=, one retriever over an index holding every user's nodes would mix users in "
            "each search: pass a function from the user id to that user's retriever, e.g. "
            f"{_USER_RETRIEVER_EXAMPLE} (or from_index(index, users=..., user_filters=...))"
        )
    if not callable(retriever):
        raise ConfigurationError(
            "with users=, retriever must be a function from the user id to that user's BaseRetriever, "
            f"got {type(retriever).__name__}"
        )
    return None, retriever


def checked_user_filters(users: bool, user_filters: UserFilters | None) -> UserFilters | None:
    """``user_filters`` when the retriever serves many users (``users``), else why not."""
    if not users:
        if user_filters is not None:
            raise ConfigurationError(
                "user_filters restricts each search to the query's user: pass users= "
                "(or an AnchorProvider(users=...)) with it"
            )
        return None
    if user_filters is None:
        raise ConfigurationError(
            "with users=, the host's index holds every user's nodes and each search would mix them: "
            "pass user_filters=, e.g. lambda user_id: MetadataFilters("
            "filters=[ExactMatchFilter(key='user_id', value=user_id)])"
        )
    if not callable(user_filters):
        raise ConfigurationError(f"user_filters must be callable, got {type(user_filters).__name__}")
    return user_filters


def user_retriever(
    index: BaseIndex[Any], user_filters: UserFilters, top_k: int, retriever_kwargs: dict[str, Any]
) -> UserRetriever:
    """A function making the user's ``index.as_retriever``: the user's filters AND the given ones."""
    given = retriever_kwargs.get("filters")
    if given is not None and not isinstance(given, MetadataFilters):
        raise ConfigurationError(f"filters must be MetadataFilters, got {type(given).__name__}")
    rest = {key: value for key, value in retriever_kwargs.items() if key != "filters"}

    def for_user(user_id: str) -> BaseRetriever:
        own = user_filters(user_id)
        if not isinstance(own, MetadataFilters):
            raise ConfigurationError(
                f"user_filters({user_id!r}) must return MetadataFilters, got {type(own).__name__}"
            )
        return index.as_retriever(similarity_top_k=top_k, filters=all_of(given, own), **rest)

    return for_user


def retriever_of_user(make: UserRetriever, user_id: str | None) -> BaseRetriever:
    """The retriever ``make`` gives for ``user_id``.

    Raises:
        ConfigurationError: no ``user_id`` (saying how to name one), or ``make`` did not return a
            ``BaseRetriever``.
    """
    if user_id is None:
        raise ConfigurationError(MISSING_USER_ID)
    made = make(user_id)
    if not isinstance(made, BaseRetriever):
        raise ConfigurationError(
            f"the retriever function must return a LlamaIndex BaseRetriever for user {user_id!r}, "
            f"got {type(made).__name__}"
        )
    return made
