"""Snapshots of each main view at 80×24 and 120×40, dark and light. Time is frozen
(``console_fixtures.NOW``, TZ=UTC) so ages and clocks are deterministic."""

from __future__ import annotations

import time

import pytest

from console.app import ConsoleConfig, WatchkeeperApp
from tests import console_fixtures as cf


@pytest.fixture(autouse=True)
def _utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


VIEWS = {"escalations": "1", "outcomes": "2", "orphans": "3", "jobs": "4"}


@pytest.mark.parametrize("theme", ["dark", "light"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize("view", list(VIEWS))
def test_main_views(snap_compare, tmp_path, view, size, theme):
    path = tmp_path / "wk.db"
    cf.build(path)
    app = WatchkeeperApp(ConsoleConfig(ledger=path, operator="ana", theme=theme, clock=lambda: cf.NOW,
                                       refresh=3600))

    async def ready(pilot):
        screen = pilot.app.screen
        deadline = time.monotonic() + 10
        while screen.polls == 0 and time.monotonic() < deadline:
            await pilot.pause(0.02)
        await pilot.press(VIEWS[view])
        while (screen.table.VIEW != view or not screen.table.rows_data) and time.monotonic() < deadline:
            await pilot.pause(0.02)
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=size, run_before=ready)


def test_run_detail(snap_compare, tmp_path):
    path = tmp_path / "wk.db"
    ids = cf.build(path)
    app = WatchkeeperApp(ConsoleConfig(ledger=path, operator="ana", clock=lambda: cf.NOW, refresh=3600))

    async def ready(pilot):
        from console.screens.detail import DetailScreen

        deadline = time.monotonic() + 10
        while pilot.app.screen.polls == 0 and time.monotonic() < deadline:
            await pilot.pause(0.02)
        pilot.app.push_screen(DetailScreen(ids["failed_run"]))
        while not (isinstance(pilot.app.screen, DetailScreen) and pilot.app.screen.detail) \
                and time.monotonic() < deadline:
            await pilot.pause(0.02)
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(80, 24), run_before=ready)
