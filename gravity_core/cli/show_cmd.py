"""``gravity show KB_DIR -o anchors.html``: the KB as one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gravity_core.explorer import write_explorer
from gravity_core.storage.store import PAGE, AnchorStore


def show(
    kb_dir: Annotated[Path, typer.Argument(metavar="KB_DIR", help="KB folder written by 'gravity build'.")],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o", "--output", metavar="FILE", help="HTML file to write; default: KB_DIR/anchors.html."
        ),
    ] = None,
) -> None:
    """Write an HTML explorer of the KB: entity graph, event timeline, topic arcs, search.

    The page needs no network: open it from disk in any browser.
    """
    kb = AnchorStore(kb_dir).load().kb
    path = write_explorer(kb, output if output is not None else kb_dir / PAGE, title=kb_dir.resolve().name)
    typer.echo(
        f"{path}: {len(kb.entities)} entities, {len(kb.events)} events, {len(kb.topics)} topics",
        err=True,
    )
