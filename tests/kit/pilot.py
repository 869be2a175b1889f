"""Driving the console with Pilot: the app on a ledger, waiting on conditions, reading the screen."""

from __future__ import annotations

import html
import re
import sqlite3
import time
from pathlib import Path

from textual import events
from textual.geometry import Region

from console.app import ConsoleConfig, WatchkeeperApp
from console.screens.main import MainScreen
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf

#: The test console's poll interval (s). Not shorter: Pilot waits after every key until the
#: process is idle (``textual._wait.wait_for_idle``: 20-ms windows with < 1 ms of CPU, up to
#: 1 s), and a console polling every 50 ms is never idle, so each key cost up to 2 s.
TEST_REFRESH_S = 0.5


def make_app(path: Path, **kw) -> WatchkeeperApp:
    kw.setdefault("operator", "ana")
    kw.setdefault("refresh", TEST_REFRESH_S)
    return WatchkeeperApp(ConsoleConfig(ledger=path, clock=lambda: cf.NOW, **kw))


async def type_text(pilot, text: str) -> None:
    """Put ``text`` into the focused input as one paste (what a terminal sends for a paste),
    instead of one Pilot key press per character; waits until the input holds it."""
    widget = pilot.app.focused
    assert widget is not None, "nothing has focus to type into"
    before = getattr(widget, "value", "")
    widget.post_message(events.Paste(text))
    await until(pilot, lambda: getattr(widget, "value", "") == before + text)


async def until(pilot, cond, timeout: float = 15.0) -> None:
    """Let the app run until ``cond()`` holds (fails the test after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        await pilot.pause(0.02)


def main(app) -> MainScreen:
    return next(s for s in app.screen_stack if isinstance(s, MainScreen))


async def loaded(pilot) -> MainScreen:
    await until(pilot, lambda: isinstance(pilot.app.screen, MainScreen) and pilot.app.screen.polls > 0)
    return pilot.app.screen


def notes(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


def esc_row(path: Path, esc_id: int) -> sqlite3.Row:
    with Ledger(path) as led:
        return led.one("SELECT * FROM escalations WHERE id=?", (esc_id,))


def screen_text(app) -> str:
    """The screen as plain text (the SVG export without its tags)."""
    return html.unescape(re.sub(r"<[^>]+>", "", app.export_screenshot())).replace("\xa0", " ")


def line_of(widget, y: int = 0) -> str:
    """What ``widget`` draws on its line ``y`` (after wrapping and cropping)."""
    return widget.render_lines(Region(0, y, widget.region.width, 1))[0].text
