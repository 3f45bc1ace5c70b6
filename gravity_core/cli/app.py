"""Assembles the ``gravity`` commands and turns every failure into one line on stderr."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import Annotated

import typer

from gravity_core.cli import (
    build_cmd,
    build_users_cmd,
    eval_cmd,
    forget_cmd,
    query_cmd,
    sgmem_cmd,
    show_cmd,
    stats_cmd,
)
from gravity_core.errors import GravityError
from gravity_core.storage.os_errors import describe_os_error

__all__ = ["COMMAND_ENTRY_POINTS", "CONTEXT_SETTINGS", "main", "make_app"]

logger = logging.getLogger(__name__)

#: Entry-point group of commands other packages add to ``gravity`` (e.g. ``gravity mcp``).
COMMAND_ENTRY_POINTS = "gravity.commands"

EXIT_USAGE = 2
EXIT_FAILURE = 1

#: Every command and sub-command takes ``-h`` as well as ``--help`` (sub-contexts inherit it).
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


def _show_version(value: bool) -> None:
    if value:
        from gravity_core._version import __version__

        typer.echo(f"gravity {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_show_version, help="Show GRAVITY's version and exit."
        ),
    ] = False,
) -> None:
    """Build and query GRAVITY anchor knowledge bases."""


def make_app(*, plugins: Iterable[EntryPoint] | None = None) -> typer.Typer:
    """A fresh Typer application with every command registered.

    Besides its own commands, the app takes those of the ``gravity.commands`` entry points
    (:data:`COMMAND_ENTRY_POINTS`), loaded now, not at import. An entry point names either a
    ``typer.Typer`` (added as the sub-command of the entry point's name) or a callable that is
    given the app and registers its commands (``register(app)``). One that fails to load, or whose
    name is a built-in command's, is skipped with a warning: the other commands still work.

    Args:
        plugins: the entry points to load instead of the installed ones (``[]``: none).
    """
    app = typer.Typer(
        name="gravity",
        help="Build and query GRAVITY anchor knowledge bases.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings=CONTEXT_SETTINGS,
    )
    app.callback()(_root)
    app.command("build")(build_cmd.build)
    app.command("build-users")(build_users_cmd.build_users_cmd)
    app.command("forget")(forget_cmd.forget)
    app.command("stats")(stats_cmd.stats)
    app.command("query")(query_cmd.query)
    app.command("show")(show_cmd.show)
    app.add_typer(eval_cmd.make_eval_app(), name="eval")
    app.add_typer(sgmem_cmd.make_sgmem_app(), name="sgmem")
    found = entry_points(group=COMMAND_ENTRY_POINTS) if plugins is None else plugins
    for plugin in found:
        _add_plugin(app, plugin)
    return app


def _command_names(app: typer.Typer) -> set[str]:
    names = {info.name for info in app.registered_commands if info.name}
    return names | {info.name for info in app.registered_groups if info.name}


def _add_plugin(app: typer.Typer, plugin: EntryPoint) -> None:
    """Register the commands of one ``gravity.commands`` entry point, or warn why not."""
    if plugin.name in _command_names(app):
        logger.warning(
            "command plugin %r (%s) skipped: 'gravity %s' is already a command",
            plugin.name,
            plugin.value,
            plugin.name,
        )
        return
    try:
        loaded = plugin.load()
        if isinstance(loaded, typer.Typer):
            app.add_typer(loaded, name=plugin.name)
        elif callable(loaded):
            loaded(app)
        else:
            raise TypeError(f"{type(loaded).__name__} is neither a typer.Typer nor a callable")
    except Exception as exc:  # a broken plugin must not take the built-in commands down with it
        logger.warning("command plugin %r (%s) could not be loaded: %s", plugin.name, plugin.value, exc)


def main(argv: list[str] | None = None, *, plugins: Iterable[EntryPoint] | None = None) -> None:
    """Entry point of the ``gravity`` script.

    Args:
        argv: the arguments (default: the process's).
        plugins: the command entry points to load instead of the installed ones (see :func:`make_app`).
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    command = typer.main.get_command(make_app(plugins=plugins))
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
        if type(exc).__name__ == "NoArgsIsHelpError":  # `gravity`, `gravity sgmem`: the help, as it is
            sys.stderr.write(f"{format_message()}\n")
            sys.exit(EXIT_USAGE)
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
