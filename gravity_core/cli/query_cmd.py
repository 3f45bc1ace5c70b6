"""``gravity query KB_DIR "question"``: anchors, expanded queries and blocks for one question."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Annotated

import typer

from gravity_core.errors import ConfigurationError
from gravity_core.query.engine import GravityEngine
from gravity_core.recipes import PRESETS


def query(
    kb_dir: Annotated[Path, typer.Argument(help="KB folder written by 'gravity build'.")],
    question: Annotated[str, typer.Argument(help="The question to find anchors for.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    preset: Annotated[str, typer.Option(help=f"Settings preset: {', '.join(PRESETS)}.")] = "full",
    question_date: Annotated[
        str | None, typer.Option("--date", help="Date the question is asked (YYYY-MM-DD); default: the KB's last day.")
    ] = None,
    token_budget: Annotated[int | None, typer.Option(min=1, help="Token budget of the blocks (cl100k).")] = None,
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
    engine = GravityEngine.from_dir(kb_dir)
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
