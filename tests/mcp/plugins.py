"""Command plugins for the tests of ``gravity``'s ``gravity.commands`` entry points."""

from __future__ import annotations

import typer

GREETINGS = typer.Typer(help="Greetings from a plugin.")

NOT_A_PLUGIN = 42


@GREETINGS.command("wave")
def wave() -> None:
    typer.echo("a wave from a plugin")


def register_hello(app: typer.Typer) -> None:
    @app.command("hello")
    def hello(name: str = "world") -> None:
        typer.echo(f"hello {name}, from a plugin")


def register_failing(app: typer.Typer) -> None:
    raise RuntimeError("this plugin is broken")
