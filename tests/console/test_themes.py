"""Themes are readable files: the built-ins load from themes/*.toml, a user theme from
``themes_dir`` loads the same way, and a bad file is a clear message, not a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

import themes
from console.app import ConsoleConfig, WatchkeeperApp
from core.ledger.connection import Ledger


def test_builtin_themes_come_from_files():
    names = {t.path.name for t in themes.BUILTIN}
    assert names == {"dark.toml", "light.toml", "high-contrast.toml"}
    assert themes.resolve("dark") == "watchkeeper-dark"
    assert themes.HIGH_CONTRAST.variables["block-cursor-background"] == "#ffff00"


def test_bad_theme_file_names_file_and_field(tmp_path):
    bad = tmp_path / "mine.toml"
    bad.write_text('name = "mine"\nprimary = "not-a-colour"\n')
    with pytest.raises(themes.ThemeError, match=r"mine.toml: primary: .*not a colour"):
        themes.load(bad)
    (tmp_path / "typo.toml").write_text('name = "t"\nprimary = "#ffffff"\nprimery = "#000000"\n')
    _, errors = themes.load_dir(tmp_path)
    assert any("typo.toml: primery" in e for e in errors)


@pytest.fixture
def ledger_path(tmp_path) -> Path:
    path = tmp_path / "wk.db"
    Ledger(path).close()
    return path


async def test_user_theme_from_themes_dir_is_used(tmp_path, ledger_path):
    folder = tmp_path / "mythemes"
    folder.mkdir()
    copy = (themes.HERE / "dark.toml").read_text().replace('"watchkeeper-dark"', '"night-shift"')
    copy = copy.replace('aliases = ["dark"]', 'aliases = ["night"]').replace("#5fafff", "#ff00ff")
    (folder / "night.toml").write_text(copy)
    app = WatchkeeperApp(ConsoleConfig(ledger=ledger_path, operator="ana", theme="night", themes_dir=folder))
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.theme == "night-shift"
        assert app.current_theme.primary == "#ff00ff"


async def test_unknown_theme_falls_back_and_says_so(ledger_path):
    app = WatchkeeperApp(ConsoleConfig(ledger=ledger_path, operator="ana", theme="no-such-theme"))
    async with app.run_test(notifications=True) as pilot:
        await pilot.pause()
        assert app.theme == themes.DARK_NAME
        assert any("unknown theme" in str(n.message) for n in app._notifications)
