"""Escalation detail (issue 13 §2): enter on an escalation opens its occurrences (run, when,
why), who acknowledged, snoozed or resolved it, and the notifications with their delivery
state; enter on an occurrence opens the run; a / R act on it from there."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from console.app import ConsoleConfig, WatchkeeperApp
from console.screens.detail import DetailScreen
from console.screens.escalation import EscalationScreen
from console.screens.main import MainScreen
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.pilot import TEST_REFRESH_S, screen_text, until

#: Local time is UTC (``utc`` in tests/conftest.py): the console's clocks read the machine's zone.
pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def story(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    path = tmp_path / "wk.db"
    cf.build(path)
    return path, cf.add_escalation_story(path)


def make_app(path: Path, **kw) -> WatchkeeperApp:
    kw.setdefault("operator", "carol")
    return WatchkeeperApp(ConsoleConfig(ledger=path, clock=lambda: cf.NOW, refresh=TEST_REFRESH_S, **kw))


async def open_story(pilot, esc_id: int) -> EscalationScreen:
    main = pilot.app.screen
    await until(pilot, lambda: isinstance(main, MainScreen) and main.polls > 0 and main.table.rows_data)
    await pilot.press("slash", *"job:nightly", "enter")
    await until(pilot, lambda: [r.id for r in main.table.rows_data] == [esc_id])
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(pilot.app.screen, EscalationScreen) and pilot.app.screen.detail)
    await pilot.pause(0.1)
    return pilot.app.screen


async def test_enter_on_an_escalation_shows_occurrences_acts_and_notifications(story):
    path, ids = story
    app = make_app(path)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_story(pilot, ids["esc"])
        text = screen_text(app)
        assert "could not extend file" in text  # the why, first
        assert screen.query_one("#occurrences").row_count == 3  # every run that raised it
        for who, verb in (("ana", "acknowledged"), ("bob", "snoozed")):
            assert verb in text and f"by {who}" in text
        assert "email" in text and "✓ sent" in text
        assert "webhook" in text and "✗ failed" in text and "HTTP 503" in text


async def test_enter_on_an_occurrence_opens_that_run(story):
    path, ids = story
    app = make_app(path)
    async with app.run_test(size=(100, 40)) as pilot:
        await open_story(pilot, ids["esc"])
        await pilot.press("enter")  # the newest occurrence
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        assert app.screen.run_id == ids["runs"]
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, EscalationScreen))
        await pilot.press("j", "j", "enter")  # the oldest
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        assert app.screen.run_id == ids["first_run"]


async def test_resolve_from_the_detail_is_attributed_and_shown(story):
    path, ids = story
    app = make_app(path)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_story(pilot, ids["esc"])
        await pilot.press("R")
        await until(pilot, lambda: screen.detail.escalation.state == "resolved")
        with Ledger(path) as led:
            row = led.one("SELECT resolved_by FROM escalations WHERE id = ?", (ids["esc"],))
        assert row[0] == "carol"
        await until(pilot, lambda: "by carol" in screen_text(app))


async def test_an_escalation_without_an_audit_trail_still_shows_its_run(tmp_path):
    path = tmp_path / "wk.db"
    ids = cf.build(path)  # inserted directly: no escalation events
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.screen
        await until(pilot, lambda: isinstance(main, MainScreen) and main.table.rows_data)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, EscalationScreen) and app.screen.detail)
        assert app.screen.query_one("#occurrences").row_count == 1
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))
        assert app.screen.run_id == ids["failed_run"]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_escalation_detail_snapshot(snap_compare, tmp_path, size):
    path = tmp_path / "wk.db"
    cf.build(path)
    ids = cf.add_escalation_story(path)
    app = WatchkeeperApp(ConsoleConfig(ledger=path, operator="ana", clock=lambda: cf.NOW, refresh=3600))

    async def ready(pilot):
        deadline = time.monotonic() + 10
        while pilot.app.screen.polls == 0 and time.monotonic() < deadline:
            await pilot.pause(0.02)
        pilot.app.push_screen(EscalationScreen(ids["esc"]))
        while not (isinstance(pilot.app.screen, EscalationScreen) and pilot.app.screen.detail) \
                and time.monotonic() < deadline:
            await pilot.pause(0.02)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=ready)


async def test_escalation_detail_says_stale_when_the_ledger_cannot_be_read_and_recovers(story, monkeypatch):
    import sqlite3

    path, ids = story
    app = make_app(path)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_story(pilot, ids["esc"])
        real = app.reader.call

        async def locked(fn):
            raise sqlite3.OperationalError("database is locked")

        monkeypatch.setattr(app.reader, "call", locked)
        await until(pilot, lambda: screen.stale_since is not None)
        assert "STALE since" in screen_text(app) and app.is_running
        monkeypatch.setattr(app.reader, "call", real)
        await until(pilot, lambda: screen.stale_since is None)
