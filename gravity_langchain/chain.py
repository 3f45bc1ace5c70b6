"""LCEL pieces: the anchors runnable, the prompt with a ``{gravity_anchors}`` slot, a one-call chain.

A chain that already retrieves from a vector store gains GRAVITY in two places::

    chain = (
        RunnablePassthrough.assign(
            context=itemgetter("question") | retriever | format_documents,   # a GravityRetriever
            gravity_anchors=gravity_anchors_runnable(cache),                 # anchors text
        )
        | GRAVITY_PROMPT | chat_model | StrOutputParser()
    )

Give the retriever and the runnable the same :class:`~gravity_core.serving.answer_cache.AnswerCache`
and the engine query runs once per question (:func:`build_gravity_chain` does this).

**The question's date** ("last month" is resolved against it): pass it per call as
``chain.invoke(inputs, config={"configurable": {"question_date": "2024-06-01"}})``. LangChain hands
the configurable values to every runnable of the chain, so the retriever and the anchors runnable
resolve the same date. :func:`build_gravity_chain` also reads a ``"question_date"`` key of its input
dict. Without one, the ``question_date=`` given when building applies, else the KB's latest day.

**Many users, one chain**: build it with ``users=`` (a :class:`~gravity_core.serving.users.UserKBs`) and a
``user_filter`` instead of an engine, and name the user per call as
``config={"configurable": {"user_id": "u1"}}``: the retrieval and the anchors then use only that
user's KB and that user's documents of the shared store (see :mod:`gravity_langchain.per_user`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import VectorStore

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy, placement_of
from gravity_core.context.window import BudgetShare
from gravity_core.errors import ConfigurationError
from gravity_core.prompts.memories import RETRIEVED_MEMORIES, format_memories, memories_within
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.question_date import QUESTION_DATE_KEY, as_question_date
from gravity_core.query.types import AnchorContext
from gravity_core.serving.answer_cache import AnswerCache, UserAnswerCaches
from gravity_core.serving.users import UserKBs
from gravity_langchain.batched_search import BatchedSearch
from gravity_langchain.per_user import UserFilter, configured_user_id, required_user_id
from gravity_langchain.retrieval_call import configured_question_date
from gravity_langchain.retriever import GravityRetriever

__all__ = [
    "GRAVITY_PROMPT",
    "RETRIEVED_MEMORIES",
    "build_gravity_chain",
    "format_documents",
    "gravity_anchors_runnable",
    "gravity_prompt",
]


def format_documents(documents: Sequence[Document]) -> str:
    """The retrieved documents as one block (``""`` when there are none), one item per document.

    The block's tag, ``<retrieved_memories>``, is what GRAVITY's priority instruction calls "the
    retrieved memories". Document text is escaped as the anchors are (``&``, ``<``, ``>``; each line
    of a document continues its item), so a document cannot close the block or forge a tag: see
    :mod:`gravity_core.prompts.memories`, which the LlamaIndex integration uses too.
    """
    return format_memories(document.page_content for document in documents)


def gravity_prompt(
    *,
    question_key: str = "question",
    context_key: str = "context",
    anchors_key: str = "gravity_anchors",
    history_key: str | None = "history",
) -> ChatPromptTemplate:
    """A chat prompt with the retrieved memories, GRAVITY's anchors and the question.

    The system message holds ``{context}`` (the host's memories, e.g. from :func:`format_documents`)
    and then ``{gravity_anchors}`` (the anchors text, which starts with GRAVITY's priority
    instruction); an optional ``history`` messages placeholder comes next, then the question as the
    human message. No other instruction text is added.

    Args:
        question_key: the variable holding the question.
        context_key: the variable holding the retrieved memories.
        anchors_key: the variable holding the anchors text.
        history_key: the optional chat-history placeholder; ``None`` leaves it out.
    """
    keys = [question_key, context_key, anchors_key] + ([history_key] if history_key else [])
    if len(set(keys)) != len(keys) or not all(k.isidentifier() for k in keys):
        raise ConfigurationError(f"prompt variable names must be distinct identifiers, got {keys}")
    messages: list[Any] = [("system", f"{{{context_key}}}\n\n{{{anchors_key}}}")]
    if history_key:
        messages.append(MessagesPlaceholder(history_key, optional=True))
    messages.append(("human", f"{{{question_key}}}"))
    return ChatPromptTemplate.from_messages(messages)


GRAVITY_PROMPT = gravity_prompt()
"""``gravity_prompt()``: variables ``context``, ``gravity_anchors``, ``history`` (optional), ``question``."""


def _question_of(value: Any, question_key: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        if question_key not in value:
            raise ConfigurationError(
                f"the chain input has no {question_key!r} key (keys: {sorted(map(str, value))})"
            )
        question = value[question_key]
        if isinstance(question, str):
            return question
    raise ConfigurationError(
        f"expected a question string or a mapping with a {question_key!r} string, got {type(value).__name__}"
    )


class _Anchors:
    """The anchor context of a chain input, for the date the question is asked and (per user) its user.

    The date is the input's ``date_key`` (when given), else ``config["configurable"]["question_date"]``,
    else ``question_date``. The context comes through the shared cache: the engine's, or with
    :class:`UserAnswerCaches` the cache of the user ``config["configurable"]["user_id"]`` names.
    """

    def __init__(
        self,
        caches: AnswerCache | UserAnswerCaches,
        config: QueryConfig | None,
        question_key: str,
        question_date: date | None,
        date_key: str | None,
    ) -> None:
        self.caches, self.config, self.question_key = caches, config, question_key
        self.question_date, self.date_key = question_date, date_key

    def user_id(self, run_config: RunnableConfig | None) -> str | None:
        """The checked user id of the call (``None`` for a single engine).

        Raises:
            ConfigurationError: the chain serves many users and the call names none, or a bad one.
        """
        if not isinstance(self.caches, UserAnswerCaches):
            return None
        return required_user_id(configured_user_id(run_config), "this GRAVITY chain")

    def cache(self, run_config: RunnableConfig | None) -> AnswerCache:
        """The query cache of the call: the engine's, or the one of the call's user."""
        user = self.user_id(run_config)
        if user is None:
            assert isinstance(self.caches, AnswerCache)  # user_id() is None only then
            return self.caches
        assert isinstance(self.caches, UserAnswerCaches)
        return self.caches.for_user(user)

    def input_date(self, value: Any) -> date | None:
        """The date in the input dict's ``date_key``, if any."""
        if self.date_key is None or not isinstance(value, Mapping):
            return None
        return as_question_date(value.get(self.date_key), f"the input's {self.date_key!r}")

    def asked(self, value: Any, run_config: RunnableConfig | None) -> date | None:
        given = self.input_date(value)
        if given is not None:
            return given
        configured = configured_question_date(run_config)
        return configured if configured is not None else self.question_date

    def context(self, value: Any, run_config: RunnableConfig | None) -> AnchorContext:
        question = _question_of(value, self.question_key)
        asked = self.asked(value, run_config)
        return self.cache(run_config).get(question, config=self.config, question_date=asked)

    async def acontext(self, value: Any, run_config: RunnableConfig | None) -> AnchorContext:
        """:meth:`context` in a worker thread (the scoring, and loading a user's engine, block)."""
        return await asyncio.to_thread(self.context, value, run_config)


def _caches_of(
    source: GravityEngine | AnswerCache | UserKBs | UserAnswerCaches,
) -> AnswerCache | UserAnswerCaches:
    """The query cache of an engine or the caches of users (a cache or caches given are kept)."""
    if isinstance(source, GravityEngine):
        return AnswerCache(source)
    if isinstance(source, UserKBs):
        return UserAnswerCaches(source)
    return source


def gravity_anchors_runnable(
    source: GravityEngine | AnswerCache | UserKBs | UserAnswerCaches,
    question_key: str = "question",
    *,
    config: QueryConfig | None = None,
    question_date: date | datetime | str | None = None,
) -> Runnable[Any, str]:
    """A runnable from the chain input (a question, or a dict with ``question_key``) to the anchors text.

    Use it as ``RunnablePassthrough.assign(gravity_anchors=gravity_anchors_runnable(cache))``. The text
    is :attr:`AnchorContext.text <gravity_core.query.types.AnchorContext>`: the priority instruction and
    the three blocks, or ``""`` when no anchor qualifies. The run is named ``"gravity_anchors"``.

    The question is dated by ``config={"configurable": {"question_date": ...}}`` of the call (which
    the :class:`GravityRetriever` of the same chain reads too), else by ``question_date``, else the
    KB's latest day.

    Given the KBs of many users (a :class:`~gravity_core.serving.users.UserKBs`, or
    :class:`~gravity_core.serving.answer_cache.UserAnswerCaches` shared with a per-user retriever), each
    call names its user as ``config={"configurable": {"user_id": "u1"}}`` and gets that user's anchors.

    Args:
        source: the engine, or a cache shared with a :class:`GravityRetriever` (then one engine
            query per question serves both); for many users, their ``UserKBs`` or ``UserAnswerCaches``.
        question_key: where the question is in a dict input.
        config: query settings (default: the engine's); use the retriever's so the cache is shared.
        question_date: the date questions are asked (a date, a datetime or an ISO string).

    Raises:
        ConfigurationError: ``question_date`` (here or in the call's configurable) is not a date; a
            per-user call names no user, or a bad one.
    """
    anchors = _Anchors(_caches_of(source), config, question_key, as_question_date(question_date), None)

    def text(value: Any, config: RunnableConfig) -> str:
        return anchors.context(value, config).text

    async def atext(value: Any, config: RunnableConfig) -> str:
        return (await anchors.acontext(value, config)).text

    return RunnableLambda(text, afunc=atext, name="gravity_anchors")


def build_gravity_chain(
    engine: GravityEngine | None,
    vector_store_or_retriever: VectorStore | BaseRetriever,
    chat_model: BaseChatModel | Runnable[Any, Any],
    k: int = 4,
    *,
    config: QueryConfig | None = None,
    policy: ContextPolicy = DEFAULT_POLICY,
    token_budget: int | None = None,
    prompt: ChatPromptTemplate | None = None,
    question_key: str = "question",
    question_date: date | datetime | str | None = None,
    question_date_key: str = QUESTION_DATE_KEY,
    batched_search: BatchedSearch | None = None,
    users: UserKBs | None = None,
    user_filter: UserFilter | None = None,
) -> Runnable[Any, str]:
    """The whole chain: GRAVITY retrieval from the host's store, anchors, prompt, model, text out.

    The chain takes a question string or a dict with ``question_key`` (plus ``history``, a list of
    messages, if the prompt has that placeholder, and ``question_date_key``) and returns the
    model's answer as a string. The retriever and the anchors share one :class:`AnswerCache`.

    The question's date, for "last month" and the like, is the input's ``question_date_key``, else
    ``config={"configurable": {"question_date": ...}}`` of the call, else ``question_date``, else
    the KB's latest day; the retrieval and the anchors use the same one.

    One chain serves many users when built with ``users`` and ``user_filter`` (and ``None`` for the
    engine): each call names its user as ``config={"configurable": {"user_id": "u1"}}`` and gets
    that user's anchors and only the store's documents ``user_filter("u1")`` lets through.

    Args:
        engine: the GRAVITY engine (``None`` with ``users``).
        vector_store_or_retriever: the host's vector store or retriever.
        chat_model: any LangChain chat model (or runnable from a prompt value to a message).
        k: documents retrieved per question.
        config: query settings (default: the engine's).
        policy: how the expansions' hits join the question's (see :class:`GravityRetriever`), and
            how ``token_budget`` is shared.
        token_budget: one total budget (cl100k tokens) for the anchors and the retrieved documents,
            shared as ``gravity eval`` shares it: the anchors take
            :meth:`ContextPolicy.anchor_tokens <gravity_core.context.policy.ContextPolicy.anchor_tokens>`
            (capped by the query settings' own budget) and the documents fill the rest in rank
            order (one too long for what is left is skipped; a turn fetched by provenance keeps
            its place only within the policy's bounds, :meth:`ContextPolicy.fill
            <gravity_core.context.policy.ContextPolicy.fill>`). Retrieve enough to fill it (``k``).
            A budget whose anchor share is 0 (below the policy's ``min_anchor_tokens``) gives the
            store's own top documents: no anchors and no expanded queries.
            ``None``: ``k`` documents and the anchors within the query settings' budget.
        prompt: a prompt with ``context``, ``gravity_anchors`` and ``question_key`` variables
            (default: :func:`gravity_prompt`).
        question_key: the input key of the question.
        question_date: the date questions are asked (a date, a datetime or an ISO string).
        question_date_key: the input key of a per-call question date.
        batched_search: sends all of a question's vectors to the store in one request (see
            :class:`GravityRetriever`; only with a vector store).
        users: the KBs of many users, in place of ``engine``.
        user_filter: with ``users``, the store's search arguments that keep to one user's documents
            (see :class:`GravityRetriever`).

    Raises:
        ConfigurationError: both or neither of ``engine`` and ``users``; ``users`` without
            ``user_filter``; and, per call, a per-user call that names no user (or a bad one).

    Example:
        ```python
        chain = build_gravity_chain(engine, vector_store, ChatOpenAI(model="gpt-4o-mini"))
        chain.invoke("Where does Maya work now?")

        shared = build_gravity_chain(
            None, chroma, model, users=UserKBs("kbs"), user_filter=lambda u: {"filter": {"user_id": u}}
        )
        shared.invoke({"question": "Where do I work now?"}, config={"configurable": {"user_id": "u1"}})
        ```
    """
    caches, serving = _serving(engine, users, user_filter)
    if isinstance(vector_store_or_retriever, VectorStore):
        host: dict[str, Any] = {"vector_store": vector_store_or_retriever}
    elif isinstance(vector_store_or_retriever, BaseRetriever):
        host = {"retriever": vector_store_or_retriever}
    else:
        raise ConfigurationError(
            "expected a LangChain VectorStore or BaseRetriever, "
            f"got {type(vector_store_or_retriever).__name__}"
        )
    if question_date_key == question_key:
        raise ConfigurationError(f"question_date_key and question_key are both {question_key!r}")
    if token_budget is not None and token_budget < 1:
        raise ConfigurationError(f"token_budget must be at least 1, got {token_budget}")
    effective = config or _default_config(caches)
    share = policy.share(token_budget, effective.token_budget) if token_budget is not None else None
    search_config = config
    if share is not None and share.anchors == 0:
        # Too small a budget for anchors: the host's own top documents, no expansion either, as
        # `gravity eval` measures it.
        search_config = effective.model_copy(update={"expand": False})
    asked = as_question_date(question_date)
    retriever = GravityRetriever(
        k=k,
        config=search_config,
        cache=caches,
        policy=policy,
        question_date=asked,
        batched_search=batched_search,
        **serving,
        **host,
    )
    anchors = _Anchors(caches, config, question_key, asked, question_date_key)

    def as_input(value: Any, config: RunnableConfig) -> dict[str, Any]:
        anchors.user_id(config)  # a per-user call without a (good) user id fails before any search
        if isinstance(value, str):
            return {question_key: value}
        if isinstance(value, Mapping):
            _question_of(value, question_key)
            anchors.input_date(value)  # a bad date fails before any search
            return dict(value)
        raise ConfigurationError(f"expected a question string or a dict, got {type(value).__name__}")

    # The retriever reads the configurable date itself; the input's date is handed to it. (The
    # inner functions' ``config`` is the run's RunnableConfig: RunnableLambda passes it by that name.)
    def retrieve(value: dict[str, Any], config: RunnableConfig) -> list[Document]:
        return retriever.invoke(value[question_key], config, question_date=anchors.input_date(value))

    async def aretrieve(value: dict[str, Any], config: RunnableConfig) -> list[Document]:
        return await retriever.ainvoke(value[question_key], config, question_date=anchors.input_date(value))

    def anchor_context(value: Any, config: RunnableConfig) -> AnchorContext:
        return anchors.context(value, config)

    async def aanchor_context(value: Any, config: RunnableConfig) -> AnchorContext:
        return await anchors.acontext(value, config)

    def anchor_text(value: Any, config: RunnableConfig) -> str:
        return anchors.context(value, config).text

    async def aanchor_text(value: Any, config: RunnableConfig) -> str:
        return (await anchors.acontext(value, config)).text

    documents = RunnableLambda(retrieve, afunc=aretrieve, name="gravity_retrieval")
    if share is None:
        retrieval: Runnable[Any, Any] = RunnablePassthrough.assign(
            context=documents | format_documents,
            gravity_anchors=RunnableLambda(anchor_text, afunc=aanchor_text, name="gravity_anchors"),
        )
    else:
        budget = share  # not None here; named for the closure

        def within_budget(value: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
            return _within_budget(value, budget, anchors.cache(config).engine, policy)

        contexts = RunnableLambda(anchor_context, afunc=aanchor_context, name="gravity_anchors")
        retrieval = RunnablePassthrough.assign(context=documents, gravity_anchors=contexts) | RunnableLambda(
            within_budget, name="gravity_budget"
        )
    chosen_prompt = prompt if prompt is not None else gravity_prompt(question_key=question_key)
    return (
        RunnableLambda(as_input, name="gravity_input")
        | retrieval
        | chosen_prompt
        | chat_model
        | StrOutputParser()
    ).with_config(run_name="gravity_chain")


def _serving(
    engine: GravityEngine | None, users: UserKBs | None, user_filter: UserFilter | None
) -> tuple[AnswerCache | UserAnswerCaches, dict[str, Any]]:
    """The chain's shared query cache(s) and the retriever's arguments: one engine, or many users."""
    if engine is not None and users is None:
        return AnswerCache(engine), {"engine": engine, "user_filter": user_filter}
    if users is not None and engine is None:
        return UserAnswerCaches(users), {"users": users, "user_filter": user_filter}
    raise ConfigurationError(
        "build_gravity_chain needs exactly one of engine (one KB) or users= (a KB per user)"
    )


def _default_config(caches: AnswerCache | UserAnswerCaches) -> QueryConfig:
    """The query settings the engine (or every user's engine) uses when a call gives none."""
    if isinstance(caches, UserAnswerCaches):
        return caches.users.config or QueryConfig()
    return caches.engine.config


def _within_budget(
    value: dict[str, Any], share: BudgetShare, engine: GravityEngine, policy: ContextPolicy
) -> dict[str, Any]:
    """The prompt texts of ``value`` within ``share``.

    The anchors are formatted again by ``engine`` (the one that chose them) within their part, then
    the documents fill what is left by ``policy`` (:meth:`ContextPolicy.fill`): in rank order, the
    turns fetched by provenance within their bounds.
    """
    text, tokens = engine.fit_anchors(value["gravity_anchors"], share.anchors)
    documents = value["context"]
    kept = memories_within(
        [d.page_content for d in documents],
        share.host(tokens),
        engine.counter.count,
        [placement_of(d.metadata) for d in documents],
        policy,
    )
    return {**value, "context": format_documents([documents[n] for n in kept]), "gravity_anchors": text}
