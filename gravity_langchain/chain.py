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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import VectorStore

from gravity_core.context_policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.errors import ConfigurationError
from gravity_core.prompts.memories import RETRIEVED_MEMORIES, format_memories
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_langchain.query_cache import GravityQueryCache
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


def gravity_anchors_runnable(
    source: GravityEngine | GravityQueryCache,
    question_key: str = "question",
    *,
    config: QueryConfig | None = None,
) -> Runnable[Any, str]:
    """A runnable from the chain input (a question, or a dict with ``question_key``) to the anchors text.

    Use it as ``RunnablePassthrough.assign(gravity_anchors=gravity_anchors_runnable(cache))``. The text
    is :attr:`AnchorContext.text <gravity_core.query.types.AnchorContext>`: the priority instruction and
    the three blocks, or ``""`` when no anchor qualifies.

    Args:
        source: the engine, or a cache shared with a :class:`GravityRetriever` (then one engine
            query per question serves both).
        question_key: where the question is in a dict input.
        config: query settings (default: the engine's); use the retriever's so the cache is shared.
    """
    cache = source if isinstance(source, GravityQueryCache) else GravityQueryCache(source)

    def anchors(value: Any) -> str:
        return cache.get(_question_of(value, question_key), config=config).text

    async def aanchors(value: Any) -> str:
        return (await cache.aget(_question_of(value, question_key), config=config)).text

    return RunnableLambda(anchors, afunc=aanchors, name="gravity_anchors")


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
) -> Runnable[Any, str]:
    """The whole chain: GRAVITY retrieval from the host's store, anchors, prompt, model, text out.

    The chain takes a question string or a dict with ``question_key`` (plus ``history``, a list of
    messages, if the prompt has that placeholder) and returns the model's answer as a string. The
    retriever and the anchors share one :class:`GravityQueryCache`.

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
            ``None``: ``k`` documents and the anchors within the query settings' budget.
        prompt: a prompt with ``context``, ``gravity_anchors`` and ``question_key`` variables
            (default: :func:`gravity_prompt`).
        question_key: the input key of the question.

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
    cache = GravityQueryCache(engine)
    retriever = GravityRetriever(engine=engine, k=k, config=config, cache=cache, policy=policy, **host)

    def as_input(value: Any) -> dict[str, Any]:
        if isinstance(value, str):
            return {question_key: value}
        if isinstance(value, Mapping):
            _question_of(value, question_key)
            return dict(value)
        raise ConfigurationError(f"expected a question string or a dict, got {type(value).__name__}")

    if token_budget is None:
        retrieval: Runnable[Any, Any] = RunnablePassthrough.assign(
            context=itemgetter(question_key) | retriever | format_documents,
            gravity_anchors=gravity_anchors_runnable(cache, question_key, config=config),
        )
    else:
        if token_budget < 1:
            raise ConfigurationError(f"token_budget must be at least 1, got {token_budget}")
        share = _BudgetShare(engine, policy, config, token_budget)

        def anchor_context(value: Any) -> Any:
            return cache.get(_question_of(value, question_key), config=config)

        async def aanchor_context(value: Any) -> Any:
            return await cache.aget(_question_of(value, question_key), config=config)

        retrieval = RunnablePassthrough.assign(
            context=itemgetter(question_key) | retriever,
            gravity_anchors=RunnableLambda(anchor_context, afunc=aanchor_context, name="gravity_anchors"),
        ) | RunnableLambda(share, name="gravity_budget")
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
        cap = (config or engine.config).token_budget
        anchors = policy.anchor_tokens(budget)
        self.engine, self.budget = engine, budget
        self.anchor_budget = anchors if cap is None else min(anchors, cap)

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
