"""One CLI style: every command is defined at module level and registered one way.

Each area module of ``console/cli`` defines its click commands (and groups) at module level
and lists the top-level ones in ``COMMANDS``; ``console.cli.main`` names them in ``AREAS`` and
serves exactly those, importing an area when one of its commands is asked for. A
command defined inside a function (the old ``register(group)`` closures) or a module that
registers its own commands fails here, and so does settings or ledger opening outside
``console.cli.common``.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import click
import pytest

from console.cli.main import AREAS, cli

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "console" / "cli"
#: Decorators that make a click command or group.
MAKERS = frozenset({"command", "group"})


def nested_commands(source: str) -> list[int]:
    """Lines of click commands defined inside a function (a closure registered at run time)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for inner in ast.walk(node):
            if inner is node or not isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for dec in inner.decorator_list:
                call = dec.func if isinstance(dec, ast.Call) else dec
                if isinstance(call, ast.Attribute) and call.attr in MAKERS:
                    found.append(inner.lineno)
    return found


def test_the_check_finds_a_command_inside_a_function():
    closure = "def register(group):\n    @group.command('x')\n    def x():\n        pass\n"
    module_level = "@click.command('x')\ndef x():\n    pass\n"
    assert nested_commands(closure) == [3] and nested_commands(module_level) == []


@pytest.mark.parametrize("path", sorted(CLI.glob("*.py")), ids=lambda p: p.name)
def test_commands_are_module_level_and_nothing_registers_itself(path: Path):
    source = path.read_text(encoding="utf-8")
    assert nested_commands(source) == [], f"{path.name}: a click command defined inside a function"
    names = {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
    assert "register" not in names, f"{path.name}: list the commands in COMMANDS instead of register()"


def test_main_serves_exactly_the_areas_commands():
    ctx = click.Context(cli)
    listed = []
    for area, names in AREAS.items():
        commands = importlib.import_module(f"console.cli.{area}").COMMANDS
        assert sorted(c.name or "" for c in commands) == sorted(names), f"main.AREAS[{area!r}] is out of date"
        listed += commands
    assert all(isinstance(c, click.Command) for c in listed)
    assert sorted(c.name or "" for c in listed) == sorted(cli.list_commands(ctx))
    assert all(cli.get_command(ctx, c.name or "") is c for c in listed)


def test_every_area_module_is_an_area():
    """A module that defines top-level commands is listed in main.AREAS (else its commands
    would be missing from ``watchkeeper --help`` and the generated reference)."""
    defining = set()
    for path in CLI.glob("*.py"):
        if path.stem == "__main__":  # runs the command when imported
            continue
        module = importlib.import_module(f"console.cli.{path.stem}")
        if getattr(module, "COMMANDS", None):
            defining.add(path.stem)
    assert defining == set(AREAS)


def test_settings_are_loaded_only_by_common():
    """``load_settings`` is called in ``common.open_settings`` (exit 3 on bad settings) and in
    ``check``, which reports bad settings as findings instead of exiting."""
    callers = set()
    for path in CLI.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "load_settings":
                callers.add(path.name)
    assert callers == {"common.py", "check.py"}
