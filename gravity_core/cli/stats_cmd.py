"""``gravity stats KB_DIR``: what a KB holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from gravity_core.build.stats import failed_batch_rows, kb_stats
from gravity_core.storage.store import AnchorStore


def stats(
    kb_dir: Annotated[Path, typer.Argument(metavar="KB_DIR", help="KB folder written by 'gravity build'.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
) -> None:
    """Show counts of entities, events, topics and utterances in a KB, and its failed batches."""
    loaded = AnchorStore(kb_dir).load()
    counts = kb_stats(loaded.kb)
    failed = failed_batch_rows(loaded.kb)
    if as_json:
        typer.echo(json.dumps({**counts, "failed_batch_list": failed}, indent=2))
        return
    width = max(len(k) for k in counts)
    for key, value in counts.items():
        typer.echo(f"{key.replace('_', ' '):<{width}}  {value}")
    if failed:
        typer.echo(f"\nfailed batches (redo with 'gravity build -o {kb_dir} --retry-failed'):")
        for row in failed:
            reason = " ".join(str(row["reason"]).split())
            typer.echo(f"  {row['id']}  ({row['utterances']} utterances, {row['failed_at']}): {reason}")
