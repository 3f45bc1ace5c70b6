"""The ``gravity`` command line."""

from gravity_core.cli.app import main, make_app

__all__ = ["main", "make_app"]
