"""GRAVITY's memory tools as an MCP server, on the ``mcp`` SDK's ``MCPServer``.

:func:`make_server` registers the tools of :func:`gravity_mcp.tools.tool_specs`; a call whose
arguments fail (wrong type, a missing argument, a date that is not ``YYYY-MM-DD``, a user id that
cannot name a user, a user without a KB) returns a tool error (``is_error``) with the reason, and
the server goes on serving. :func:`run_server` serves over stdio or streamable HTTP. ``mcp`` is
imported only when a server is made: without it, :class:`~gravity_core.errors.MissingDependencyError`
names the extra to install.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from gravity_core.errors import ConfigurationError, GravityError, MissingDependencyError
from gravity_mcp.sources import MemorySource
from gravity_mcp.tools import instructions, tool_specs

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "HTTP_PATH",
    "SERVER_NAME",
    "Transport",
    "make_server",
    "require_mcp",
    "run_server",
]

logger = logging.getLogger(__name__)

SERVER_NAME = "gravity"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
HTTP_PATH = "/mcp"
"""Where the streamable HTTP transport answers: ``http://HOST:PORT/mcp``."""

Transport = Literal["stdio", "http"]


def _reporting(function: Callable[..., str], tool_error: type[Exception]) -> Callable[..., str]:
    """``function``, with GRAVITY's errors raised as the SDK's tool error (its message is the result).

    The wrapper keeps ``function``'s signature (``functools.wraps``), which the SDK reads for the
    tool's input schema. Any other exception is the SDK's to report as a crash.
    """

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> str:
        try:
            return function(*args, **kwargs)
        except GravityError as exc:
            logger.info("tool %s refused: %s", function.__name__, exc)
            raise tool_error(str(exc)) from exc

    return call


def require_mcp() -> None:
    """Check that the ``mcp`` SDK can be imported.

    Raises:
        MissingDependencyError: it cannot; the message names the extra to install.
    """
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError("mcp", "mcp", "GRAVITY's MCP server") from exc


def make_server(
    source: MemorySource,
    *,
    allow_remember: bool = False,
    name: str = SERVER_NAME,
    clock: Callable[[], datetime] | None = None,
) -> MCPServer[Any]:
    """An MCP server offering the memory tools over ``source``.

    Args:
        source: what the tools answer from: a :class:`~gravity_mcp.sources.SingleKB` or a
            :class:`~gravity_mcp.sources.UserRoot` (then every tool takes ``user_id``).
        allow_remember: also offer ``remember``, which adds messages to the KB.
        name: the server's name, as clients show it.
        clock: the time of remembered messages that carry none (default: now, UTC).

    Raises:
        MissingDependencyError: the ``mcp`` package is not installed.
    """
    require_mcp()
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    from gravity_core._version import __version__

    server: MCPServer[Any] = MCPServer(
        name,
        instructions=instructions(source, allow_remember=allow_remember),
        version=__version__,
        log_level="WARNING",
    )
    specs = tool_specs(source, allow_remember=allow_remember, clock=clock)
    for spec in specs:
        server.add_tool(
            _reporting(spec.function, ToolError),
            name=spec.name,
            description=spec.description,
            annotations=ToolAnnotations(
                read_only_hint=spec.read_only,
                destructive_hint=False,
                idempotent_hint=True,  # remembering the same messages again changes nothing
                open_world_hint=False,
            ),
            structured_output=False,
        )
    logger.info("MCP server %r: tools %s", name, ", ".join(spec.name for spec in specs))
    return server


def run_server(
    server: MCPServer[Any],
    *,
    transport: Transport = "stdio",
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
) -> None:
    """Serve until the client goes away (stdio) or the process is stopped (HTTP).

    Over stdio the process's stdout carries the protocol: nothing else may write to it. Over
    streamable HTTP the server answers at ``http://HOST:PORT/mcp``; it has no authentication, so
    keep it on the loopback address (the default) unless something in front of it checks callers.

    Raises:
        ConfigurationError: an unknown transport.
    """
    if transport == "stdio":
        server.run("stdio")
    elif transport == "http":
        if host not in ("127.0.0.1", "localhost", "::1"):
            logger.warning(
                "the MCP server on %s:%d has no authentication: anyone who reaches it can call it", host, port
            )
        server.run("streamable-http", host=host, port=port, streamable_http_path=HTTP_PATH)
    else:
        raise ConfigurationError(f"unknown transport {transport!r} (use 'stdio' or 'http')")
