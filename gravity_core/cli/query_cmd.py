"""``gravity query KB_DIR "question"``: anchors, expanded queries and blocks for one question."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Annotated

import typer

from gravity_core.errors import ConfigurationError
from gravity_core.query.engine import GravityEngine
from gravity_core.query.index import ChromaAnchorIndex
from gravity_core.query.recipes import PRESETS


def _chroma_index(kb_dir: Path, path: Path | None, server: str | None) -> ChromaAnchorIndex | None:
    if path is not None and server is not None:
        raise ConfigurationError("give --chroma-path or --chroma-server, not both")
    name = kb_dir.resolve().name
    if path is not None:
        return ChromaAnchorIndex.persistent(path, name)
    if server is not None:
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigurationError(f"--chroma-server expects HOST:PORT, got {server!r}")
        return ChromaAnchorIndex.server(host, int(port), name)
    return None


def query(
    kb_dir: Annotated[Path, typer.Argument(metavar="KB_DIR", help="KB folder written by 'gravity build'.")],
    question: Annotated[str, typer.Argument(metavar="QUESTION", help="The question to find anchors for.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    preset: Annotated[
        str, typer.Option(metavar="NAME", help=f"Settings preset: {', '.join(PRESETS)}.")
    ] = "full",
    question_date: Annotated[
        str | None,
        typer.Option(
            "--date",
            metavar="YYYY-MM-DD",
            help="Date the question is asked (YYYY-MM-DD); default: the KB's last day.",
        ),
    ] = None,
    token_budget: Annotated[
        int | None, typer.Option(min=1, metavar="N", help="Token budget of the blocks (cl100k).")
    ] = None,
    chroma_path: Annotated[
        Path | None,
        typer.Option(metavar="DIR", help="Search the anchors in an embedded Chroma database in this folder."),
    ] = None,
    chroma_server: Annotated[
        str | None,
        typer.Option(
            metavar="HOST:PORT", help="Search the anchors in a Chroma server (shared by processes)."
        ),
    ] = None,
) -> None:
    """Select anchors for a question and print the expansions and the prompt blocks (no model call)."""
    if preset not in PRESETS:
        raise ConfigurationError(f"unknown preset '{preset}' (known: {', '.join(PRESETS)})")
    config = PRESETS[preset]
    if token_budget is not None:
        config = config.model_copy(update={"token_budget": token_budget})
    try:
        asked = date.fromisoformat(question_date) if question_date else None
    except ValueError as exc:
        raise ConfigurationError(f"--date expects YYYY-MM-DD, got {question_date!r}") from exc
    engine = GravityEngine.from_dir(kb_dir, index=_chroma_index(kb_dir, chroma_path, chroma_server))
    context = engine.query(question, config=config, question_date=asked)
    if as_json:
        typer.echo(json.dumps(context.to_dict(), indent=2, ensure_ascii=False))
        return
    typer.echo(context.text)
    if context.expansions:
        typer.echo("\nExpanded queries:")
        for expansion in context.expansions:
            typer.echo(f"  - {expansion}")
    typer.echo(f"\n{len(context.anchors)} anchors, {context.tokens} tokens")
