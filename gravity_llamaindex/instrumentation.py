"""GRAVITY's place in LlamaIndex instrumentation: the package dispatcher and the anchors event.

Every module of the package gets its dispatcher with ``get_dispatcher(__name__)``; they are children
of the ``"gravity_llamaindex"`` dispatcher created here, which propagates to LlamaIndex's root. A
handler registered on the root dispatcher (as observability integrations do) therefore sees
GRAVITY's spans and events; one registered on :data:`dispatcher` sees GRAVITY's only::

    from llama_index.core.instrumentation import get_dispatcher

    get_dispatcher("gravity_llamaindex").add_event_handler(my_handler)
"""

from __future__ import annotations

from llama_index.core.bridge.pydantic import BaseModel, Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events import BaseEvent

from gravity_core.query.types import AnchorContext

__all__ = ["DISPATCHER_NAME", "GravityAnchorsEvent", "SelectedAnchor", "dispatcher"]

DISPATCHER_NAME = "gravity_llamaindex"

dispatcher = get_dispatcher(DISPATCHER_NAME)
"""Parent of every GRAVITY dispatcher (LlamaIndex keeps dispatchers in a process-wide registry)."""


class SelectedAnchor(BaseModel):
    """One anchor GRAVITY selected for a question.

    Attributes:
        kind: ``"entity"``, ``"event"`` or ``"topic"``.
        id: the anchor's id in the KB.
        score: its cosine similarity to the question (native match score when reranking is off).
        reason: why it was selected: ``"similarity"``, ``"temporal"`` or ``"native"``.
    """

    kind: str
    id: str
    score: float
    reason: str


class GravityAnchorsEvent(BaseEvent):
    """Emitted once each time the GRAVITY engine answers a question (cached answers emit nothing).

    Attributes:
        query_str: the question.
        anchors: the anchors injected, best first within each kind.
        expansions: the expanded queries made for the host's store.
        tokens: cl100k tokens of the injected text.
        user_id: whose KB answered, when the components serve many users (``users=``); else ``None``.
    """

    query_str: str
    anchors: list[SelectedAnchor] = Field(default_factory=list)
    expansions: list[str] = Field(default_factory=list)
    tokens: int = 0
    user_id: str | None = None

    @classmethod
    def class_name(cls) -> str:
        """Class name (LlamaIndex convention)."""
        return "GravityAnchorsEvent"

    @classmethod
    def from_context(cls, context: AnchorContext, *, user_id: str | None = None) -> GravityAnchorsEvent:
        """The event describing one engine answer (from ``user_id``'s KB, if given)."""
        return cls(
            query_str=context.question,
            anchors=[
                SelectedAnchor(kind=a.kind.value, id=a.id, score=float(a.score), reason=a.reason)
                for a in context.anchors
            ],
            expansions=list(context.expansions),
            tokens=context.tokens,
            user_id=user_id,
        )
