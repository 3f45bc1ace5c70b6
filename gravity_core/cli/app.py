"""Assembles the ``gravity`` commands and turns every failure into one line on stderr."""

from __future__ import annotations

import logging
import sys

import click
import typer

from gravity_core.cli import build_cmd, stats_cmd
from gravity_core.errors import GravityError

__all__ = ["main", "make_app"]

EXIT_USAGE = 2
EXIT_FAILURE = 1


def make_app() -> typer.Typer:
    """A fresh Typer application with every command registered."""
    app = typer.Typer(
        name="gravity",
        help="Build and query GRAVITY anchor knowledge bases.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    app.command("build")(build_cmd.build)
    app.command("stats")(stats_cmd.stats)
    return app


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``gravity`` script."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    command = typer.main.get_command(make_app())
    try:
        command.main(args=argv, prog_name="gravity", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        _fail(f"{exc.format_message()} (see 'gravity {_command_of(exc)}--help')", EXIT_USAGE)
    except click.Abort:
        _fail("aborted", EXIT_FAILURE)
    except GravityError as exc:
        _fail(str(exc), EXIT_FAILURE)
    except KeyboardInterrupt:
        _fail("interrupted; what was saved at the last checkpoint is kept", EXIT_FAILURE)


def _command_of(exc: click.UsageError) -> str:
    ctx = exc.ctx
    return f"{ctx.info_name} " if ctx is not None and ctx.parent is not None and ctx.info_name else ""


def _fail(message: str, code: int) -> None:
    sys.stderr.write(f"gravity: error: {' '.join(message.split())}\n")
    sys.exit(code)
