"""The headless Chromium the explorer tests drive, and the README screenshot.

Playwright drives the system's Chromium (Debian's ``chromium`` package): no browser is downloaded.

Regenerate ``docs/explorer.png`` (a KB of LoCoMo conv-26 built with the default MiniLM embedder)::

    gravity build ../shared/data/locomo/locomo_dev.json --sample conv-26 -o /tmp/locomo-conv-26
    gravity show /tmp/locomo-conv-26 -o /tmp/locomo-conv-26.html
    python -m tests.core.explorer.browser /tmp/locomo-conv-26.html docs/explorer.png --select caroline
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

CHROMIUM_INSTALL = "apt-get install -y chromium"
# Flags for a headless Chromium that runs as root and never reaches out to the network by itself.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1440, "height": 1000}


def chromium_executable() -> str | None:
    """The Chromium to drive: $GRAVITY_CHROMIUM, else chromium (Debian's package) on the PATH."""
    configured = os.environ.get("GRAVITY_CHROMIUM")
    if configured:
        return configured
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(page_file: Path, output: Path, *, select: str | None, height: int) -> None:
    """Open the explorer page ``page_file``, optionally click an entity, and save a PNG."""
    from playwright.sync_api import sync_playwright

    executable = chromium_executable()
    if executable is None:
        raise SystemExit(f"no Chromium found: {CHROMIUM_INSTALL}, or set GRAVITY_CHROMIUM")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": VIEWPORT["width"], "height": height})
            page.goto(page_file.resolve().as_uri())
            page.wait_for_selector("body[data-ready='1']")
            if select:
                page.click(f'g.entity[data-id="{select}"] circle')
            page.screenshot(path=str(output))
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="Screenshot of a 'gravity show' page.")
    parser.add_argument("page", type=Path, help="HTML file written by 'gravity show'.")
    parser.add_argument("output", type=Path, help="PNG to write.")
    parser.add_argument("--select", help="Id of an entity to click first (its profile fills the side panel).")
    parser.add_argument("--height", type=int, default=1180, help="Viewport height in pixels.")
    args = parser.parse_args()
    screenshot(args.page, args.output, select=args.select, height=args.height)


if __name__ == "__main__":
    main()
