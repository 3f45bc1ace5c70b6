r"""The host's retrieved documents as prompt text that cannot change the prompt's structure.

One function escapes a document for every integration (LangChain's ``format_documents``, LlamaIndex's
postprocessor and QA template), the way :mod:`gravity_core.query.blocks` escapes conversation text
inside the anchors:

- a document is one item: its first line starts with ``- ``, each further line with two spaces
  and then the line as it was, its own leading spaces and tabs included;
- each line is :func:`~gravity_core.prompts.injection.escape_text` of the document's line.
  ``&``, ``<`` and ``>`` become entities, so it can neither close a block
  (``</retrieved_memories>``, ``</gravity_anchors>``) nor forge a tag. When the line starts like
  a Markdown block after its leading spaces and tabs (``#``, ``-``, ``* ``, ``1.``, a fence, a
  table row...: the exact list is in :func:`~gravity_core.prompts.injection.escape_text`), that
  first character becomes a decimal character reference: ``  # Event Records`` becomes
  ``  &#35; Event Records``. So no line, indented or not, reads as a header, list item, rule,
  fence, table or tag: in Markdown the whole document is one paragraph of one list item;
- every kind of line break ``str.splitlines`` knows (``\r\n``, U+2028, ``\x85``, ``\x0b``...) ends a
  line; blank lines are dropped, and so is blank space around the whole document.
  ``html.unescape`` of a line, without its ``- `` or two-space prefix, gives the document's line
  back.

Block::

    <retrieved_memories>
    # Retrieved Memories
    - first line of a document
      its next line
    - the next document
    </retrieved_memories>
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from gravity_core.context.policy import DEFAULT_POLICY, ContextPolicy
from gravity_core.context.window import Placement
from gravity_core.errors import ConfigurationError
from gravity_core.prompts.injection import BlockTemplate, escape_text

__all__ = ["RETRIEVED_MEMORIES", "format_memories", "memories_within", "memory_item", "memory_items"]

RETRIEVED_MEMORIES = BlockTemplate(tag="retrieved_memories", header="Retrieved Memories")
"""The block around the host's retrieved documents, laid out like GRAVITY's own blocks.

Its tag is what GRAVITY's priority instruction calls "the retrieved memories".
"""

_CONTINUATION = "\n  "


def memory_item(text: str) -> str:
    """One document as one escaped block item (``""`` when it has no text)."""
    lines = [escape_text(line) for line in text.strip().splitlines() if line.strip()]
    return "- " + _CONTINUATION.join(lines) if lines else ""


def memory_items(texts: Iterable[str]) -> list[str]:
    """The non-empty :func:`memory_item` of each text, in order."""
    return [item for item in map(memory_item, texts) if item]


def format_memories(texts: Iterable[str]) -> str:
    """The :data:`RETRIEVED_MEMORIES` block of one item per text (``""`` when none has text)."""
    return RETRIEVED_MEMORIES.render(memory_items(texts))


def memories_within(
    texts: Sequence[str],
    budget: int,
    count: Callable[[str], int],
    placements: Sequence[Placement] | None = None,
    policy: ContextPolicy = DEFAULT_POLICY,
) -> list[int]:
    """Which texts (their indices, in rank order) fit in ``budget`` tokens as one memories block.

    :meth:`ContextPolicy.fill <gravity_core.context.policy.ContextPolicy.fill>` over the texts'
    items: the block's opening and closing lines count once, each item with its line break (cl100k
    tokens never span a line break, so the block's tokens are the sum of its lines'). A text
    without content takes nothing.

    Args:
        texts: the host's documents, best first.
        budget: the tokens the block may take.
        count: the token counter (e.g. ``engine.counter.count``).
        placements: per text, why it holds its place
            (:func:`~gravity_core.context.policy.placement_of` its document's metadata), so the
            turns fetched by provenance take no more than ``policy`` allows; ``None``: plain rank order.
        policy: the context policy that merged the documents.

    Raises:
        ConfigurationError: ``placements`` and ``texts`` differ in length.
    """
    if placements is not None and len(placements) != len(texts):
        raise ConfigurationError(f"{len(placements)} placements for {len(texts)} texts")
    items = [memory_item(text) for text in texts]
    frame = count(RETRIEVED_MEMORIES.opening) + count(RETRIEVED_MEMORIES.closing)
    placement = None if placements is None else placements.__getitem__
    return policy.fill(
        range(len(items)), budget - frame, lambda n: count(f"{items[n]}\n") if items[n] else 0, placement
    )
