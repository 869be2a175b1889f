"""Console themes: dark (default), light and high-contrast.

Each keeps meaning in words and symbols as well as colour, and uses colours that stay
distinct when Textual reduces them to 256 or 16 colours (what SSH usually gets): background,
surface and panel differ in lightness by more than one 256-colour grey step.
"""

from __future__ import annotations

from textual.theme import Theme

DARK = Theme(
    name="watchkeeper-dark",
    primary="#5fafff",
    secondary="#87afd7",
    accent="#ffaf00",
    warning="#ffaf00",
    error="#ff5f5f",
    success="#5fd75f",
    foreground="#e4e4e4",
    background="#121212",
    surface="#262626",
    panel="#3a3a3a",
    dark=True,
)

LIGHT = Theme(
    name="watchkeeper-light",
    primary="#005faf",
    secondary="#5f5f87",
    accent="#af5f00",
    warning="#af5f00",
    error="#d70000",
    success="#008700",
    foreground="#1c1c1c",
    background="#ffffff",
    surface="#eeeeee",
    panel="#d0d0d0",
    dark=False,
)

HIGH_CONTRAST = Theme(
    name="watchkeeper-high-contrast",
    primary="#ffff00",
    secondary="#00ffff",
    accent="#ffff00",
    warning="#ffff00",
    error="#ff0000",
    success="#00ff00",
    foreground="#ffffff",
    background="#000000",
    surface="#000000",
    panel="#444444",
    dark=True,
    variables={"block-cursor-foreground": "#000000", "block-cursor-background": "#ffff00",
               "footer-key-foreground": "#ffff00"},
)

THEMES: dict[str, Theme] = {t.name: t for t in (DARK, LIGHT, HIGH_CONTRAST)}
ALIASES = {"dark": DARK.name, "light": LIGHT.name, "high-contrast": HIGH_CONTRAST.name,
           "contrast": HIGH_CONTRAST.name}


def resolve(name: str | None) -> str:
    """A theme name or alias (``dark``, ``light``, ``high-contrast``) → registered theme name.

    Unknown names are returned unchanged so Textual's built-in themes (e.g. ``ansi-dark``)
    still work; the app falls back to dark when Textual does not know them either.
    """
    if not name:
        return DARK.name
    return ALIASES.get(name, name)
