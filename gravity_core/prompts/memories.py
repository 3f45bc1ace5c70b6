"""The host's retrieved documents as prompt text that cannot change the prompt's structure.

One function escapes a document for every integration (LangChain's ``format_documents``, LlamaIndex's
postprocessor and QA template), the way :mod:`gravity_core.query.blocks` escapes conversation text
inside the anchors:

- a document is one item: its first line starts with ``- ``, each further line with two spaces,
  so no line of it can begin a header (``# Event Records``), a role marker or a fence;
- ``&``, ``<`` and ``>`` are escaped on every line (``html.escape``), so it can neither close a
  block (``</retrieved_memories>``, ``</gravity_anchors>``) nor forge a tag;
- every kind of line break ``str.splitlines`` knows (``\\r\\n``, U+2028, ``\\x85``, ``\\x0b``...) ends a
  line; blank lines are dropped. ``html.unescape`` of a line gives the document's line back.

Block::

    <retrieved_memories>
    # Retrieved Memories
    - first line of a document
      its next line
    - the next document
    </retrieved_memories>
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from gravity_core.prompts.injection import BlockTemplate

__all__ = ["RETRIEVED_MEMORIES", "format_memories", "memory_item", "memory_items"]

RETRIEVED_MEMORIES = BlockTemplate(tag="retrieved_memories", header="Retrieved Memories")
"""The block around the host's retrieved documents, laid out like GRAVITY's own blocks.

Its tag is what GRAVITY's priority instruction calls "the retrieved memories".
"""

_CONTINUATION = "\n  "


def memory_item(text: str) -> str:
    """One document as one escaped block item (``""`` when it has no text)."""
    lines = [html.escape(line, quote=False) for line in text.strip().splitlines() if line.strip()]
    return "- " + _CONTINUATION.join(lines) if lines else ""


def memory_items(texts: Iterable[str]) -> list[str]:
    """The non-empty :func:`memory_item` of each text, in order."""
    return [item for item in map(memory_item, texts) if item]


def format_memories(texts: Iterable[str]) -> str:
    """The :data:`RETRIEVED_MEMORIES` block of one item per text (``""`` when none has text)."""
    return RETRIEVED_MEMORIES.render(memory_items(texts))
