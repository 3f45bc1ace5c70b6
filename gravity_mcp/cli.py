"""``gravity mcp KB_DIR`` / ``gravity mcp --users ROOT``: serve the memory tools to an MCP client.

The command joins the ``gravity`` CLI through the ``gravity.commands`` entry point
(``mcp = "gravity_mcp.cli:register"``); ``python -m gravity_mcp`` runs it too. Loading this module
imports neither ``mcp`` nor a KB: both happen when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gravity_core.errors import ConfigurationError
from gravity_core.serving.memory_tools import DEFAULT_TOOL_BUDGET
from gravity_mcp.server import DEFAULT_HOST, DEFAULT_PORT, HTTP_PATH, make_server, require_mcp, run_server
from gravity_mcp.sources import MemorySource, SingleKB, UserRoot

__all__ = ["mcp_command", "register"]

_TRANSPORTS = ("stdio", "http")


def mcp_command(
    kb_dir: Annotated[
        Path | None, typer.Argument(metavar="KB_DIR", help="KB folder written by 'gravity build'.")
    ] = None,
    users: Annotated[
        Path | None,
        typer.Option(
            "--users",
            metavar="ROOT",
            help="Serve the users' KBs under ROOT (as 'gravity build-users' writes them) instead of "
            "KB_DIR; every tool then takes user_id.",
        ),
    ] = None,
    allow_remember: Annotated[
        bool,
        typer.Option("--allow-remember", help="Also offer the remember tool, which adds messages to the KB."),
    ] = False,
    transport: Annotated[
        str, typer.Option(metavar="stdio|http", help="stdio (for a client that starts the server) or http.")
    ] = "stdio",
    host: Annotated[
        str | None,
        typer.Option(metavar="HOST", help=f"With --transport http: the address (default {DEFAULT_HOST})."),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            min=1, max=65535, metavar="N", help=f"With --transport http: the port (default {DEFAULT_PORT})."
        ),
    ] = None,
    token_budget: Annotated[
        int, typer.Option(min=1, metavar="N", help="Tokens (cl100k) one tool answer takes at most.")
    ] = DEFAULT_TOOL_BUDGET,
    embedder: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="The KBs' embedder: minilm or hashing[:DIM] (default: the one KB_DIR names; with "
            "--users, minilm).",
        ),
    ] = None,
) -> None:
    """Serve GRAVITY's memory tools over MCP: search_memory, entity_profile, timeline, topic_arc, kb_stats."""
    if (kb_dir is None) == (users is None):
        said = "not both" if kb_dir is not None else "got neither"
        raise ConfigurationError(f"give KB_DIR (one KB) or --users ROOT (the users' KBs under ROOT); {said}")
    if transport not in _TRANSPORTS:
        raise ConfigurationError(f"--transport is stdio or http, got {transport!r}")
    if transport == "stdio" and (host is not None or port is not None):
        raise ConfigurationError("--host and --port go with --transport http (stdio has no address)")
    require_mcp()
    source = _source(kb_dir, users, embedder, token_budget)
    server = make_server(source, allow_remember=allow_remember)
    if transport == "stdio":
        run_server(server, transport="stdio")
        return
    address, number = host or DEFAULT_HOST, port or DEFAULT_PORT
    shown = f"[{address}]" if ":" in address else address
    typer.echo(
        f"serving GRAVITY's memory tools at http://{shown}:{number}{HTTP_PATH} (Ctrl+C stops)", err=True
    )
    run_server(server, transport="http", host=address, port=number)


def _source(kb_dir: Path | None, users: Path | None, embedder: str | None, token_budget: int) -> MemorySource:
    from gravity_core.providers import load_embedder

    chosen = load_embedder(embedder) if embedder is not None else None
    if users is not None:
        return UserRoot(users, embedder=chosen, token_budget=token_budget)
    assert kb_dir is not None  # exactly one of them, checked by the caller
    return SingleKB(kb_dir, embedder=chosen, token_budget=token_budget)


def register(app: typer.Typer) -> None:
    """Add ``gravity mcp`` to the ``gravity`` app (the ``gravity.commands`` entry point)."""
    app.command("mcp")(mcp_command)
