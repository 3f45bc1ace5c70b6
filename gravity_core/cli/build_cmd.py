"""``gravity build INPUT -o KB_DIR``: build or extend a KB from a conversation file."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gravity_core.build.builder import DEFAULT_BATCH_SIZE, AnchorBuilder
from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError
from gravity_core.extract.base import Extractor
from gravity_core.loaders import load_conversation
from gravity_core.providers import load_chat_model, load_embedder
from gravity_core.stats import kb_stats
from gravity_core.store import AnchorStore


class ExtractorKind(StrEnum):
    OFFLINE = "offline"
    LLM = "llm"


def _extractor(
    kind: ExtractorKind, model: str | None, fused: bool, store: AnchorStore, embedder: Embedder
) -> Extractor:
    if kind is ExtractorKind.OFFLINE:
        if model:
            raise ConfigurationError("--model is for --extractor llm; the offline extractor uses no model")
        from gravity_core.extract.offline import OfflineExtractor

        return OfflineExtractor(embedder)
    if not model:
        raise ConfigurationError(
            "--extractor llm needs --model provider:name, e.g. --model openai:gpt-4o-mini"
        )
    from gravity_core.extract.llm import LLMExtractor
    from gravity_core.llm.cache import ResponseCache

    return LLMExtractor(load_chat_model(model), fused=fused, cache=ResponseCache(store.cache_dir))


def build(
    input_path: Annotated[
        Path, typer.Argument(metavar="INPUT", help="LoCoMo, LongMemEval or utterance JSON/JSONL.")
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="KB folder to create or extend.")],
    sample: Annotated[
        str | None, typer.Option(help="LoCoMo sample id (e.g. conv-26) or LongMemEval question id.")
    ] = None,
    extractor: Annotated[
        ExtractorKind, typer.Option(help="offline (no model) or llm.")
    ] = ExtractorKind.OFFLINE,
    model: Annotated[
        str | None, typer.Option(help="Chat model for --extractor llm, as provider:name.")
    ] = None,
    fused: Annotated[
        bool, typer.Option("--fused/--modules", help="LLM: one call per batch, or one per module.")
    ] = True,
    batch_size: Annotated[
        int, typer.Option(min=1, help="Utterances per extractor call.")
    ] = DEFAULT_BATCH_SIZE,
    embedder: Annotated[str, typer.Option(help="minilm (offline default) or hashing[:DIM].")] = "minilm",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Build a KB of entity, event and topic anchors; run again to add new utterances only."""
    utterances = load_conversation(input_path, sample=sample)
    store = AnchorStore(output)
    anchor_embedder = load_embedder(embedder)
    builder = AnchorBuilder(
        _extractor(extractor, model, fused, store, anchor_embedder),
        anchor_embedder,
        batch_size=batch_size,
        store=store,
    )
    console = Console(stderr=True, quiet=quiet)
    columns = (
        TextColumn("building"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("utterances"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("build", total=None)
        report = builder.add(
            utterances, progress=lambda done, total: bar.update(task, completed=done, total=total)
        )
    counts = kb_stats(builder.kb)
    console.print(
        f"{output}: +{report.added} utterances ({report.skipped} already in the KB), "
        f"{counts['entities']} entities, {counts['events']} events, {counts['topics']} topics"
        + (f", {report.failed_batches} failed batch(es)" if report.failed_batches else ""),
        soft_wrap=True,
    )
