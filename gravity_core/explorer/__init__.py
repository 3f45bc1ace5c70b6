"""The anchor explorer: a KB as one self-contained HTML page (entity graph, event timeline, topic arcs)."""

from gravity_core.explorer.data import explorer_payload, matches
from gravity_core.explorer.render import render_html, write_explorer

__all__ = ["explorer_payload", "matches", "render_html", "write_explorer"]
