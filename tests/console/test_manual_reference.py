"""The manual lists every CLI command (with its options), every setting and every console key:
its reference pages are rendered from the click tree, the settings model and the key registry."""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import BaseModel

from console import keys, reference
from console.cli.main import cli
from core.spec.settings import AppriseSink, CommandSink, Settings, WebhookSink


def _tree(group: click.Group, path: str) -> list[tuple[str, click.Command]]:
    found = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        found.append((f"{path} {name}", cmd))
        if isinstance(cmd, click.Group):
            found += _tree(cmd, f"{path} {name}")
    return found


def test_every_command_and_option_is_in_the_command_reference():
    page = reference.cli_page()
    tree = _tree(cli, "watchkeeper")
    assert len(tree) > 20
    for path, cmd in tree:
        assert f"## `{path}`" in page, f"{path} missing from the command reference"
        section = page.split(f"## `{path}`", 1)[1].split("\n## ", 1)[0]
        for param in cmd.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert param.opts[-1] in section, f"{path}: option {param.opts[-1]} missing"


def _fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    names = []
    for name, info in model.model_fields.items():
        names.append(prefix + name)
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            names += _fields(info.annotation, f"{prefix}{name}.")
    return names


def test_every_setting_is_in_the_settings_reference():
    page = reference.settings_page()
    for name in _fields(Settings):
        assert f"| `{name}` |" in page, f"setting {name} missing from the settings reference"
        if "." not in name:
            assert f"`WATCHKEEPER_{name.upper()}`" in page
    for sink in (CommandSink, WebhookSink, AppriseSink):
        for name in sink.model_fields:
            assert f"`notify[].{name}" in page, f"sink field {name} missing"


def test_every_console_key_is_in_the_key_reference():
    page = reference.keys_page()
    for k in keys.KEYS:
        if k.doc:
            row = [line for line in page.splitlines() if line.endswith(f"| {k.where} | {k.does} |")]
            assert row, f"key {k.display} ({k.action}) missing from the key reference"


def test_the_manual_links_every_reference_page():
    nav = (Path(__file__).resolve().parents[2] / "mkdocs.yml").read_text().split("\nnav:", 1)[1]
    for path in reference.pages():
        assert f": {path}\n" in nav, f"{path} is not in mkdocs.yml's nav"
