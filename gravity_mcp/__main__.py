"""``python -m gravity_mcp KB_DIR ...`` runs ``gravity mcp KB_DIR ...``, installed entry point or not."""

import sys
from importlib.metadata import EntryPoint

from gravity_core.cli.app import COMMAND_ENTRY_POINTS, main

main(
    ["mcp", *sys.argv[1:]],
    plugins=[EntryPoint(name="mcp", value="gravity_mcp.cli:register", group=COMMAND_ENTRY_POINTS)],
)
