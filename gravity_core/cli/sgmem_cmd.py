"""``gravity sgmem build|query``: build (or extend) an SGMem index and query it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gravity_core.cli._inputs import check_output_folder, load_input
from gravity_core.errors import AnchorStoreError, ConfigurationError
from gravity_core.llm.cache import ResponseCache
from gravity_core.providers import load_chat_model, load_embedder
from gravity_core.sgmem.config import ChunkGranularity, GraphConfig
from gravity_core.sgmem.index import SGMem
from gravity_core.sgmem.persist import MANIFEST
from gravity_core.storage.os_errors import os_errors

__all__ = ["build", "make_sgmem_app", "query"]


def make_sgmem_app() -> typer.Typer:
    """The ``sgmem`` sub-application: ``build`` and ``query``."""
    app = typer.Typer(
        name="sgmem",
        help="Build and query SGMem sentence-graph memories (a host memory GRAVITY can sit on).",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    app.command("build")(build)
    app.command("query")(query)
    return app


def build(
    input_path: Annotated[
        Path, typer.Argument(metavar="INPUT", help="LoCoMo, LongMemEval or utterance JSON/JSONL.")
    ],
    output: Annotated[
        Path, typer.Option("-o", "--output", metavar="SGMEM_DIR", help="SGMem folder to create or extend.")
    ],
    sample: Annotated[
        str | None,
        typer.Option(metavar="ID", help="LoCoMo sample id (e.g. conv-26) or LongMemEval question id."),
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            metavar="NAME", help="minilm (offline default) or hashing[:DIM]; an existing index keeps its own."
        ),
    ] = None,
    k: Annotated[
        int | None, typer.Option(min=1, metavar="N", help="Graph neighbours per sentence (default 5).")
    ] = None,
    gamma: Annotated[
        float | None,
        typer.Option(min=-1.0, max=1.0, metavar="X", help="Minimum cosine of a graph edge (default 0.5)."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            metavar="PROVIDER:NAME", help="Chat model that writes session summaries, facts and insights."
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary line.")] = False,
) -> None:
    """Build an SGMem index; run again to add new utterances only (no rebuild)."""
    check_output_folder(output, "SGMem")
    memory_model = load_chat_model(model) if model else None  # its API key is checked before any read
    utterances = load_input(input_path, sample)
    cache = ResponseCache(output / "cache") if memory_model is not None else None
    with os_errors(output, kind="SGMem folder", action="read"):
        existing = (output / MANIFEST).exists()
    if existing:
        memory = SGMem.load(
            output,
            load_embedder(embedder) if embedder else None,
            memory_model=memory_model,
            memory_cache=cache,
        )
        stored = memory.graph_config
        if (k is not None and k != stored.k) or (gamma is not None and gamma != stored.gamma):
            raise ConfigurationError(
                f"{output} was built with k={stored.k}, gamma={stored.gamma}; "
                "graph settings cannot change (build into a new folder)"
            )
    else:
        defaults = GraphConfig()
        graph = GraphConfig(
            k=k if k is not None else defaults.k, gamma=gamma if gamma is not None else defaults.gamma
        )
        memory = SGMem(
            load_embedder(embedder or "minilm"), graph=graph, memory_model=memory_model, memory_cache=cache
        )
    report = memory.add(utterances)
    if report.added or report.memories or not existing:
        memory.save(output)
    counts = memory.stats()
    Console(stderr=True, quiet=quiet).print(
        f"{output}: +{report.added} utterances ({report.skipped} already in the index), "
        f"{counts['sessions']} sessions, {counts['rounds']} rounds, {counts['sentences']} sentences, "
        f"{counts['edges']} edges, {counts['memories']} memories"
        + (
            f", memories failed for {len(report.failed_sessions)} session(s)"
            if report.failed_sessions
            else ""
        ),
        soft_wrap=True,
    )


def query(
    index_dir: Annotated[
        Path, typer.Argument(metavar="SGMEM_DIR", help="SGMem folder written by 'gravity sgmem build'.")
    ],
    question: Annotated[str, typer.Argument(metavar="QUESTION", help="The question.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    granularity: Annotated[
        ChunkGranularity, typer.Option(metavar="turn|round|session", help="Chunks returned.")
    ] = ChunkGranularity.TURN,
    token_budget: Annotated[
        int | None,
        typer.Option(
            "--budget", min=1, metavar="N", help="cl100k tokens of the returned texts (default 1000)."
        ),
    ] = None,
    hops: Annotated[
        int | None, typer.Option(min=0, metavar="N", help="Graph hops (0: plain vector search).")
    ] = None,
    max_chunks: Annotated[
        int | None, typer.Option(min=1, metavar="N", help="At most this many chunks.")
    ] = None,
) -> None:
    """Retrieve the chunks and memories for a question (no model call)."""
    if not index_dir.exists():
        raise AnchorStoreError("no such folder", path=str(index_dir))
    memory = SGMem.load(index_dir)
    result = memory.retrieve(
        question, token_budget=token_budget, granularity=granularity, hops=hops, max_chunks=max_chunks
    )
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return
    typer.echo(result.text)
    typer.echo(
        f"\n{len(result.chunks)} {granularity.value} chunks, {len(result.memories)} memories, "
        f"{result.tokens} tokens"
    )
