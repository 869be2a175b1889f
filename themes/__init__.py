"""Console themes as files a user can read and copy: ``dark.toml`` (default), ``light.toml``
and ``high-contrast.toml`` in this folder, plus any ``*.toml`` in the folder named by the
``themes_dir`` setting, loaded the same way into Textual ``Theme`` objects.

A theme file holds ``name``, optional ``aliases`` (other names ``--theme`` accepts), ``dark``,
the colours of a Textual theme (``primary``, ``secondary``, ``accent``, ``warning``,
``error``, ``success``, ``foreground``, ``background``, ``surface``, ``panel``) and an optional
``[variables]`` table of Textual theme variables. A bad file is a ``ThemeError`` naming the
file and the field; the console then says so and keeps the built-in themes.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from textual.color import Color, ColorParseError
from textual.theme import Theme

HERE = Path(__file__).parent
DARK_NAME = "watchkeeper-dark"
LIGHT_NAME = "watchkeeper-light"
HIGH_CONTRAST_NAME = "watchkeeper-high-contrast"


class ThemeError(ValueError):
    """A theme file that does not load: the message names the file and the field."""


def _colour(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        Color.parse(value)
    except ColorParseError as exc:
        raise ValueError(f"not a colour: {value!r} (use #rrggbb or a colour name)") from exc
    return value


class ThemeFile(BaseModel):
    """The fields of one theme file (validated; unknown keys are refused)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="The theme's name, as given to --theme.")
    aliases: list[str] = Field(default_factory=list, description="Other names --theme accepts.")
    dark: bool = Field(True, description="A dark theme (light text on dark ground).")
    primary: str = Field(description="Cursor, links, live runs.")
    secondary: str | None = None
    accent: str | None = None
    warning: str | None = None
    error: str | None = None
    success: str | None = None
    foreground: str | None = None
    background: str | None = None
    surface: str | None = None
    panel: str | None = None
    variables: dict[str, str] = Field(default_factory=dict, description="Textual theme variables.")

    _check = field_validator("primary", "secondary", "accent", "warning", "error", "success", "foreground",
                             "background", "surface", "panel")(_colour)


@dataclass(frozen=True)
class LoadedTheme:
    """A theme file turned into a Textual ``Theme`` and the names it answers to."""

    theme: Theme
    aliases: tuple[str, ...]
    path: Path


def load(path: Path) -> LoadedTheme:
    """Read one theme file. Raises ``ThemeError`` naming ``path`` (and the field) when it is
    not TOML or not a valid theme."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ThemeError(f"{path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ThemeError(f"{path}: not TOML: {exc}") from exc
    try:
        spec = ThemeFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(file)"
        raise ThemeError(f"{path}: {field}: {first['msg']}") from exc
    fields = spec.model_dump(exclude={"aliases", "variables"})
    return LoadedTheme(Theme(**fields, variables=dict(spec.variables)), tuple(spec.aliases), path)


def load_dir(folder: Path) -> tuple[list[LoadedTheme], list[str]]:
    """Every ``*.toml`` theme in ``folder`` (sorted by file name) and the errors of those that
    did not load (one line each). A missing folder is one error, not an exception."""
    if not folder.is_dir():
        return [], [f"{folder}: themes_dir is not a folder"]
    loaded: list[LoadedTheme] = []
    errors: list[str] = []
    for path in sorted(folder.glob("*.toml")):
        try:
            loaded.append(load(path))
        except ThemeError as exc:
            errors.append(str(exc))
    return loaded, errors


#: The built-in themes, from this folder's files (a broken one is a packaging error: raise).
BUILTIN: list[LoadedTheme] = [load(HERE / f) for f in ("dark.toml", "light.toml", "high-contrast.toml")]
THEMES: dict[str, Theme] = {t.theme.name: t.theme for t in BUILTIN}
DARK, LIGHT, HIGH_CONTRAST = (THEMES[n] for n in (DARK_NAME, LIGHT_NAME, HIGH_CONTRAST_NAME))
ALIASES: dict[str, str] = {a: t.theme.name for t in BUILTIN for a in t.aliases}


def resolve(name: str | None, aliases: dict[str, str] | None = None) -> str:
    """A theme name or alias (``dark``, ``light``, ``high-contrast``, or a user theme's alias)
    → theme name. Unknown names come back unchanged so Textual's built-in themes (e.g.
    ``ansi-dark``) still work; the app falls back to dark when Textual does not know them
    either."""
    if not name:
        return DARK_NAME
    return (aliases or ALIASES).get(name, name)
