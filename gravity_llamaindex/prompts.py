"""The template route: a QA prompt with a ``{gravity_anchors}`` slot filled per query.

The templates also escape what fills ``{context_str}``: the retrieved nodes' LLM text, joined by
LlamaIndex, becomes a ``<retrieved_memories>`` block with one ``- `` item per paragraph and ``&``,
``<``, ``>`` escaped, as LangChain's ``format_documents`` does (one function,
:mod:`gravity_core.prompts.memories`). This route sees only the joined string, not the nodes, so
the escaping is done here and the nodes themselves (``response.source_nodes``) are untouched.
Use it *instead of* :class:`~gravity_llamaindex.GravityNodePostprocessor`, not with it: together
the anchors would be shown twice and the nodes escaped twice.
"""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.prompts import PromptTemplate, PromptType
from llama_index.core.prompts.mixin import PromptMixin

from gravity_core.errors import ConfigurationError
from gravity_core.prompts.injection import ANCHORS_TAG
from gravity_core.prompts.memories import format_memories
from gravity_llamaindex.provider import AnchorProvider, EngineLike, as_provider

__all__ = [
    "ANCHORS_VAR",
    "CONTEXT_VAR",
    "GRAVITY_QA_TEMPLATE",
    "GRAVITY_QA_TEMPLATE_TMPL",
    "QA_TEMPLATE_KEY",
    "gravity_qa_template",
    "install_gravity_qa_template",
]

logger = logging.getLogger(__name__)

QA_TEMPLATE_KEY = "text_qa_template"
"""The prompt key of LlamaIndex's question-answering template."""

ANCHORS_VAR = ANCHORS_TAG
"""The template variable that receives the anchors: ``{gravity_anchors}``."""

CONTEXT_VAR = "context_str"
"""The template variable LlamaIndex fills with the retrieved nodes' text; GRAVITY's templates escape it."""

GRAVITY_QA_TEMPLATE_TMPL = (
    "Context information is below.\n"
    "---------------------\n"
    "{context_str}\n"
    "---------------------\n"
    "{" + ANCHORS_VAR + "}\n"
    "---------------------\n"
    "Given the context information and not prior knowledge, answer the query.\n"
    "Query: {query_str}\n"
    "Answer: "
)
"""LlamaIndex's default QA prompt with GRAVITY's slot after the retrieved memories.

The slot receives ``AnchorContext.text`` as gravity_core renders it
(:mod:`gravity_core.prompts.injection`): the priority instruction (retrieved memories are the primary
truth, anchors supplementary), then the topic, entity and event blocks inside ``<gravity_anchors>``.
The instruction comes with the anchors, so it is absent when there are none and matches the engine's
mode (the '+Sum' baseline has its own wording).
"""


def _paragraphs(text: str) -> list[str]:
    """``text`` cut at its blank lines (LlamaIndex joins the nodes' texts with one)."""
    paragraphs: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.strip():
            current.append(line)
        elif current:
            paragraphs.append("\n".join(current))
            current = []
    if current:
        paragraphs.append("\n".join(current))
    return paragraphs


def escaped_context(**kwargs: Any) -> str:
    """The ``function_mappings`` entry of ``{context_str}``: the retrieved text as an escaped block.

    LlamaIndex calls it with the template variables; ``context_str`` is the nodes' LLM text joined
    by blank lines (possibly one of several chunks, when it is packed into more than one prompt). It
    returns the ``<retrieved_memories>`` block of one item per paragraph, or ``""`` for no text.
    """
    context = kwargs.get(CONTEXT_VAR)
    if not isinstance(context, str):
        return ""
    return format_memories(_paragraphs(context))


GRAVITY_QA_TEMPLATE = PromptTemplate(
    GRAVITY_QA_TEMPLATE_TMPL,
    prompt_type=PromptType.QUESTION_ANSWER,
    function_mappings={CONTEXT_VAR: escaped_context},
)
"""The template with ``{gravity_anchors}``, ``{context_str}`` and ``{query_str}`` unfilled.

``{context_str}`` is escaped when formatted (:func:`escaped_context`).

Fill the slot per query with :func:`gravity_qa_template`, or statically with
``GRAVITY_QA_TEMPLATE.partial_format(gravity_anchors=context.text)``.
"""


class _AnchorsSlot:
    """The ``function_mappings`` entry: LlamaIndex calls it with the other template variables.

    In COMPACT mode the template is formatted up to three times per query (two size estimates and
    the real prompt); the provider's cache, keyed by ``query_str``, makes it one engine call.
    """

    def __init__(self, provider: AnchorProvider) -> None:
        self.provider = provider

    def __deepcopy__(self, memo: dict[int, Any]) -> _AnchorsSlot:
        # PromptTemplate.partial_format deep-copies the template: share the provider, do not copy the KB.
        return self

    def __call__(self, **kwargs: Any) -> str:
        question = kwargs.get("query_str")
        if not isinstance(question, str) or not question.strip():
            logger.debug("template formatted without query_str: the anchors slot stays empty")
            return ""
        return self.provider.get(question).text


def gravity_qa_template(engine: EngineLike, template: str = GRAVITY_QA_TEMPLATE_TMPL) -> PromptTemplate:
    """A QA template whose ``{gravity_anchors}`` is filled with the anchors for each query.

    Its ``{context_str}`` is escaped into a ``<retrieved_memories>`` block (:func:`escaped_context`),
    so a retrieved node cannot forge a block or close a tag; the nodes themselves are not changed.

    Pass it at build time (``index.as_query_engine(text_qa_template=...)``,
    ``RetrieverQueryEngine.from_args(..., text_qa_template=...)``) or use
    :func:`install_gravity_qa_template` on an existing query engine. LlamaIndex formats templates
    synchronously, so in ``aquery`` the engine runs on the event loop (a few milliseconds) unless a
    component sharing the provider (fusion retriever, postprocessor) already answered the question.

    LlamaIndex formats the template with ``query_str`` and ``context_str`` only, never the query
    bundle, so the template cannot tell users apart: for a query engine serving many users, put
    ``GravityNodePostprocessor(users=...)`` in ``node_postprocessors`` instead.

    Args:
        engine: a GRAVITY engine, or an :class:`AnchorProvider` shared with the other components.
        template: your own template text; it must contain ``{gravity_anchors}``, ``{context_str}``
            and ``{query_str}``.

    Raises:
        ConfigurationError: a variable is missing from ``template``, or ``engine`` is a provider
            of many users (``AnchorProvider(users=...)``).
    """
    provider = as_provider(engine)
    if provider.users is not None:
        raise ConfigurationError(
            "the QA template is formatted without the query bundle, so it cannot tell users apart: "
            "with users=, put GravityNodePostprocessor(users=...) in node_postprocessors instead"
        )
    prompt = PromptTemplate(
        template,
        prompt_type=PromptType.QUESTION_ANSWER,
        function_mappings={ANCHORS_VAR: _AnchorsSlot(provider), CONTEXT_VAR: escaped_context},
    )
    missing = {ANCHORS_VAR, CONTEXT_VAR, "query_str"} - set(prompt.template_vars)
    if missing:
        raise ConfigurationError(f"the QA template lacks the variables {sorted(missing)}")
    return prompt


def _qa_template_owners(component: PromptMixin, path: str = "") -> list[tuple[str, PromptMixin]]:
    """``(key prefix, component)`` for every component under ``component`` that owns a QA template."""
    found: list[tuple[str, PromptMixin]] = []
    if QA_TEMPLATE_KEY in component._get_prompts():
        found.append((path, component))
    for name, module in component._get_prompt_modules().items():
        if isinstance(module, PromptMixin):
            found.extend(_qa_template_owners(module, f"{path}{name}:"))
    return found


def install_gravity_qa_template(
    query_engine: PromptMixin, engine: EngineLike, template: str = GRAVITY_QA_TEMPLATE_TMPL
) -> list[str]:
    """Replace every ``text_qa_template`` under ``query_engine`` with :func:`gravity_qa_template`.

    Works through wrappers: on ``index.as_query_engine()`` the key is
    ``response_synthesizer:text_qa_template``; inside a ``TransformQueryEngine`` it is
    ``query_engine:response_synthesizer:text_qa_template`` (such nested keys cannot be passed to
    ``update_prompts`` in llama-index-core 0.14, so the template is set on the synthesizer itself).

    Args:
        query_engine: any LlamaIndex component with prompts (query engine, synthesizer).
        engine: a GRAVITY engine, or a shared :class:`AnchorProvider`.
        template: your own template text (see :func:`gravity_qa_template`).

    Returns:
        The prompt keys that were replaced, as ``query_engine.get_prompts()`` names them.

    Raises:
        ConfigurationError: ``query_engine`` has no ``text_qa_template``.
    """
    prompt = gravity_qa_template(engine, template)
    owners = _qa_template_owners(query_engine)
    if not owners:
        raise ConfigurationError(f"{type(query_engine).__name__} has no {QA_TEMPLATE_KEY} to replace")
    for _, owner in owners:
        owner.update_prompts({QA_TEMPLATE_KEY: prompt})
    return [f"{path}{QA_TEMPLATE_KEY}" for path, _ in owners]
