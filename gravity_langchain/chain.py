"""LCEL pieces: the anchors runnable, the prompt with a ``{gravity_anchors}`` slot, a one-call chain.

A chain that already retrieves from a vector store gains GRAVITY in two places::

    chain = (
        RunnablePassthrough.assign(
            context=itemgetter("question") | retriever | format_documents,   # a GravityRetriever
            gravity_anchors=gravity_anchors_runnable(cache),                 # anchors text
        )
        | GRAVITY_PROMPT | chat_model | StrOutputParser()
    )

Give the retriever and the runnable the same :class:`~gravity_langchain.query_cache.GravityQueryCache`
and the engine query runs once per question (:func:`build_gravity_chain` does this).

**The question's date** ("last month" is resolved against it): pass it per call as
``chain.invoke(inputs, config={"configurable": {"question_date": "2024-06-01"}})``. LangChain hands
the configurable values to every runnable of the chain, so the retriever and the anchors runnable
resolve the same date. :func:`build_gravity_chain` also reads a ``"question_date"`` key of its input
dict. Without one, the ``question_date=`` given when building applies, else the KB's latest day.
"""

from __future__ import annotations

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

from gravity_core.context_policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.errors import ConfigurationError
from gravity_core.prompts.memories import RETRIEVED_MEMORIES, format_memories
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_langchain.batched_search import BatchedSearch
from gravity_langchain.query_cache import GravityQueryCache
from gravity_langchain.retriever import (
    QUESTION_DATE_KEY,
    GravityRetriever,
    as_question_date,
    configured_question_date,
)

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
    """The anchor context of a chain input, for the date the question is asked.

    The date is the input's ``date_key`` (when given), else ``config["configurable"]["question_date"]``,
    else ``question_date``; an undated question is answered through the shared cache, a dated one
    by the engine (the cache keys on the question and the query settings only).
    """

    def __init__(
        self,
        cache: GravityQueryCache,
        config: QueryConfig | None,
        question_key: str,
        question_date: date | None,
        date_key: str | None,
    ) -> None:
        self.cache, self.config, self.question_key = cache, config, question_key
        self.question_date, self.date_key = question_date, date_key

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
        return self.cache.get(question, config=self.config, question_date=asked)

    async def acontext(self, value: Any, run_config: RunnableConfig | None) -> AnchorContext:
        question = _question_of(value, self.question_key)
        asked = self.asked(value, run_config)
        return await self.cache.aget(question, config=self.config, question_date=asked)


def gravity_anchors_runnable(
    source: GravityEngine | GravityQueryCache,
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

    Args:
        source: the engine, or a cache shared with a :class:`GravityRetriever` (then one engine
            query per question serves both).
        question_key: where the question is in a dict input.
        config: query settings (default: the engine's); use the retriever's so the cache is shared.
        question_date: the date questions are asked (a date, a datetime or an ISO string).

    Raises:
        ConfigurationError: ``question_date`` (here or in the call's configurable) is not a date.
    """
    cache = source if isinstance(source, GravityQueryCache) else GravityQueryCache(source)
    anchors = _Anchors(cache, config, question_key, as_question_date(question_date), None)

    def text(value: Any, config: RunnableConfig) -> str:
        return anchors.context(value, config).text

    async def atext(value: Any, config: RunnableConfig) -> str:
        return (await anchors.acontext(value, config)).text

    return RunnableLambda(text, afunc=atext, name="gravity_anchors")


def build_gravity_chain(
    engine: GravityEngine,
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
) -> Runnable[Any, str]:
    """The whole chain: GRAVITY retrieval from the host's store, anchors, prompt, model, text out.

    The chain takes a question string or a dict with ``question_key`` (plus ``history``, a list of
    messages, if the prompt has that placeholder, and ``question_date_key``) and returns the
    model's answer as a string. The retriever and the anchors share one :class:`GravityQueryCache`.

    The question's date, for "last month" and the like, is the input's ``question_date_key``, else
    ``config={"configurable": {"question_date": ...}}`` of the call, else ``question_date``, else
    the KB's latest day; the retrieval and the anchors use the same one.

    Args:
        engine: the GRAVITY engine.
        vector_store_or_retriever: the host's vector store or retriever.
        chat_model: any LangChain chat model (or runnable from a prompt value to a message).
        k: documents retrieved per question.
        config: query settings (default: the engine's).
        policy: how the expansions' hits join the question's (see :class:`GravityRetriever`), and
            how ``token_budget`` is shared.
        token_budget: one total budget (cl100k tokens) for the anchors and the retrieved documents,
            shared as ``gravity eval`` shares it: the anchors take
            :meth:`ContextPolicy.anchor_tokens <gravity_core.context_policy.ContextPolicy.anchor_tokens>`
            (capped by the query settings' own budget) and the documents fill the rest in rank
            order (one too long for what is left is skipped). Retrieve enough to fill it (``k``).
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

    Example:
        ```python
        chain = build_gravity_chain(engine, vector_store, ChatOpenAI(model="gpt-4o-mini"))
        chain.invoke("Where does Maya work now?")
        ```
    """
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
    share = _BudgetShare(engine, policy, config, token_budget) if token_budget is not None else None
    search_config = config
    if share is not None and share.anchor_budget == 0:
        # Too small a budget for anchors: the host's own top documents, no expansion either, as
        # `gravity eval` measures it.
        search_config = (config or engine.config).model_copy(update={"expand": False})
    cache = GravityQueryCache(engine)
    asked = as_question_date(question_date)
    retriever = GravityRetriever(
        engine=engine,
        k=k,
        config=search_config,
        cache=cache,
        policy=policy,
        question_date=asked,
        batched_search=batched_search,
        **host,
    )
    anchors = _Anchors(cache, config, question_key, asked, question_date_key)

    def as_input(value: Any) -> dict[str, Any]:
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
        contexts = RunnableLambda(anchor_context, afunc=aanchor_context, name="gravity_anchors")
        retrieval = RunnablePassthrough.assign(context=documents, gravity_anchors=contexts) | RunnableLambda(
            share, name="gravity_budget"
        )
    chosen_prompt = prompt if prompt is not None else gravity_prompt(question_key=question_key)
    return (
        RunnableLambda(as_input, name="gravity_input")
        | retrieval
        | chosen_prompt
        | chat_model
        | StrOutputParser()
    ).with_config(run_name="gravity_chain")


class _BudgetShare:
    """Turns retrieved documents and an anchor context into the two prompt texts within one budget."""

    def __init__(
        self, engine: GravityEngine, policy: ContextPolicy, config: QueryConfig | None, budget: int
    ) -> None:
        self.engine, self.budget = engine, budget
        self.anchor_budget = policy.anchor_tokens(budget, (config or engine.config).token_budget)

    def __call__(self, value: dict[str, Any]) -> dict[str, Any]:
        text, tokens = self.engine.fit_anchors(value["gravity_anchors"], self.anchor_budget)
        kept: list[Document] = []
        memories = ""
        for document in value["context"]:  # in rank order; one that does not fit is skipped
            candidate = format_documents([*kept, document])
            if self.engine.counter.count(candidate) + tokens <= self.budget:
                kept.append(document)
                memories = candidate
        return {**value, "context": memories, "gravity_anchors": text}
