"""Untrusted text (markup, brackets, escape sequences, C1 controls, invalid UTF-8) shows
literally on every rendering path and never reaches the terminal as control bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.text import Text
from textual.command import CommandPalette
from textual.widgets import OptionList

from console.safe_text import escaped, text
from console.screens.detail import DetailScreen
from console.screens.main import MainScreen
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.pilot import loaded, make_app, notes, type_text, until

CONTROL_BYTES = ("\x1b", "\x9b", "\x9d", "\x07", "\x85", "\udcff")


#: Local time is UTC (``utc`` in tests/conftest.py): the console's clocks read the machine's zone.
pytestmark = pytest.mark.usefixtures("utc")


@pytest.mark.parametrize("raw", cf.HOSTILE)
def test_clean_strips_controls_and_keeps_the_words(raw):
    out = escaped(raw)
    assert not any(c in out for c in CONTROL_BYTES)
    assert isinstance(text(raw), Text) and text(raw).spans == []


def test_clean_specific_sequences():
    # Shown as visible escapes (as the CLI shows them), never interpreted: the OSC 52 payload
    # and a title change stay readable instead of vanishing.
    assert escaped("a\x1b[2Jb\x1b]52;c;ZXZpbA==\x07c\x1bcd\x9b31me") == \
        "a\\x1b[2Jb\\x1b]52;c;ZXZpbA==\\x07c\\x1bcd\\x9b31me"
    assert escaped("out \x1b]0;PWNED\x07") == "out \\x1b]0;PWNED\\x07"
    assert escaped(b"ok \xff") == "ok \ufffd"
    assert escaped("x\udcffy") == "x\ufffdy"
    assert escaped("[bold]x[/]") == "[bold]x[/]"
    assert escaped("line1\nline2", keep_newlines=False) == "line1 line2"


def _screen_text(app) -> str:
    svg = app.export_screenshot()
    for c in CONTROL_BYTES:
        assert c not in svg, f"control {c!r} reached the screen"
    return svg


@pytest.fixture
def hostile(tmp_path: Path):
    path = tmp_path / "wk.db"
    ids = cf.build(path, hostile=True)
    return path, ids


async def test_every_view_renders_hostile_text_literally(hostile):
    app = make_app(hostile[0])
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await loaded(pilot)
        svg = _screen_text(app)
        assert "error&#160;at&#160;[/path/x]" in svg or "error at [/path/x]" in svg.replace("&#160;", " ")
        for key in ("2", "3", "4"):
            await pilot.press(key)
            await until(pilot, lambda: screen.table.rows_data)
            await pilot.pause()
            _screen_text(app)
        assert app.is_running


async def test_detail_and_search_render_hostile_text(hostile):
    path, ids = hostile
    app = make_app(path)
    async with app.run_test(size=(100, 60)) as pilot:
        await loaded(pilot)
        app.push_screen(DetailScreen(ids["hostile_run"]))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        await pilot.pause()
        svg = _screen_text(app).replace("&#160;", " ")
        assert "[/path/x]" in svg
        await pilot.press("slash", *"[/", "enter")
        await pilot.pause()
        _screen_text(app)
        assert app.is_running


async def test_notifications_carry_hostile_text_literally(hostile):
    path, ids = hostile
    bad_job = cf.HOSTILE[3]  # "[@click=app.quit]click me[/]"
    with Ledger(path) as led:
        led.write(lambda c: cf.add_run(led, bad_job, state="failed", ended_at=cf.NOW, lineage="bad-job-1",
                                       reason=cf.HOSTILE[5]))
    app = make_app(path)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = await loaded(pilot)
        await pilot.press("2")
        await until(pilot, lambda: screen.table.VIEW == "outcomes" and screen.table.rows_data)
        assert screen.table.current().job == bad_job
        await pilot.press("r")
        await pilot.pause()
        _screen_text(app)  # the confirm dialog names the job
        await pilot.press("y")
        await until(pilot, lambda: any("queued attempt 2" in n for n in notes(app)))
        assert any(bad_job in n for n in notes(app))
        await pilot.pause(0.2)
        _screen_text(app)
        assert app.is_running and isinstance(app.screen, MainScreen)


async def test_palette_shows_hostile_job_names_literally(hostile):
    app = make_app(hostile[0])
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await loaded(pilot)
        await pilot.press("4")
        await until(pilot, lambda: screen.table.VIEW == "jobs" and screen.table.rows_data)
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette) and app.focused is not None)
        await type_text(pilot, "Outcomes of job")
        options = app.screen.query_one(OptionList)
        await until(pilot, lambda: options.option_count > 0)
        await pilot.pause(0.2)
        svg = _screen_text(app).replace("&#160;", " ")
        assert "click me" in svg
        assert app.is_running


def test_clean_shows_bidi_and_format_characters_escaped():
    from console.safe_text import escaped
    assert escaped("invoice\u202efdp.exe\u200b\ufeff") == "invoice\\u202efdp.exe\\u200b\\ufeff"
    assert escaped("bad\x1b[31mred\u202e") == "bad\\x1b[31mred\\u202e"
    assert escaped("[bold]own\u202eer") == "[bold]own\\u202eer"
    assert escaped("a\u2028b\u2029c") == "a\nb\nc"
    assert escaped("a\u2028b", keep_newlines=False) == "a b"
