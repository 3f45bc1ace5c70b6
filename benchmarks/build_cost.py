"""Benchmark 3: model calls and tokens of an LLM build, against LangChain's ConversationEntityMemory.

Every sample of the LoCoMo file is built into its own KB with ``LLMExtractor`` (three-module and
fused) at each batch size, with a counting fake model (:mod:`benchmarks.fakes`); anchors are
embedded with the hashing embedder (the encoder is not what is counted here). Side by side,
``langchain_classic.memory.ConversationEntityMemory`` is fed the same turns as its chain would:
turn pairs as (input, output), ``load_memory_variables`` then ``save_context`` per pair, with the
same fake answering through a LangChain ``FakeListChatModel``.

The conversation's own tokens are the cl100k tokens of every turn as ``speaker: text``. The targets
are for the fused build at the default batch size (40 turns, batches filled across sessions); the
other batch sizes are reported without one.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from functools import partial
from typing import Any

from benchmarks.common import BenchSettings, Result, ratio, timed
from benchmarks.fakes import TokenMeter
from benchmarks.workspace import Workspace, turn_text
from gravity_core.build.builder import DEFAULT_BATCH_SIZE, AnchorBuilder
from gravity_core.embeddings.hashing import HashingEmbedder
from gravity_core.extract.llm import LLMExtractor
from gravity_core.loaders.locomo import load_locomo, locomo_sample_ids
from gravity_core.prompts import FusedExtraction
from gravity_core.prompts.context import render_schema
from gravity_core.prompts.outline import render_outline
from gravity_core.schema import Utterance
from gravity_core.text.tokens import TokenCounter

__all__ = ["CALLS_TARGET", "PROMPT_TARGET", "TARGET_BATCH", "run"]

logger = logging.getLogger(__name__)

#: Targets of the fused build at :data:`TARGET_BATCH` (issue #18): calls per utterance, and prompt
#: tokens over the conversation's own.
CALLS_TARGET = 0.03
PROMPT_TARGET = 2.0
TARGET_BATCH = 40


def run(settings: BenchSettings, workspace: Workspace) -> Result:
    """Count calls and tokens of every build mode and batch size, and of ConversationEntityMemory."""
    result = Result(
        name="build_cost",
        title="3. Build cost in model calls and tokens (counting fake model)",
        sides={
            "gravity": "LLMExtractor (3 modules, or fused) through AnchorBuilder, one KB per sample, "
            "a FakeChatModel answering valid JSON that cites the batch's utterance ids",
            "entity_memory": "langchain-classic ConversationEntityMemory: load_memory_variables + "
            "save_context per turn pair, the same fake through a FakeListChatModel",
        },
    )
    counter = TokenCounter()
    samples = _samples(settings)
    utterances = sum(len(turns) for turns in samples.values())
    own_tokens = sum(counter.count(turn_text(u)) for turns in samples.values() for u in turns)
    rows: dict[str, Any] = {}
    for batch in settings.batch_sizes:
        for fused in (False, True):
            meter = TokenMeter(counter)
            failed, seconds = timed(partial(_gravity_build, samples, meter, fused=fused, batch=batch))
            mode = "fused" if fused else "modules"
            rows[f"{mode}@{batch}"] = {
                **meter.summary(utterances),
                "prompt_over_conversation": round(meter.prompt_tokens / own_tokens, 3),
                "failed_batches": failed,
                "seconds": round(seconds, 2),
            }
    memory_meter = TokenMeter(counter)
    _, memory_seconds = timed(lambda: _entity_memory(samples, memory_meter))
    rows["ConversationEntityMemory"] = {
        **memory_meter.summary(utterances),
        "prompt_over_conversation": round(memory_meter.prompt_tokens / own_tokens, 3),
        "seconds": round(memory_seconds, 2),
    }
    result.figures = {
        "samples": list(samples),
        "utterances": utterances,
        "conversation_tokens": own_tokens,
        # The outline is what the fused prompt shows; the JSON schema only goes to providers that
        # hold the model to it (structured output), outside the prompt text.
        "fused_outline_tokens": counter.count(render_outline(FusedExtraction)),
        "fused_json_schema_tokens": counter.count(render_schema(FusedExtraction)),
        "builds": rows,
    }
    memory_calls = rows["ConversationEntityMemory"]["calls_per_utterance"]
    for batch in settings.batch_sizes:
        fused = rows[f"fused@{batch}"]
        modules = rows[f"modules@{batch}"]
        targeted = batch == TARGET_BATCH
        at = f"batch {batch} (the targets' batch)" if targeted else f"batch {batch}"
        result.ratios += [
            ratio(
                f"fused calls per utterance, {at}",
                fused["calls_per_utterance"],
                CALLS_TARGET if targeted else None,
            ),
            ratio(
                f"fused prompt tokens / conversation tokens, {at}",
                fused["prompt_over_conversation"],
                PROMPT_TARGET if targeted else None,
            ),
            ratio(f"3-module calls per utterance, batch {batch}", modules["calls_per_utterance"], None),
            ratio(
                f"3-module prompt tokens / conversation tokens, batch {batch}",
                modules["prompt_over_conversation"],
                None,
            ),
        ]
    default = rows.get(f"fused@{DEFAULT_BATCH_SIZE}") or rows[f"fused@{settings.batch_sizes[0]}"]
    result.ratios += [
        ratio("ConversationEntityMemory calls per utterance", memory_calls, None),
        ratio(
            "ConversationEntityMemory prompt tokens / conversation tokens",
            rows["ConversationEntityMemory"]["prompt_over_conversation"],
            None,
        ),
        ratio(
            "fused GRAVITY calls / ConversationEntityMemory calls (default batch)",
            default["calls"] / max(rows["ConversationEntityMemory"]["calls"], 1),
            None,
        ),
    ]
    if any(r["met"] is False for r in result.ratios):
        result.profiles["fused prompt tokens (default batch), by part"] = _token_profile(default)
    return result


def _samples(settings: BenchSettings) -> dict[str, list[Utterance]]:
    ids = settings.build_samples or tuple(locomo_sample_ids(settings.locomo))
    return {sample: load_locomo(settings.locomo, sample) for sample in ids}


def _gravity_build(samples: dict[str, list[Utterance]], meter: TokenMeter, *, fused: bool, batch: int) -> int:
    """Build every sample into its own in-memory KB; returns the failed batches (0 expected)."""
    model = meter.gravity_model()
    failed = 0
    for turns in samples.values():
        builder = AnchorBuilder(LLMExtractor(model, fused=fused), HashingEmbedder(), batch_size=batch)
        failed += builder.add(turns).failed_batches
    if len(model.calls) != meter.calls:
        raise AssertionError(f"the fake model saw {len(model.calls)} calls, the meter {meter.calls}")
    return failed


def _entity_memory(samples: dict[str, list[Utterance]], meter: TokenMeter) -> None:
    """Feed each sample's turns to a fresh ConversationEntityMemory, in (input, output) pairs."""
    # Imported first: importing LangChain installs its own "default" filter for its deprecations.
    from langchain_classic.memory import ConversationEntityMemory

    with warnings.catch_warnings():
        # ConversationEntityMemory and its stores are deprecated: that is the point of the comparison.
        warnings.simplefilter("ignore", DeprecationWarning)
        llm = meter.langchain_model()
        for turns in samples.values():
            memory = ConversationEntityMemory(llm=llm)
            for said, answer in _pairs(turns):
                memory.load_memory_variables({"input": said})
                memory.save_context({"input": said}, {"output": answer})


def _pairs(turns: Sequence[Utterance]) -> list[tuple[str, str]]:
    texts = [turn_text(u) for u in turns]
    return [(texts[i], texts[i + 1] if i + 1 < len(texts) else "") for i in range(0, len(texts), 2)]


def _token_profile(row: dict[str, Any]) -> list[dict[str, Any]]:
    total = max(row["prompt_tokens"], 1)
    parts = (
        (
            "instructions, guidelines and schema outline (repeated every call)",
            row["prompt_instruction_tokens"],
        ),
        (
            "the batch's turns as rendered ([id] speaker: text, a header per session)",
            row["prompt_conversation_tokens"],
        ),
        ("known entities and topics", row["prompt_known_tokens"]),
    )
    return [{"function": what, "share": round(tokens / total, 4), "tokens": tokens} for what, tokens in parts]
