"""A query transform that attaches GRAVITY's expanded queries to the query bundle; dated bundles.

LlamaIndex's ``retrieve``, ``query`` and ``postprocess_nodes`` take a query bundle and nothing else,
so the date a question is asked and the user who asks it travel in the bundle:
:class:`GravityQueryBundle` is a ``QueryBundle`` with a ``question_date`` and a ``user_id``. Every
GRAVITY component reads them; each also takes a ``question_date=`` default of its own, and a
component built with ``users=`` answers each query from the KB of the user the bundle names.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from llama_index.core.indices.query.query_transform.base import BaseQueryTransform
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.schema import QueryBundle

from gravity_core.query.question_date import QUESTION_DATE_KEY, as_question_date
from gravity_core.serving.search_plan import merge_queries
from gravity_core.serving.users import UserKBs, check_user_id
from gravity_llamaindex.provider import AnchorProvider, EngineLike, as_provider

__all__ = ["GravityQueryBundle", "GravityQueryTransform", "merge_queries", "question_date_of", "user_id_of"]


@dataclass
class GravityQueryBundle(QueryBundle):
    """A ``QueryBundle`` that says when the question is asked and who asks it.

    Pass it wherever LlamaIndex takes a query (``query_engine.query``, ``retriever.retrieve``,
    ``postprocess_nodes``): GRAVITY's retriever, transform and postprocessor resolve the question's
    dates ("last month") against ``question_date`` instead of the KB's latest day, and those built
    with ``users=`` answer from the KB of ``user_id`` (the fusion retriever also restricts the
    host's searches to that user). Other components see an ordinary ``QueryBundle``.

    Attributes:
        query_str: the question (``QueryBundle``'s).
        question_date: a ``date``, a ``datetime`` or an ISO string (kept as a ``date``).
        user_id: the user who asks (:func:`~gravity_core.serving.users.check_user_id` rules); needed by
            components built with ``users=``, ignored by those built with one engine.

    Raises:
        ConfigurationError: ``question_date`` is not a date, a datetime or an ISO date string, or
            ``user_id`` cannot name a user.

    Example:
        ```python
        bundle = GravityQueryBundle("What did Maya do last month?", question_date="2024-06-01")
        response = query_engine.query(bundle)
        response = multi_user_engine.query(GravityQueryBundle("Where did I hike?", user_id="u-17"))
        ```
    """

    question_date: date | None = None
    user_id: str | None = None

    def __post_init__(self) -> None:
        self.question_date = as_question_date(self.question_date)
        if self.user_id is not None:
            check_user_id(self.user_id)


def question_date_of(query_bundle: QueryBundle | None) -> date | None:
    """The bundle's ``question_date`` when it is a :class:`GravityQueryBundle`, else ``None``."""
    return query_bundle.question_date if isinstance(query_bundle, GravityQueryBundle) else None


def user_id_of(query_bundle: QueryBundle | None) -> str | None:
    """The bundle's ``user_id`` when it is a :class:`GravityQueryBundle`, else ``None``."""
    return query_bundle.user_id if isinstance(query_bundle, GravityQueryBundle) else None


logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


class GravityQueryTransform(BaseQueryTransform):
    """Adds GRAVITY's expanded queries to ``QueryBundle.custom_embedding_strs``.

    The returned bundle keeps ``query_str`` (and any precomputed ``embedding``) unchanged and sets
    ``custom_embedding_strs = [*query_bundle.embedding_strs, *expansions]``: the original question
    first, then up to nine queries built from the selected anchors (repeats removed).

    The question is dated by the bundle (a :class:`GravityQueryBundle`), else by the
    ``"question_date"`` of the run's metadata (``TransformQueryEngine(transform_metadata=...)``),
    else by ``question_date``, else by the provider's. The returned bundle is a
    :class:`GravityQueryBundle` carrying that date, so the retriever and postprocessor after it
    resolve the same one. The returned bundle also keeps the query's ``user_id``: built with
    ``users=``, the transform expands each question from the KB of the user its bundle names.

    Warning:
        A plain ``VectorIndexRetriever`` **averages** ``custom_embedding_strs`` into one vector
        (``get_agg_embedding_from_queries``, mean pooling) and runs one search with that centroid,
        so with it the expansions blur the question instead of reaching new memories. Put a
        :class:`~gravity_llamaindex.GravityFusionRetriever` with a policy that places expansions
        (``policy=EXPANDING_POLICY``) behind the transform: it runs each string as its own search
        and merges the results. With the shipped policy it searches the question only.

    Use it with ``TransformQueryEngine``, which applies it before retrieval::

        fusion_retriever = GravityFusionRetriever.from_index(index, provider, policy=EXPANDING_POLICY)
        inner = RetrieverQueryEngine.from_args(fusion_retriever, llm=llm)
        query_engine = TransformQueryEngine(inner, GravityQueryTransform(provider))

    Args:
        engine: a GRAVITY engine, or an :class:`AnchorProvider` shared with the other components
            (so the engine runs once per question); not together with ``users``.
        users: the KBs of many users: each query is expanded from the KB of the user its
            :class:`GravityQueryBundle` names; not together with ``engine``.
        question_date: the date questions are asked (a date, a datetime or an ISO string;
            default: the provider's).

    Raises:
        ConfigurationError: both or neither of ``engine`` and ``users``; with ``users``, at each
            query: a query that names no user.
    """

    def __init__(
        self,
        engine: EngineLike | None = None,
        *,
        users: UserKBs | None = None,
        question_date: date | datetime | str | None = None,
    ) -> None:
        self._provider = as_provider(engine, users=users)
        self._question_date = as_question_date(question_date)

    @property
    def provider(self) -> AnchorProvider:
        """Where the anchors come from."""
        return self._provider

    @property
    def question_date(self) -> date | None:
        """The date this transform's questions are asked, unless the bundle or metadata say otherwise."""
        return self._question_date

    def _asked(self, query_bundle: QueryBundle, metadata: dict[str, Any]) -> date | None:
        given = question_date_of(query_bundle)
        if given is not None:
            return given
        configured = as_question_date(metadata.get(QUESTION_DATE_KEY), f"metadata[{QUESTION_DATE_KEY!r}]")
        if configured is not None:
            return configured
        return self._question_date if self._question_date is not None else self._provider.question_date

    @dispatcher.span
    def _run(self, query_bundle: QueryBundle, metadata: dict[str, Any]) -> QueryBundle:
        asked = self._asked(query_bundle, metadata or {})
        user_id = user_id_of(query_bundle)
        context = self._provider.for_user(user_id).get(query_bundle.query_str, question_date=asked)
        strs = merge_queries(list(query_bundle.embedding_strs), context.expansions)
        logger.debug("query %r expanded to %d embedding strings", query_bundle.query_str, len(strs))
        return GravityQueryBundle(
            query_str=query_bundle.query_str,
            image_path=query_bundle.image_path,
            custom_embedding_strs=strs,
            embedding=query_bundle.embedding,
            question_date=asked,
            user_id=user_id,
        )

    def _get_prompts(self) -> PromptDictType:
        return {}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        """GRAVITY's query phase uses no prompt."""
