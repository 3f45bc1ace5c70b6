"""``gravity stats KB_DIR``: what a KB holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from gravity_core.stats import kb_stats
from gravity_core.store import AnchorStore


def stats(
    kb_dir: Annotated[Path, typer.Argument(help="KB folder written by 'gravity build'.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
) -> None:
    """Show counts of entities, events, topics and utterances in a KB."""
    loaded = AnchorStore(kb_dir).load()
    counts = kb_stats(loaded.kb)
    if as_json:
        typer.echo(json.dumps(counts, indent=2))
        return
    width = max(len(k) for k in counts)
    for key, value in counts.items():
        typer.echo(f"{key.replace('_', ' '):<{width}}  {value}")
