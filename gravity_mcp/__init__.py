"""GRAVITY as an MCP server: memory tools any MCP client (an agent, an IDE, a desktop app) can call.

``gravity mcp KB_DIR`` serves one KB, ``gravity mcp --users ROOT`` the users' KBs under a root
folder, over stdio or streamable HTTP. In Python::

    from gravity_mcp import SingleKB, make_server, run_server

    run_server(make_server(SingleKB("kb"), allow_remember=True))

Importing this package needs nothing beyond GRAVITY itself; making a server needs the ``mcp``
SDK: ``pip install 'gravity-memory[mcp]'``.
"""

from gravity_mcp.messages import DEFAULT_REMEMBER_SESSION, MemoryMessage, utterances_from_memory_messages
from gravity_mcp.server import DEFAULT_HOST, DEFAULT_PORT, HTTP_PATH, make_server, run_server
from gravity_mcp.sources import MemorySource, SingleKB, UserRoot
from gravity_mcp.tools import ToolSpec, tool_specs

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_REMEMBER_SESSION",
    "HTTP_PATH",
    "MemoryMessage",
    "MemorySource",
    "SingleKB",
    "ToolSpec",
    "UserRoot",
    "make_server",
    "run_server",
    "tool_specs",
    "utterances_from_memory_messages",
]
