"""The host's nodes as the prompt sees them: escaped like LangChain's documents, unchanged for the user.

LlamaIndex builds the QA prompt's ``{context_str}`` from ``node.get_content(metadata_mode=LLM)``
of the very nodes it then returns as ``response.source_nodes``. So the escaping cannot be done on
the node's text (the user would read escaped text back) nor on the prompt alone (with the user's
own template GRAVITY never sees it). :func:`escape_host_nodes` therefore returns, for each host
node, a **copy** of the same class, same id, text, metadata and relationships, whose *LLM view*
alone is :func:`gravity_core.prompts.memories.memory_item` of what LlamaIndex would have shown
(metadata and text, one escaped item):

- ``node.text``, ``node.get_content()``, ``node.metadata``, ``isinstance(node, Document)``,
  ``node.hash`` and ``to_dict()`` are those of the user's node;
- ``node.get_content(MetadataMode.LLM)`` and the LLM content blocks (multimodal synthesizers)
  are the escaped item: what the model was sent.

The user's node objects are never modified. GRAVITY's own anchor node is left as it is (its text
is escaped already).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, TypeVar, cast

from llama_index.core.base.llms.types import BaseContentBlock, TextBlock
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore

from gravity_core.prompts.memories import memory_item

__all__ = ["escape_host_node", "escape_host_nodes", "is_escaped"]

_Node = TypeVar("_Node", bound=BaseNode)


class _EscapedView:
    """Mixed in before the node's own class: only the LLM view changes."""

    def get_content(self, metadata_mode: MetadataMode = MetadataMode.NONE) -> str:
        content: str = super().get_content(metadata_mode=metadata_mode)  # type: ignore[misc]
        return memory_item(content) if metadata_mode == MetadataMode.LLM else content

    def get_content_blocks(self, metadata_mode: MetadataMode = MetadataMode.NONE) -> list[BaseContentBlock]:
        blocks: list[BaseContentBlock] = super().get_content_blocks(metadata_mode=metadata_mode)  # type: ignore[misc]
        if metadata_mode != MetadataMode.LLM:
            return blocks
        texts = [block.text for block in blocks if isinstance(block, TextBlock)]
        others = [block for block in blocks if not isinstance(block, TextBlock)]
        item = memory_item("\n".join(texts))
        return [TextBlock(text=item), *others] if item else others


@cache
def _escaped_class(node_class: type[BaseNode]) -> type[BaseNode]:
    """``node_class`` with the escaped LLM view; one class per node class.

    ``class_name()`` is inherited, so a serialised copy loads back as the user's own class.
    """
    name = f"Escaped{node_class.__name__}"
    return cast(type[BaseNode], type(name, (_EscapedView, node_class), {"__module__": __name__}))


def is_escaped(node: NodeWithScore | BaseNode) -> bool:
    """Whether ``node`` is a copy made by :func:`escape_host_node`."""
    inner = node.node if isinstance(node, NodeWithScore) else node
    return isinstance(inner, _EscapedView)


def escape_host_node(node: _Node) -> _Node:
    """A copy of ``node`` whose LLM view is escaped (``node`` itself when it already is one)."""
    if isinstance(node, _EscapedView):
        return node
    node_class = type(node)
    fields: dict[str, Any] = {name: getattr(node, name) for name in node_class.model_fields}
    copy = _escaped_class(node_class).model_construct(_fields_set=set(node.model_fields_set), **fields)
    return cast(_Node, copy)


def escape_host_nodes(nodes: Sequence[NodeWithScore]) -> list[NodeWithScore]:
    """Each node with an escaped LLM view and its score kept; new objects, the inputs are not modified."""
    return [
        node if is_escaped(node) else NodeWithScore(node=escape_host_node(node.node), score=node.score)
        for node in nodes
    ]
