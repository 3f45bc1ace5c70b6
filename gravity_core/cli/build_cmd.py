"""``gravity build INPUT -o KB_DIR``: build or extend a KB from a conversation file.

``--retry-failed`` redoes only the batches recorded as failed; ``--rollback`` makes the previous
generation of a damaged KB current again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gravity_core.build.builder import DEFAULT_BATCH_SIZE, AnchorBuilder, BuildReport, ProgressCallback
from gravity_core.build.stats import kb_stats
from gravity_core.cli._inputs import check_output_folder, load_input
from gravity_core.embeddings.base import Embedder
from gravity_core.errors import ConfigurationError
from gravity_core.extract.base import Extractor
from gravity_core.llm.base import ChatModel
from gravity_core.llm.retry import DEFAULT_MAX_CONCURRENCY, RetryPolicy
from gravity_core.loaders import DEFAULT_MAX_INPUT_BYTES
from gravity_core.providers import load_chat_model, load_embedder
from gravity_core.storage.store import AnchorStore


class ExtractorKind(StrEnum):
    """The extractor ``--extractor`` names: the offline pipeline (no model) or a chat model."""

    OFFLINE = "offline"
    LLM = "llm"


def _chat_model(
    kind: ExtractorKind, model: str | None, retry: RetryPolicy, max_concurrency: int
) -> ChatModel | None:
    """The model of ``--extractor llm``, created (API key checked) before anything is read or written."""
    if kind is ExtractorKind.OFFLINE:
        if model:
            raise ConfigurationError("--model is for --extractor llm; the offline extractor uses no model")
        return None
    if not model:
        raise ConfigurationError(
            "--extractor llm needs --model PROVIDER:NAME, e.g. --model openai:gpt-4o-mini"
        )
    return load_chat_model(model, retry=retry, max_concurrency=max_concurrency)


def _extractor(
    chat: ChatModel | None, fused: bool, store: AnchorStore, embedder: Embedder, max_concurrency: int
) -> Extractor:
    from gravity_core.extract.choice import make_extractor

    return make_extractor(
        embedder, chat_model=chat, cache_dir=store.cache_dir, fused=fused, max_concurrency=max_concurrency
    )


_DEFAULT_RETRY = RetryPolicy()


def build(
    output: Annotated[
        Path, typer.Option("-o", "--output", metavar="KB_DIR", help="KB folder to create or extend.")
    ],
    input_path: Annotated[
        Path | None,
        typer.Argument(
            metavar="INPUT",
            help="LoCoMo, LongMemEval or utterance JSON/JSONL (optional with --retry-failed).",
        ),
    ] = None,
    sample: Annotated[
        str | None,
        typer.Option(metavar="ID", help="LoCoMo sample id (e.g. conv-26) or LongMemEval question id."),
    ] = None,
    extractor: Annotated[
        ExtractorKind, typer.Option(metavar="offline|llm", help="offline (no model) or llm.")
    ] = ExtractorKind.OFFLINE,
    model: Annotated[
        str | None, typer.Option(metavar="PROVIDER:NAME", help="Chat model for --extractor llm.")
    ] = None,
    fused: Annotated[
        bool, typer.Option("--fused/--modules", help="LLM: one call per batch, or one per module.")
    ] = True,
    batch_size: Annotated[
        int, typer.Option(min=1, metavar="N", help="Utterances per extractor call.")
    ] = DEFAULT_BATCH_SIZE,
    embedder: Annotated[
        str, typer.Option(metavar="NAME", help="minilm (offline default) or hashing[:DIM].")
    ] = "minilm",
    retry_failed: Annotated[
        bool,
        typer.Option(
            "--retry-failed", help="Redo only the batches recorded as failed (then add INPUT's new turns)."
        ),
    ] = False,
    rollback: Annotated[
        bool,
        typer.Option("--rollback", help="Make the previous generation of a damaged KB current, then stop."),
    ] = False,
    retry_attempts: Annotated[
        int,
        typer.Option(
            min=1, metavar="N", help="LLM: requests per call on rate limits, timeouts and connection errors."
        ),
    ] = _DEFAULT_RETRY.max_attempts,
    max_concurrency: Annotated[
        int,
        typer.Option(
            min=1, metavar="N", help="LLM: model requests in flight at once (--modules sends them together)."
        ),
    ] = DEFAULT_MAX_CONCURRENCY,
    max_input_mb: Annotated[
        int,
        typer.Option(
            min=1, metavar="N", help="Refuse an INPUT larger than this many MiB (read stops there)."
        ),
    ] = DEFAULT_MAX_INPUT_BYTES // 2**20,
    full_generations: Annotated[
        bool,
        typer.Option(
            "--full-generations",
            help="Save the KB whole, sharing no file with earlier saves (default: an add saves what changed "
            "and links the rest).",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Build a KB of entity, event and topic anchors; run again to add new utterances only."""
    store = AnchorStore(output, delta_share=0) if full_generations else AnchorStore(output)
    console = Console(stderr=True, quiet=quiet)
    if rollback:
        if input_path is not None or retry_failed:
            raise ConfigurationError("--rollback takes only -o KB_DIR")
        generation = store.rollback()
        console.print(f"{output}: generation {generation} is current again", soft_wrap=True)
        return
    if input_path is None and not retry_failed:
        raise ConfigurationError("INPUT is required (unless --retry-failed or --rollback)")
    check_output_folder(output, "KB")
    if retry_failed and not store.exists():
        raise ConfigurationError(f"--retry-failed needs an existing KB; {output} holds none")
    if retry_failed and extractor is ExtractorKind.OFFLINE:
        built_with = store.load().kb.build.extractor
        if built_with.startswith("llm:"):
            model_name = built_with.removeprefix("llm:").rsplit(":", 1)[0]
            raise ConfigurationError(
                f"this KB was built with {built_with}: retry with --extractor llm --model {model_name}"
            )
    # Cheapest checks first: the model (and its API key), then the input, then the embedder.
    chat = _chat_model(extractor, model, RetryPolicy(max_attempts=retry_attempts), max_concurrency)
    utterances = (
        load_input(input_path, sample, max_bytes=max_input_mb * 2**20) if input_path is not None else None
    )
    anchor_embedder = load_embedder(embedder)
    builder = AnchorBuilder(
        _extractor(chat, fused, store, anchor_embedder, max_concurrency),
        anchor_embedder,
        batch_size=batch_size,
        store=store,
    )
    retried: BuildReport | None = None
    report: BuildReport | None = None
    with _progress_bar(console) as show:
        if retry_failed:
            retried = builder.retry_failed(progress=show("retrying"))
        if utterances is not None:
            report = builder.add(utterances, progress=show("building"))
    counts = kb_stats(builder.kb)
    parts: list[str] = []
    if retried is not None:
        parts.append(
            f"retried {retried.batches} failed batch(es): {retried.recovered_batches} recovered, "
            f"{retried.failed_batches} still failing"
        )
    if report is not None:
        parts.append(f"+{report.added} utterances ({report.skipped} already in the KB)")
    parts.append(f"{counts['entities']} entities, {counts['events']} events, {counts['topics']} topics")
    if counts["failed_batches"]:
        parts.append(f"{counts['failed_batches']} failed batch(es) in the build log")
    console.print(f"{output}: " + ", ".join(parts), soft_wrap=True)
    if counts["failed_batches"]:
        console.print(
            f"see 'gravity stats {output}'; redo them with 'gravity build -o {output} --retry-failed' "
            "and the same --extractor/--model/--embedder",
            soft_wrap=True,
        )


@contextmanager
def _progress_bar(console: Console, unit: str = "utterances") -> Iterator[Callable[[str], ProgressCallback]]:
    """One progress bar: ``show(label)`` adds a task to it and returns the callback that advances it.

    The bar counts ``unit``; the callback takes ``(done, total)``.
    """
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:

        def show(label: str) -> ProgressCallback:
            task = bar.add_task(label, total=None)
            return lambda done, total: bar.update(task, completed=done, total=total)

        yield show
