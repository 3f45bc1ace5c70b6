"""A node postprocessor: GRAVITY's anchor blocks first in the context, the retrieved nodes escaped after."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import date, datetime

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle, TextNode

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy, placement_of
from gravity_core.errors import ConfigurationError
from gravity_core.prompts.memories import memories_within
from gravity_core.query.question_date import as_question_date
from gravity_core.query.types import AnchorContext
from gravity_core.serving.users import UserKBs
from gravity_llamaindex.escaping import escape_host_nodes
from gravity_llamaindex.provider import AnchorProvider, EngineLike, as_provider
from gravity_llamaindex.transform import question_date_of, user_id_of

__all__ = [
    "GRAVITY_METADATA_KEY",
    "GravityNodePostprocessor",
    "KeepGravityFirst",
    "anchor_node",
    "is_gravity_node",
    "split_gravity_nodes",
]

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

GRAVITY_METADATA_KEY = "gravity"
"""Metadata key set to ``True`` on the anchor node: how code tells it from retrieved memories."""

ANCHOR_NODE_SCORE = 1.0


def is_gravity_node(node: NodeWithScore | BaseNode) -> bool:
    """Whether ``node`` is the anchor node made by :class:`GravityNodePostprocessor`."""
    inner = node.node if isinstance(node, NodeWithScore) else node
    return inner.metadata.get(GRAVITY_METADATA_KEY) is True


def split_gravity_nodes(nodes: Sequence[NodeWithScore]) -> tuple[list[NodeWithScore], list[NodeWithScore]]:
    """``(anchor nodes, other nodes)``, each in the given order."""
    anchors = [n for n in nodes if is_gravity_node(n)]
    others = [n for n in nodes if not is_gravity_node(n)]
    return anchors, others


def anchor_node(context: AnchorContext, *, user_id: str | None = None) -> NodeWithScore | None:
    """The marked node holding ``context.text``, or ``None`` when GRAVITY has nothing to inject.

    Its metadata (the marker, the question, the anchors as ``kind:id``, the token count and, when
    given, ``gravity_user_id``: whose KB the anchors come from) is excluded from both the LLM and
    the embedding view, so the synthesizer's ``{context_str}`` shows the anchor text alone. Its id
    is derived from the question and the user, so the same question gives the same node, and two
    users' anchor nodes for one question never share an id.
    """
    if not context.text:
        return None
    metadata: dict[str, object] = {
        GRAVITY_METADATA_KEY: True,
        "gravity_question": context.question,
        "gravity_anchors": [f"{a.kind.value}:{a.id}" for a in context.anchors],
        "gravity_tokens": context.tokens,
    }
    named = context.question
    if user_id is not None:
        metadata["gravity_user_id"] = user_id
        named = f"{user_id}\n{context.question}"
    digest = hashlib.sha1(named.encode("utf-8")).hexdigest()[:16]
    node = TextNode(
        id_=f"gravity-anchors-{digest}",
        text=context.text,
        metadata=metadata,
        excluded_llm_metadata_keys=list(metadata),
        excluded_embed_metadata_keys=list(metadata),
    )
    return NodeWithScore(node=node, score=ANCHOR_NODE_SCORE)


class GravityNodePostprocessor(BaseNodePostprocessor):
    """Prepends one node holding GRAVITY's anchor blocks to the retrieved nodes.

    The node (see :func:`anchor_node`) carries ``AnchorContext.text`` (the priority instruction and
    the topic, entity and event blocks), ``score=1.0`` and ``metadata["gravity"] = True``. It lands
    first in the QA prompt's ``{context_str}`` and first in ``response.source_nodes``. An anchor node
    already in the list (the postprocessor ran before) is replaced, not doubled.

    The retrieved nodes follow, escaped for the prompt as LangChain's documents are (see
    :mod:`gravity_llamaindex.escaping`): each is a copy whose LLM view is one ``- `` item with
    ``&``, ``<``, ``>`` escaped, so a memory cannot forge a block or close a tag; its text, metadata,
    id and class stay the user's, so ``response.source_nodes`` reads back the original. This
    happens also when the engine has nothing to inject (then only the anchor node is missing).

    Put it **last** in ``node_postprocessors``: postprocessors after it (rerankers, similarity
    cutoffs, ``LongContextReorder``) would score, move or drop the anchor node like a memory. If
    another postprocessor has to run after it, wrap that one in :class:`KeepGravityFirst`.

    The question is dated by the query bundle when it is a
    :class:`~gravity_llamaindex.GravityQueryBundle`, else by ``question_date``, else by the provider's.
    Built with ``users=``, it answers each query from the KB of the user the bundle names
    (``GravityQueryBundle(q, user_id=...)``); a query that names no user is refused.

    **One token budget.** With ``total_budget``, the anchors and the memories share it as the
    LangChain chain and ``gravity eval`` share it (:mod:`gravity_core.context.window`): the anchors
    are formatted within the policy's part (:meth:`ContextPolicy.share
    <gravity_core.context.policy.ContextPolicy.share>`; none when that part is 0), then the
    retrieved nodes are kept in rank order while their escaped items fit in what is left (a node
    too long is dropped, shorter ones after it are still kept; a node fetched by provenance keeps
    its place only within the policy's bounds, :meth:`ContextPolicy.fill
    <gravity_core.context.policy.ContextPolicy.fill>`). The count is cl100k tokens of the
    anchor text and of each node's item, not of the template around them.

    Args:
        engine: a GRAVITY engine, or an :class:`AnchorProvider` shared with the other components;
            not together with ``users``.
        users: the KBs of many users (:class:`~gravity_core.serving.users.UserKBs`); not together with
            ``engine``.
        question_date: the date questions are asked (a date, a datetime or an ISO string;
            default: the provider's).
        total_budget: one token budget for the anchors and the retrieved nodes together (default:
            none; the anchors take the engine's own budget and every node is kept).
        policy: how ``total_budget`` is shared (default: the shipped policy).
        callback_manager: LlamaIndex callback manager (legacy callbacks).

    Raises:
        ConfigurationError: both or neither of ``engine`` and ``users``, or a ``total_budget``
            below 1; at a query: no query, or (with ``users``) a query that names no user.

    Example:
        ```python
        query_engine = index.as_query_engine(
            llm=llm, node_postprocessors=[reranker, GravityNodePostprocessor(engine)]
        )
        ```
    """

    _provider: AnchorProvider = PrivateAttr()
    _question_date: date | None = PrivateAttr(default=None)
    _total_budget: int | None = PrivateAttr(default=None)
    _policy: ContextPolicy = PrivateAttr(default=DEFAULT_POLICY)

    def __init__(
        self,
        engine: EngineLike | None = None,
        *,
        users: UserKBs | None = None,
        question_date: date | datetime | str | None = None,
        total_budget: int | None = None,
        policy: ContextPolicy = DEFAULT_POLICY,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        asked = as_question_date(question_date)
        provider = as_provider(engine, users=users)
        if total_budget is not None and total_budget < 1:
            raise ConfigurationError(f"total_budget must be at least 1, got {total_budget}")
        super().__init__(callback_manager=callback_manager or CallbackManager())
        self._provider = provider
        self._question_date = asked
        self._total_budget = total_budget
        self._policy = policy

    @classmethod
    def class_name(cls) -> str:
        """Class name (LlamaIndex convention)."""
        return "GravityNodePostprocessor"

    @property
    def provider(self) -> AnchorProvider:
        """Where the anchors come from."""
        return self._provider

    @property
    def question_date(self) -> date | None:
        """The date this postprocessor's questions are asked, unless the bundle says otherwise."""
        return self._question_date

    def _question(self, query_bundle: QueryBundle | None) -> tuple[QueryBundle, date | None]:
        """The query and its date."""
        if query_bundle is None:
            raise ConfigurationError(
                "GravityNodePostprocessor needs the query: pass query_bundle or query_str"
            )
        given = question_date_of(query_bundle)
        return query_bundle, given if given is not None else self._question_date

    def _prepend(
        self, context: AnchorContext, nodes: list[NodeWithScore], provider: AnchorProvider
    ) -> list[NodeWithScore]:
        _, others = split_gravity_nodes(nodes)
        if self._total_budget is not None:
            context, others = self._within_budget(context, others, provider)
        memories = escape_host_nodes(others)
        node = anchor_node(context, user_id=provider.user_id)
        if node is None:
            logger.debug("no anchors for %r: only the memories, escaped", context.question)
            return memories
        return [node, *memories]

    @dispatcher.span
    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        bundle, asked = self._question(query_bundle)
        provider = self._provider.for_user(user_id_of(bundle))
        context = provider.get(bundle.query_str, question_date=asked)
        return self._prepend(context, nodes, provider)

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        bundle, asked = self._question(query_bundle)
        provider = await self._provider.afor_user(user_id_of(bundle))
        context = await provider.aget(bundle.query_str, question_date=asked)
        return self._prepend(context, nodes, provider)

    def _within_budget(
        self, context: AnchorContext, nodes: list[NodeWithScore], provider: AnchorProvider
    ) -> tuple[AnchorContext, list[NodeWithScore]]:
        """The anchors within the policy's part of the total budget, and the nodes that fit after them."""
        assert self._total_budget is not None
        engine = provider.engine
        share = self._policy.share(self._total_budget, (provider.config or engine.config).token_budget)
        text, tokens = engine.fit_anchors(context, share.anchors)
        fitted = replace(context, text=text, tokens=tokens)
        texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes]
        placements = [placement_of(n.node.metadata) for n in nodes]
        kept = memories_within(texts, share.host(tokens), engine.counter.count, placements, self._policy)
        return fitted, [nodes[n] for n in kept]


class KeepGravityFirst(BaseNodePostprocessor):
    """Runs another postprocessor on the retrieved nodes only, keeping GRAVITY's anchor node first.

    For pipelines where a postprocessor must come after :class:`GravityNodePostprocessor` (say a
    reranker appended by other code): the anchor node is set aside, the wrapped postprocessor sees
    and reorders the memories alone, and the anchor node is put back in front. The nodes it returns
    are escaped for the prompt again (:mod:`gravity_llamaindex.escaping`), in case it made new ones.

    Args:
        postprocessor: the postprocessor to shield the anchor node from.

    Example:
        ```python
        node_postprocessors = [GravityNodePostprocessor(engine), KeepGravityFirst(reranker)]
        ```
    """

    _inner: BaseNodePostprocessor = PrivateAttr()

    def __init__(self, postprocessor: BaseNodePostprocessor) -> None:
        if not isinstance(postprocessor, BaseNodePostprocessor):
            raise ConfigurationError(f"expected a BaseNodePostprocessor, got {type(postprocessor).__name__}")
        super().__init__(callback_manager=postprocessor.callback_manager)
        self._inner = postprocessor

    @classmethod
    def class_name(cls) -> str:
        """Class name (LlamaIndex convention)."""
        return "KeepGravityFirst"

    @property
    def postprocessor(self) -> BaseNodePostprocessor:
        """The wrapped postprocessor."""
        return self._inner

    @dispatcher.span
    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        anchors, others = split_gravity_nodes(nodes)
        return [
            *anchors,
            *escape_host_nodes(self._inner.postprocess_nodes(others, query_bundle=query_bundle)),
        ]

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        anchors, others = split_gravity_nodes(nodes)
        ranked = await self._inner.apostprocess_nodes(others, query_bundle=query_bundle)
        return [*anchors, *escape_host_nodes(ranked)]
