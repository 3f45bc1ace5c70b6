"""GRAVITY's memory as an MCP server: an MCP client starts it, lists its tools and calls each one.

The recipe builds the sample conversation's KB (examples/sample_conversation.jsonl, offline), then
plays the part of an agent's MCP client with the ``mcp`` SDK: it starts ``gravity mcp KB_DIR
--allow-remember`` as a subprocess over stdio (here ``python -m gravity_mcp``, the same command),
lists the tools and calls each one, printing what an agent's model would read:

- ``search_memory``, ``entity_profile``, ``timeline``, ``topic_arc``, ``kb_stats``: read-only;
- ``remember`` (offered because of ``--allow-remember``): a new message goes into the KB, and the
  next call already finds it;
- a malformed call (a date not written YYYY-MM-DD) comes back as a tool error, and the server goes on.

An agent framework connects the same way: Claude Desktop, an IDE or LangChain's MCP adapters run
``gravity mcp KB_DIR`` (stdio), or reach ``gravity mcp KB_DIR --transport http`` at
``http://127.0.0.1:8000/mcp``.

Run from anywhere (offline, about 30 s):

    python cookbook/mcp_client.py
    python cookbook/mcp_client.py --kb /path/to/kb   # serve a KB you built with `gravity build`
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from gravity_core import build_kb_from_utterances, load_conversation

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample_conversation.jsonl"
SHOWN_LINES = 14

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("kb_stats", {}),
    ("search_memory", {"query": "Where does Maya work now?"}),
    ("entity_profile", {"name": "Biscuit"}),
    ("timeline", {"person": "Maya", "start": "2024-03-01", "end": "2024-04-30", "limit": 5}),
    ("topic_arc", {"topic": "pottery"}),
    (
        "remember",
        {
            "messages": [
                {
                    "speaker": "Maya",
                    "content": "Big news: I adopted a parrot called Kiwi today!",
                    "timestamp": "2024-06-15T10:00:00Z",
                    "session": "session_7",
                }
            ]
        },
    ),
    ("entity_profile", {"name": "Kiwi"}),
    ("timeline", {"start": "15 June"}),  # not YYYY-MM-DD: a tool error the model can read
    ("kb_stats", {}),
]


def shown(text: str) -> str:
    lines = text.splitlines()
    cut = lines[:SHOWN_LINES] + (
        [f"... ({len(lines) - SHOWN_LINES} more lines)"] if len(lines) > SHOWN_LINES else []
    )
    return "\n".join(f"    {line}" for line in cut)


async def talk_to(kb_dir: Path) -> None:
    """What an agent's MCP client does: start the server, list its tools, call them."""
    # real: StdioServerParameters(command="gravity", args=["mcp", str(kb_dir), "--allow-remember"])
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "gravity_mcp", str(kb_dir), "--allow-remember"]
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        started = await session.initialize()
        print(f"connected to MCP server {started.server_info.name!r} {started.server_info.version}")
        tools = (await session.list_tools()).tools
        print(f"{len(tools)} tools:")
        for tool in tools:
            arguments = ", ".join(tool.input_schema.get("properties", {}))
            writes = "writes" if tool.annotations and not tool.annotations.read_only_hint else "read-only"
            print(f"  {tool.name}({arguments}) [{writes}]: {tool.description}")
        for name, arguments in CALLS:
            result = await session.call_tool(name, arguments)
            text = "\n".join(block.text for block in result.content if block.type == "text")
            print(f"\n{name}({arguments}){' -> TOOL ERROR' if result.is_error else ''}")
            print(shown(text))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--kb", type=Path, help="serve this KB folder (default: build the sample's in a temp folder)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gravity-mcp-") as tmp:
        kb_dir = args.kb
        if kb_dir is None:
            kb_dir = Path(tmp) / "kb"
            utterances = load_conversation(SAMPLE)
            build_kb_from_utterances(utterances, kb_dir)  # offline extractor, packaged MiniLM embeddings
            print(f"built the sample KB: {len(utterances)} turns -> {kb_dir.name}/")
        anyio.run(talk_to, kb_dir)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    main()
