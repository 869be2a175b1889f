"""Console keys from the one registry: a read-only console offers no action that writes
(footer, palette, the key itself), the help screen says where each key works and scrolls
with g/G, and the palette's screenshot lands in the user's data folder, never the cwd."""

from __future__ import annotations

from pathlib import Path

import pytest

from console import keys
from console.screens.dialogs import HelpScreen
from tests.kit import console_fixtures as cf
from tests.kit.pilot import esc_row, loaded, make_app, screen_text, until

pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def db(tmp_path: Path):
    path = tmp_path / "wk.db"
    return path, cf.build(path)


def _footer(app) -> str:
    """The footer's words: the bindings the screen offers (shown and not hidden by check_action)."""
    return " ".join(b.binding.description for b in app.screen.active_bindings.values()
                    if b.binding.show and b.enabled)


@pytest.mark.slow
async def test_a_read_only_footer_offers_no_action_and_the_keys_do_nothing(db):
    path, ids = db
    app = make_app(path, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        footer = _footer(app)
        assert "Help" in footer and "Quit" in footer
        for word in ("Ack", "Snooze", "Retry", "Abandon"):
            assert word not in footer, footer
        assert not any(a in keys.ACTING for a in (b.binding.action for b in screen.active_bindings.values()
                                                   if b.enabled))
        await pilot.press("a")
        await pilot.pause(0.2)
        assert esc_row(path, ids["esc_crit"])["state"] == "open"  # nothing written
    writable = make_app(path)
    async with writable.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        assert all(w in _footer(writable) for w in ("Ack", "Snooze", "Retry", "Abandon"))


@pytest.mark.slow
async def test_help_names_where_each_key_works_and_scrolls_with_g_and_G(db):
    app = make_app(db[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        body = app.screen.query_one("#help-body")
        text = screen_text(app)
        assert "· everywhere" in text and "· main, detail screens" in text
        await pilot.press("G")
        await until(pilot, lambda: body.scroll_y > 0 and body.scroll_y == body.max_scroll_y)
        assert "Flags: --read-only" in screen_text(app)
        await pilot.press("g")
        await until(pilot, lambda: body.scroll_y == 0)
        await pilot.press("j")
        await until(pilot, lambda: body.scroll_y == 1)


def test_help_keys_never_run_into_their_description():
    from rich.console import Console

    from console.screens.dialogs import help_table
    console = Console(width=76, record=True)
    console.print(help_table())
    lines = console.export_text().splitlines()
    text_at = next(ln for ln in lines if "command palette" in ln).index("command palette")
    for _section, shown, does, _where in keys.help_rows():
        start = " ".join(does.split()[:2])
        line = next(ln for ln in lines if ln[text_at:].startswith(start) and ln[:text_at].rstrip() == shown)
        assert line[len(shown):text_at].strip() == "", line  # the keys, then a gap, then the text


@pytest.mark.slow
async def test_a_screenshot_goes_to_the_user_data_folder_not_the_current_one(db, tmp_path, monkeypatch):
    data, cwd = tmp_path / "data", tmp_path / "repo"
    cwd.mkdir()
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    monkeypatch.chdir(cwd)
    app = make_app(db[0])
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await loaded(pilot)
        app.action_screenshot()
        await pilot.pause(0.1)
    shots = list((data / "watchkeeper" / "screenshots").glob("*.svg"))
    assert len(shots) == 1 and list(cwd.iterdir()) == []
