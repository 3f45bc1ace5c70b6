"""The explorer page: one self-contained HTML file (inlined script, style and data, no network).

The page's Content-Security-Policy allows only the inlined script and style, by hash, and no
connection at all: it works from a file on a machine without network, and text from the
conversation can neither run code nor load anything even if it looked like HTML.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from gravity_core.errors import ConfigurationError
from gravity_core.explorer.data import explorer_payload
from gravity_core.schema import KnowledgeBase

__all__ = ["embed_json", "render_html", "write_explorer"]

_STATIC = ("explorer.html", "explorer.css", "explorer.js")
_CSS_SLOT = "/*GRAVITY:CSS*/"
_JS_SLOT = "/*GRAVITY:JS*/"
_DATA_SLOT = "<!--GRAVITY:DATA-->"
_CSP_SLOT = "GRAVITY:CSP"


def embed_json(data: Any) -> str:
    r"""``data`` as JSON safe to place inside a ``<script type="application/json">`` element.

    ``<``, ``>`` and ``&`` are written as ``\u`` escapes, so no text in the data can close the
    element or open a comment; ``JSON.parse`` reads the escapes back as the original characters.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(payload: dict[str, Any]) -> str:
    """The explorer page showing ``payload`` (from :func:`~gravity_core.explorer.data.explorer_payload`)."""
    template, css, js = (_static(name) for name in _STATIC)
    for name, text, closing in (("explorer.css", css, "</style"), ("explorer.js", js, "</script")):
        if closing in text.lower():
            raise ConfigurationError(f"{name} must not contain '{closing}': it is inlined into the page")
    csp = "; ".join(
        [
            "default-src 'none'",
            f"script-src '{_sha256(js)}'",
            f"style-src '{_sha256(css)}'",
            "img-src data:",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )
    # The data goes in last, by position: its text is never searched for a slot marker.
    page = template.replace(_CSP_SLOT, csp, 1).replace(_CSS_SLOT, css, 1).replace(_JS_SLOT, js, 1)
    head, marker, tail = page.partition(_DATA_SLOT)
    if not marker:
        raise ConfigurationError(f"explorer.html has no {_DATA_SLOT} slot")
    return head + embed_json(payload) + tail


def write_explorer(kb: KnowledgeBase, output: str | os.PathLike[str], *, title: str) -> Path:
    """Write the explorer page of ``kb`` to ``output`` (replaced atomically); returns the path.

    Raises:
        ConfigurationError: ``output`` is a folder, or its folder cannot be written.
    """
    path = Path(output)
    if path.is_dir():
        raise ConfigurationError(
            f"{path} is a folder; give the HTML file to write, e.g. {path / 'anchors.html'}"
        )
    page = render_html(explorer_payload(kb, title=title))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(page)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ConfigurationError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


def _static(name: str) -> str:
    return resources.files("gravity_core.explorer").joinpath("static", name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")
