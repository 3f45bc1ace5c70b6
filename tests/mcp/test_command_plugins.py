"""``gravity`` takes the commands of ``gravity.commands`` entry points, loaded when the app is made."""

from __future__ import annotations

import logging
import subprocess
import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import pytest
import typer

from gravity_core.cli import build_cmd
from gravity_core.cli.app import COMMAND_ENTRY_POINTS, main, make_app

BUILT_IN = {"build", "build-users", "forget", "stats", "query", "show", "eval", "sgmem"}


def plugin(name: str, target: str) -> EntryPoint:
    return EntryPoint(name=name, value=f"tests.mcp.plugins:{target}", group=COMMAND_ENTRY_POINTS)


def commands(app: typer.Typer) -> dict[str, object]:
    group = typer.main.get_command(app)
    return dict(group.commands)  # type: ignore[attr-defined]


def test_a_plugin_that_registers_a_command_runs_under_gravity(capsys: pytest.CaptureFixture[str]) -> None:
    main(["hello", "--name", "Maya"], plugins=[plugin("hello", "register_hello")])
    assert capsys.readouterr().out == "hello Maya, from a plugin\n"


def test_a_typer_app_plugin_becomes_a_sub_command(capsys: pytest.CaptureFixture[str]) -> None:
    main(["greetings", "wave"], plugins=[plugin("greetings", "GREETINGS")])
    assert capsys.readouterr().out == "a wave from a plugin\n"


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (
            EntryPoint(name="gone", value="tests.mcp.no_such_module:x", group=COMMAND_ENTRY_POINTS),
            "No module",
        ),
        (plugin("failing", "register_failing"), "this plugin is broken"),
        (plugin("number", "NOT_A_PLUGIN"), "neither a typer.Typer nor a callable"),
        (plugin("missing", "no_such_name"), "no_such_name"),
    ],
)
def test_a_broken_plugin_is_skipped_with_a_warning_and_the_rest_still_work(
    entry: EntryPoint, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="gravity_core.cli.app"):
        app = make_app(plugins=[entry, plugin("hello", "register_hello")])
    assert set(commands(app)) == BUILT_IN | {"hello"}
    (record,) = caplog.records
    assert f"command plugin {entry.name!r}" in record.getMessage() and reason in record.getMessage()


def test_a_plugin_cannot_replace_a_built_in_command(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gravity_core.cli.app"):
        app = make_app(plugins=[plugin("build", "GREETINGS")])
    build = commands(app)["build"]
    assert not hasattr(build, "commands")  # still the built-in command, not the plugin's group
    assert build.help == build_cmd.build.__doc__  # type: ignore[attr-defined]
    assert "'gravity build' is already a command" in caplog.text


def test_without_a_list_the_installed_entry_points_are_loaded() -> None:
    installed = {ep.name for ep in entry_points(group=COMMAND_ENTRY_POINTS)}
    assert set(commands(make_app())) == set(commands(make_app(plugins=[]))) | installed
    assert set(commands(make_app(plugins=[]))) == BUILT_IN


def test_no_plugin_is_loaded_at_import_and_the_mcp_command_does_not_import_the_sdk() -> None:
    code = (
        "import sys\n"
        "from importlib.metadata import EntryPoint\n"
        "import gravity_core.cli.app as app\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('gravity_mcp', 'mcp')))\n"
        "ep = EntryPoint(name='mcp', value='gravity_mcp.cli:register', group=app.COMMAND_ENTRY_POINTS)\n"
        "app.make_app(plugins=[ep])\n"
        "print('gravity_mcp.cli' in sys.modules, 'mcp' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.splitlines() == ["[]", "True False"]


def test_the_installed_gravity_has_the_mcp_command() -> None:
    """Needs the package installed with the ``gravity.commands`` entry point (``pip install -e .``)."""
    assert "mcp" in {ep.name for ep in entry_points(group=COMMAND_ENTRY_POINTS)}
    gravity = Path(sys.executable).parent / "gravity"
    done = subprocess.run(
        [str(gravity), "mcp", "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "Usage: gravity mcp" in done.stdout and "--allow-remember" in done.stdout
