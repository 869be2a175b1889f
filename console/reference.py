"""The manual's reference pages, rendered from the code so they cannot drift from it.

Three pages, each a Markdown string: every CLI command with its ``--help`` (walking the click
tree), every setting with its default and description (the pydantic settings model), every
console key (``console.keys``). ``docs/gen/reference.py`` writes them into the site at
``make docs`` time (mkdocs-gen-files); ``tests/console/test_manual_reference.py`` checks that
every command, setting and key appears in them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from console import keys
from core.spec.settings import (
    AppriseSink,
    CommandSink,
    JudgeSettings,
    RetentionSettings,
    Settings,
    WebhookSink,
)

#: The pages, by path inside docs/ (what mkdocs-gen-files writes).
CLI_PAGE = "reference/cli.md"
SETTINGS_PAGE = "reference/settings.md"
KEYS_PAGE = "reference/keys.md"


# ---------------------------------------------------------------------------- the CLI


def commands(group: click.Group | None = None, prefix: str = "watchkeeper") -> Iterator[tuple[str, click.Command]]:
    """Every command of the click tree as ``("watchkeeper mission start", command)``, depth
    first, groups before their subcommands, names sorted."""
    if group is None:
        from console.cli.main import cli

        group = cli
        yield prefix, group
    ctx = click.Context(group, info_name=prefix)
    for name in sorted(group.list_commands(ctx)):
        cmd = group.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            continue
        path = f"{prefix} {name}"
        yield path, cmd
        if isinstance(cmd, click.Group):
            yield from commands(cmd, path)


def _help_text(path: str, cmd: click.Command) -> str:
    """``--help`` as click prints it, at 100 columns, for ``path``."""
    ctx = click.Context(cmd, info_name=path, max_content_width=100, terminal_width=100)
    return cmd.get_help(ctx)


def cli_page() -> str:
    """The CLI reference: one section per command (its anchor is the command's words joined
    by dashes), its first help line in the index, its whole ``--help`` below."""
    found = list(commands())
    out = ["# Command reference", "",
           "Every `watchkeeper` command with its `--help`, generated from the code at `make docs`.",
           "`watchkeeper COMMAND --help` prints the same in a terminal.", "",
           "| command | what it does |", "|---|---|"]
    for path, cmd in found:
        anchor = path.replace(" ", "-")
        out.append(f"| [`{path}`](#{anchor}) | {_md_cell(cmd.get_short_help_str(limit=90))} |")
    for path, cmd in found:
        anchor = path.replace(" ", "-")
        out += ["", f"## `{path}` {{#{anchor}}}", "", "```text", _help_text(path, cmd).rstrip(), "```"]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class SettingRow:
    """One setting: its dotted name in ``watchkeeper.toml`` (``judge.model``,
    ``notify[].url``), its environment variable (None for list items), default as written
    in the manual, and description."""

    name: str
    env: str | None
    default: str
    meaning: str


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        made = info.default_factory()  # type: ignore[call-arg]
        if isinstance(made, list | dict) and not made:
            return "none"
        if isinstance(made, BaseModel):
            return "see below"
        return "computed (see meaning)"
    if info.default is PydanticUndefined:
        return "required"
    if info.default is None:
        return "none"
    value = info.default
    return f"`{value.value if hasattr(value, 'value') else value}`"


def _model(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


_SINKS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("command", CommandSink), ("webhook", WebhookSink), ("apprise", AppriseSink))


def _sink_rows() -> list[SettingRow]:
    """A sink's fields: those every type has once (``notify[].name``; a default that differs
    by type is given per type), then each type's own (``notify[].url (webhook)``)."""
    shared = [n for n in CommandSink.model_fields if n != "type"
              and all(n in s.model_fields for _, s in _SINKS)
              and len({s.model_fields[n].description for _, s in _SINKS}) == 1]
    rows = [SettingRow("notify[].type", None, "`command`", "The sink's type: " + ", ".join(k for k, _ in _SINKS)
                       + "; each type's own fields are named with it below.")]
    for name in shared:
        defaults = {kind: _default(sink.model_fields[name]) for kind, sink in _SINKS}
        default = next(iter(defaults.values())) if len(set(defaults.values())) == 1 else ", ".join(
            f"{kind}: {d}" for kind, d in defaults.items())
        rows.append(SettingRow(f"notify[].{name}", None, default, CommandSink.model_fields[name].description or ""))
    for kind, sink in _SINKS:
        for name, info in sink.model_fields.items():
            if name not in shared and name != "type":
                rows.append(SettingRow(f"notify[].{name} ({kind})", None, _default(info), info.description or ""))
    return rows


def settings_rows() -> list[SettingRow]:
    """Every setting of ``Settings``, nested models (``judge``, ``retention``) and each sink
    type's fields (``notify[].…``) included, in model order."""
    rows: list[SettingRow] = []

    def walk(model: type[BaseModel], prefix: str, env_prefix: str | None) -> None:
        for name, info in model.model_fields.items():
            dotted = f"{prefix}{name}"
            env = f"{env_prefix}{name.upper()}" if env_prefix is not None else None
            rows.append(SettingRow(dotted, env, _default(info), info.description or ""))
            nested = _model(info.annotation)
            if nested is not None:
                walk(nested, dotted + ".", f"{env}__" if env else None)
            if name == "notify":
                rows.extend(_sink_rows())

    walk(Settings, "", "WATCHKEEPER_")
    return rows


def _md_cell(text: str) -> str:
    """One table cell: one line, ``code`` as `code`, and outside code ``|``, ``<`` and ``>``
    escaped (Markdown would take ``<ledger name>`` for an HTML tag and drop it); inside a
    code span a ``|`` stays as it is (the table splits cells outside code spans only)."""
    parts = " ".join(text.split()).replace("``", "`").split("`")
    return "`".join(p if i % 2 else p.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
                    for i, p in enumerate(parts))


def settings_page() -> str:
    """The settings reference: every setting's name, variable, default and meaning."""
    out = ["# Settings reference", "",
           "Every runner-wide setting, generated from the settings model (`core/spec/settings.py`) at",
           "`make docs`. Set them in `watchkeeper.toml`, or through the environment variable shown",
           "(nested: `WATCHKEEPER_JUDGE__MODEL`); see [Settings](../settings.md) for precedence and",
           "units.", "",
           "| setting | variable | default | meaning |", "|---|---|---|---|"]
    for row in settings_rows():
        env = f"`{row.env}`" if row.env else "–"
        out.append(f"| `{row.name}` | {env} | {row.default} | {_md_cell(row.meaning)} |")
    for title, model in (("judge", JudgeSettings), ("retention", RetentionSettings)):
        doc = (model.__doc__ or "").strip()
        if doc:
            out += ["", f"## `[{title}]`", "", _md_cell(doc)]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- keys


def keys_page() -> str:
    """The key reference: the registry's table (the same rows as the help screen)."""
    return "\n".join([
        "# Key reference", "",
        "Every console key, generated from the one key registry (`console/keys.py`) that also makes",
        "the bindings, the footer, the help screen (`?`) and the command palette, so they never",
        "disagree. Only keys that survive SSH and tmux are used.", "",
        keys.key_table(),
    ])


def pages() -> dict[str, str]:
    """Every generated page by its path inside docs/."""
    return {CLI_PAGE: cli_page(), SETTINGS_PAGE: settings_page(), KEYS_PAGE: keys_page()}

