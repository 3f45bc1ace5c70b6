"""GRAVITY on top of SGMem, unchanged: expanded queries go to SGMem's search, anchors join the context.

For a question, :class:`SGMemWithGravity` asks the :class:`~gravity_core.query.engine.GravityEngine`
for its anchor context (anchors, up to nine expanded queries, the formatted blocks), runs SGMem's
retrieval for the question, and, under a policy that places expansions (e.g.
:data:`~gravity_core.context.policy.EXPANDING_POLICY`), for each expansion too, merges the rankings
by the context policy (:meth:`SGMem.retrieve_fused`: the question's ranking leads, each expansion's
best chunk may take a bounded place after it, as every integration and the evaluation do), cuts
them to SGMem's token budget, and returns both. The shipped policy places no expansion, so SGMem
neither embeds nor searches them. The prompt context is the anchor injection (priority instruction plus
blocks, within the engine's own budget) followed by SGMem's memories and chunks.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import date
from typing import Any

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.errors import ConfigurationError
from gravity_core.query.config import QueryConfig
from gravity_core.query.engine import GravityEngine
from gravity_core.query.types import AnchorContext
from gravity_core.sgmem.config import ChunkGranularity, RetrievalConfig
from gravity_core.sgmem.index import SGMem
from gravity_core.sgmem.types import SGMemResult

__all__ = ["GravitySGMemResult", "SGMemWithGravity"]


@dataclass(frozen=True)
class GravitySGMemResult:
    """SGMem's fused retrieval plus GRAVITY's anchors for one question.

    Attributes:
        question: the question.
        memory: SGMem's chunks and memories, fused over the question and the expansions.
        anchors: GRAVITY's anchor context (anchors, expansions, blocks, injection text).
    """

    question: str
    memory: SGMemResult
    anchors: AnchorContext

    @property
    def queries(self) -> list[str]:
        """The queries sent to SGMem: the question, then the expansions used."""
        return list(self.memory.queries)

    @property
    def text(self) -> str:
        """The whole context: GRAVITY's injection, then SGMem's memories and chunks."""
        return "\n\n".join(part for part in (self.anchors.text, self.memory.text) if part)

    @property
    def tokens(self) -> int:
        """Tokens of the anchor injection plus SGMem's kept texts."""
        return self.anchors.tokens + self.memory.tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: SGMem's ``results`` and ``memories`` plus the anchor context."""
        return {**self.memory.to_dict(), "anchors": self.anchors.to_dict(), "tokens": self.tokens}


class SGMemWithGravity:
    """SGMem as GRAVITY's host memory.

    Example:
        ```python
        both = SGMemWithGravity(sgmem, GravityEngine.from_dir("kb"))
        result = both.retrieve("When did Maya start night shifts?", token_budget=800)
        prompt_context = result.text
        ```

    Args:
        sgmem: the host memory.
        engine: GRAVITY's query engine over a KB built from the same conversation.
        anchor_config: the engine's settings per query (default: the engine's); its
            ``token_budget`` bounds the anchor blocks, apart from SGMem's budget.
        policy: how the expansions' chunks join the question's (the shipped default, the one
            ``gravity eval`` measures, places none: only the question is searched; pass
            :data:`~gravity_core.context.policy.EXPANDING_POLICY` for the paper's expansions).
        max_expansions: use at most this many of the engine's expansions (default: all).

    Raises:
        ConfigurationError: a negative ``max_expansions``.
    """

    def __init__(
        self,
        sgmem: SGMem,
        engine: GravityEngine,
        *,
        anchor_config: QueryConfig | None = None,
        policy: ContextPolicy = DEFAULT_POLICY,
        max_expansions: int | None = None,
    ) -> None:
        if max_expansions is not None and max_expansions < 0:
            raise ConfigurationError(f"max_expansions must be >= 0, got {max_expansions}")
        self.sgmem = sgmem
        self.engine = engine
        self.anchor_config = anchor_config
        self.policy = policy
        self.max_expansions = max_expansions

    def retrieve(
        self,
        question: str,
        *,
        token_budget: int | None = None,
        total_budget: int | None = None,
        granularity: ChunkGranularity | str | None = None,
        hops: int | None = None,
        max_chunks: int | None = None,
        config: RetrievalConfig | None = None,
        question_date: date | None = None,
    ) -> GravitySGMemResult:
        """Anchors for ``question``, and SGMem's chunks fused over the question and the expansions placed.

        Args:
            question: the question.
            token_budget: SGMem's budget (the anchors have the engine's own).
            total_budget: instead of ``token_budget``, one budget for both, shared by the context
                policy as ``gravity eval`` shares it: the anchors take
                :meth:`ContextPolicy.anchor_tokens` (capped by the anchor settings' own budget)
                and SGMem the rest; when the anchors' part is 0 the result is SGMem's own
                retrieval of the question, with no anchor and no expanded query.
            granularity: ``"turn"``, ``"round"`` or ``"session"`` (default: SGMem's config's).
            hops: SGMem's graph hops (0: plain vector search over sentences).
            max_chunks: at most this many chunks.
            config: SGMem's settings for this call (default: its index's); the keywords above override
                it (see :meth:`SGMem.retrieve`).
            question_date: when the question is asked (for "last month"; default: the KB's last day).

        Raises:
            ConfigurationError: both ``token_budget`` and ``total_budget``, or a budget below 1.
        """
        anchor_config = self.anchor_config
        if total_budget is None:
            anchors = self.engine.query(question, config=anchor_config, question_date=question_date)
        else:
            if token_budget is not None:
                raise ConfigurationError("give token_budget (SGMem's alone) or total_budget, not both")
            if total_budget < 1:
                raise ConfigurationError(f"total_budget must be at least 1, got {total_budget}")
            base = anchor_config or self.engine.config
            share = self.policy.share(total_budget, base.token_budget)
            if share.anchors == 0:
                anchors = AnchorContext(question)  # too small a budget for anchors: SGMem's own context
            else:
                shared = base.model_copy(update={"token_budget": share.anchors})
                anchors = self.engine.query(question, config=shared, question_date=question_date)
            token_budget = share.host(anchors.tokens)
        # A policy that places no expansion's chunk: none is embedded or searched.
        expansions = anchors.expansions if self.policy.every > 0 else []
        if self.max_expansions is not None:
            expansions = expansions[: self.max_expansions]
        extra = [q for q in dict.fromkeys(expansions) if q and q != question]
        memory = self.sgmem.retrieve_fused(
            [question, *extra],
            question=question,
            policy=self.policy,
            token_budget=token_budget,
            granularity=granularity,
            hops=hops,
            max_chunks=max_chunks,
            config=config,
        )
        return GravitySGMemResult(question=question, memory=memory, anchors=anchors)

    async def aretrieve(self, question: str, **kwargs: Any) -> GravitySGMemResult:
        """:meth:`retrieve` in a worker thread."""
        return await asyncio.to_thread(lambda: self.retrieve(question, **kwargs))
