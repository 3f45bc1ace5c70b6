"""Assembles the ``gravity`` commands and turns every failure into one line on stderr."""

from __future__ import annotations

import logging
import sys

import typer

from gravity_core.cli import build_cmd, eval_cmd, query_cmd, sgmem_cmd, show_cmd, stats_cmd
from gravity_core.errors import GravityError
from gravity_core.storage_errors import describe_os_error

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
    app.command("query")(query_cmd.query)
    app.command("show")(show_cmd.show)
    app.add_typer(eval_cmd.make_eval_app(), name="eval")
    app.add_typer(sgmem_cmd.make_sgmem_app(), name="sgmem")
    return app


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``gravity`` script."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    command = typer.main.get_command(make_app())
    try:
        result = command.main(args=argv, prog_name="gravity", standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        _fail("aborted", EXIT_FAILURE)
    except GravityError as exc:
        _fail(str(exc), EXIT_FAILURE)
    except KeyboardInterrupt:
        _fail("interrupted; what was saved at the last checkpoint is kept", EXIT_FAILURE)
    except OSError as exc:
        # The stores tell their own (StorageAccessError); this is for any other file the OS refused.
        _fail(describe_os_error(exc), EXIT_FAILURE)
    except Exception as exc:
        # Typer bundles its own copy of click, so usage errors are recognised by shape, not class.
        format_message = getattr(exc, "format_message", None)
        if format_message is None or not hasattr(exc, "exit_code"):
            raise
        _fail(f"{format_message()} (see 'gravity {_command_of(exc)}--help')", EXIT_USAGE)
    if isinstance(result, int) and result:
        sys.exit(result)


def _command_of(exc: Exception) -> str:
    ctx = getattr(exc, "ctx", None)
    name = getattr(ctx, "info_name", None)
    return f"{name} " if name and getattr(ctx, "parent", None) is not None else ""


def _fail(message: str, code: int) -> None:
    sys.stderr.write(f"gravity: error: {' '.join(message.split())}\n")
    sys.exit(code)
