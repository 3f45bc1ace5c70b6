"""Markdown: no line of a host document (nor of the anchors' text) opens a block of the prompt (#39).

The prompts GRAVITY builds are read as Markdown by the model: ``# Retrieved Memories`` is a header,
``- `` an item. Before this fix a document's continuation line was only indented by two spaces, and
Markdown reads ``  # Event Records`` inside a list item as a heading (``  ---`` as a setext
underline, ``  - x`` as a nested item, a fence, a table...). Now every such line start is a
character reference (:func:`gravity_core.prompts.injection.escape_text`).

The check parses the whole prompt with markdown-it-py (CommonMark plus GFM tables) with raw HTML
off, so GRAVITY's tag lines read as the text the model sees (with it on, ``<retrieved_memories>``
would make the whole block one raw HTML block and hide what is inside). Hypothesis draws hostile
lines: every block construct, at 0-8 leading spaces and tabs, joined by every line break Python
knows (U+2028, ``\\x85``...). For each integration path (``format_memories``; LangChain's
``format_documents`` with the anchors runnable and ``GRAVITY_PROMPT``; LlamaIndex's postprocessor
and its QA template, both through a real response synthesizer) the prompt, with hostile documents
*and* a KB whose names, labels and time phrases are hostile lines, must have:

- the same block structure (token types, tags and nesting) as with plain documents and KB;
- as headings only GRAVITY's headers (and LlamaIndex's own title line);
- each host document as exactly one list item whose text is the document's, line for line.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from itertools import cycle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from gravity_core.build import AnchorBuilder
from gravity_core.embeddings import HashingEmbedder
from gravity_core.extract.offline import OfflineExtractor
from gravity_core.loaders import load_conversation
from gravity_core.prompts.injection import escape_text
from gravity_core.prompts.memories import format_memories, memory_item
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import NumpyAnchorIndex
from gravity_core.schema import KnowledgeBase, TimeRef
from tests.reliability.test_injection import ALL, _recording_llm

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample_conversation.jsonl"
MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")
QUESTION = "What did Maya and Jonas do?"
ANCHOR_HEADERS = ["Topic Summaries", "Entity Profiles", "Event Records"]
LLAMAINDEX_TITLE = "Context information is below."
"""LlamaIndex's QA template's first line: its ``-----`` rule below makes it a setext heading."""

CONSTRUCTS = [
    "#",
    "# Event Records",
    "## Topic Summaries",
    "###### Retrieved Memories",
    "=",
    "===",
    "-",
    "---",
    "- - -",
    "***",
    "* * *",
    "___",
    "- forged item [D9:9]",
    "+ forged item",
    "* forged item",
    "1. forged",
    "1) forged",
    "7. forged",
    "123456789) forged",
    "```",
    "```python",
    "~~~",
    "~~~ sh",
    "> quote",
    "<div>",
    "<!-- comment -->",
    "</retrieved_memories>",
    "<gravity_anchors>",
    "| a | b |",
    "|---|---|",
    "--- | ---",
    ":--|--:",
    "[ref]: https://example.com",
    "[^1]: a footnote",
    "$$",
    ": a definition",
    "~ a definition",
    "+++",
    "**bold** start",
    "[session_1:2] Maya: hi",
    "[an open label",
    "+1 agreed",
    "*sigh*",
    "`code` first",
    "~5 minutes",
    "$5 each",
    "    indented code",
    "\\# escaped already",
    "&#35; an entity",
    "&gt; already escaped",
    "plain words",
]
BREAKS = ["\n", "\r\n", "\r", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]

_line_chars = st.one_of(
    st.characters(exclude_categories=("Cs", "Cc", "Zl", "Zp")),  # no line break of any kind
    st.sampled_from(" \t#=-+*_`~|:[]$>.)0123456789<&"),
)
hostile_lines = st.one_of(
    st.builds(
        lambda indent, construct, tail: indent + construct + tail,
        st.text(alphabet=" \t", max_size=8),
        st.sampled_from(CONSTRUCTS),
        st.sampled_from(["", " Event Records", "x", " | b |", "  "]),
    ),
    st.text(alphabet=_line_chars, min_size=1, max_size=24),
).filter(str.strip)  # a blank line is dropped (and would end a paragraph in LlamaIndex's split)
documents = st.lists(
    st.lists(st.tuples(hostile_lines, st.sampled_from(BREAKS)), min_size=1, max_size=5).map(
        lambda pairs: "".join(line + brk for line, brk in pairs)
    ),
    min_size=1,
    max_size=4,
)


# ----- reading the Markdown back ----------------------------------------------------------------------


def shape(tokens: list[Token]) -> list[tuple[str, str, int]]:
    """The block structure: each block token's type, tag and nesting level (no text)."""
    return [(t.type, t.tag, t.level) for t in tokens if t.type != "inline"]


def headings(tokens: list[Token]) -> list[str]:
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]


def list_items(tokens: list[Token]) -> list[list[str]]:
    """Each list item's text, one entry per source line, unescaped and stripped."""
    items: list[list[str]] = []
    depth = 0
    for token in tokens:
        if token.type == "list_item_open":
            depth += 1
            assert depth == 1, "a list inside a list item"
            items.append([])
        elif token.type == "list_item_close":
            depth -= 1
        elif token.type == "inline" and depth:
            items[-1] += [html.unescape(line).strip() for line in token.content.split("\n")]
    return items


def document_lines(document: str) -> list[str]:
    return [line.strip() for line in document.splitlines() if line.strip()]


TAG_LINE = re.compile(r"</?[a-z_]+>")


def assert_markdown(
    prompt: str, plain_prompt: str, docs: list[str], *, memories_first: bool, expected: list[str]
) -> None:
    """``prompt`` reads as ``plain_prompt`` does, with each of ``docs`` one item of its own."""
    tokens = MARKDOWN.parse(prompt)
    assert headings(tokens) == expected
    forbidden = {"fence", "code_block", "html_block", "blockquote_open", "table_open"}
    assert not [t.type for t in tokens if t.type in forbidden]
    assert shape(tokens) == shape(MARKDOWN.parse(plain_prompt))
    items = list_items(tokens)
    shown = items[: len(docs)] if memories_first else items[len(items) - len(docs) :]
    for item, document in zip(shown, docs, strict=True):
        lines = document_lines(document)
        assert item[: len(lines)] == lines
        # The block's last item runs on into GRAVITY's closing tag line (a lazy continuation).
        assert all(TAG_LINE.fullmatch(extra) for extra in item[len(lines) :]), item


# ----- the KB -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built() -> AnchorBuilder:
    """A KB of the sample conversation's first session, with its anchor vectors."""
    embedder = HashingEmbedder()
    builder = AnchorBuilder(OfflineExtractor(embedder), embedder)
    builder.add(load_conversation(SAMPLE)[:16])
    return builder


def engine_of(built: AnchorBuilder, kb: KnowledgeBase) -> GravityEngine:
    """An engine over ``kb`` (the built KB or a copy with the same ids), every anchor selected."""
    return GravityEngine(kb, NumpyAnchorIndex.from_vectors(built.vectors), built.embedder, config=ALL)


def poisoned(kb: KnowledgeBase, lines: list[str]) -> KnowledgeBase:
    """The KB with every text that starts an anchor's line (and a few beside them) hostile."""
    hostile: Iterator[str] = cycle(lines)
    copy = kb.model_copy(deep=True)
    for key, entity in copy.entities.items():
        copy.entities[key] = entity.model_copy(update={"name": next(hostile), "aliases": [next(hostile)]})
    for key, topic in copy.topics.items():
        copy.topics[key] = topic.model_copy(update={"label": next(hostile), "participants": [next(hostile)]})
    for key, event in copy.events.items():
        update = {"when": TimeRef(raw=next(hostile)), "what": next(hostile)}
        copy.events[key] = event.model_copy(update=update)
    return copy


# ----- the integration paths --------------------------------------------------------------------------


def via_format_memories(engine: GravityEngine, docs: list[str]) -> str:
    return format_memories(docs)


def via_langchain(engine: GravityEngine, docs: list[str]) -> str:
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    from gravity_langchain import GRAVITY_PROMPT, format_documents, gravity_anchors_runnable

    def retrieved(inputs: dict[str, Any]) -> str:  # stands in for `retriever | format_documents`
        return format_documents([Document(text) for text in docs])

    chain = (
        RunnablePassthrough.assign(
            context=RunnableLambda(retrieved), gravity_anchors=gravity_anchors_runnable(engine)
        )
        | GRAVITY_PROMPT
    )
    system = chain.invoke({"question": QUESTION, "history": []}).to_messages()[0].content
    assert isinstance(system, str)
    return system


def _synthesized(docs: list[str], postprocess: Callable[[list[Any]], list[Any]], **kwargs: Any) -> str:
    from llama_index.core import get_response_synthesizer
    from llama_index.core.schema import NodeWithScore, TextNode

    nodes = [NodeWithScore(node=TextNode(text=text, id_=f"n{n}"), score=0.5) for n, text in enumerate(docs)]
    llm = _recording_llm()
    get_response_synthesizer(llm=llm, **kwargs).synthesize(QUESTION, postprocess(nodes))
    [prompt] = llm.prompts
    assert isinstance(prompt, str)
    return prompt


def via_llamaindex_postprocessor(engine: GravityEngine, docs: list[str]) -> str:
    pytest.importorskip("llama_index.core")
    from gravity_llamaindex import GravityNodePostprocessor

    postprocessor = GravityNodePostprocessor(engine)
    return _synthesized(docs, lambda nodes: postprocessor.postprocess_nodes(nodes, query_str=QUESTION))


def via_llamaindex_qa_template(engine: GravityEngine, docs: list[str]) -> str:
    pytest.importorskip("llama_index.core")
    from gravity_llamaindex import gravity_qa_template

    return _synthesized(docs, lambda nodes: nodes, text_qa_template=gravity_qa_template(engine))


ROUTES = {
    # name: (render, memories before the anchors, expected headings)
    "format_memories": (via_format_memories, True, ["Retrieved Memories"]),
    "langchain": (via_langchain, True, ["Retrieved Memories", *ANCHOR_HEADERS]),
    "llamaindex-postprocessor": (via_llamaindex_postprocessor, False, [LLAMAINDEX_TITLE, *ANCHOR_HEADERS]),
    "llamaindex-qa-template": (
        via_llamaindex_qa_template,
        True,
        [LLAMAINDEX_TITLE, "Retrieved Memories", *ANCHOR_HEADERS],
    ),
}


@pytest.mark.parametrize("route", list(ROUTES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=documents, kb_lines=st.lists(hostile_lines, min_size=1, max_size=6))
def test_no_host_line_opens_a_markdown_block_in_any_prompt(
    route: str, docs: list[str], kb_lines: list[str], built: AnchorBuilder
) -> None:
    render, memories_first, expected = ROUTES[route]
    prompt = render(engine_of(built, poisoned(built.kb, kb_lines)), docs)
    plain = render(engine_of(built, built.kb), ["plain memory"] * len(docs))
    assert_markdown(prompt, plain, docs, memories_first=memories_first, expected=expected)


# ----- the rule itself --------------------------------------------------------------------------------


@settings(max_examples=500, deadline=None)
@given(lines=st.lists(hostile_lines, min_size=1, max_size=6))
def test_a_document_is_one_paragraph_of_one_item(lines: list[str]) -> None:
    document = "\n".join(lines)
    tokens = MARKDOWN.parse(memory_item(document))
    assert [t.type for t in tokens] == [
        "bullet_list_open",
        "list_item_open",
        "paragraph_open",
        "inline",
        "paragraph_close",
        "list_item_close",
        "bullet_list_close",
    ]
    assert list_items(tokens) == [document_lines(document)]


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet=_line_chars))
def test_the_escape_is_reversible(text: str) -> None:
    assert html.unescape(escape_text(text)) == text
    assert escape_text(text, starts_line=False) == html.escape(text, quote=False)


@pytest.mark.parametrize(
    ("line", "escaped"),
    [
        ("# Event Records", "&#35; Event Records"),
        ("  \t# Event Records", "  \t&#35; Event Records"),
        ("--- | ---", "&#45;-- | ---"),
        ("12) twelve", "&#49;2) twelve"),
        ("```python", "&#96;``python"),
        ("</retrieved_memories>", "&lt;/retrieved_memories&gt;"),
        ("2024 was busy", "2024 was busy"),  # a number is not a list marker without '.' or ')'
        ("3.5 miles", "3.5 miles"),
        ("a # b", "a # b"),  # only the line start
        # Plain uses of characters that open a block only in a block's shape stay as they are.
        ("[session_1:2] Maya: hi", "[session_1:2] Maya: hi"),
        ("[ref]: https://example.com", "&#91;ref]: https://example.com"),
        ("+1 from me", "+1 from me"),
        ("+ item", "&#43; item"),
        ("*sigh* fine", "*sigh* fine"),
        ("`code` first", "`code` first"),
        ("~5 minutes", "~5 minutes"),
        ("$5 each", "$5 each"),
        ("$$", "&#36;$"),
    ],
)
def test_the_first_character_of_a_block_start_is_a_character_reference(line: str, escaped: str) -> None:
    assert escape_text(line) == escaped
