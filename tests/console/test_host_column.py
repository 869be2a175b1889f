"""On a ledger whose runners ran on more than one host, the run tables (Outcomes, Live &
orphans) show a Host column and the run detail says where the run was spawned; on a lone
host's ledger the tables are as they were (80x24 unchanged)."""

from __future__ import annotations

import pytest

from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.pilot import loaded, make_app, screen_text, until

pytestmark = [pytest.mark.usefixtures("utc"), pytest.mark.slow]


def _columns(screen) -> list[str]:
    table = screen.table
    return [c.key for c in table._columns(table.size.width)]


async def _outcomes(pilot):
    screen = await loaded(pilot)
    await pilot.press("2")
    await until(pilot, lambda: screen.table.VIEW == "outcomes" and screen.table.rows_data)
    return screen


async def test_one_host_shows_no_host_column(tmp_path):
    path = tmp_path / "wk.db"
    cf.build(path)
    with Ledger(path) as led:
        led.write(lambda c: c.execute("UPDATE runs SET host = 'host'"))
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _outcomes(pilot)
        await pilot.pause(0.1)
        assert "host" not in _columns(screen)
        await pilot.press("3")
        await until(pilot, lambda: screen.table.VIEW == "orphans" and screen.table.rows_data)
        assert "host" not in _columns(screen)


async def test_runs_of_two_hosts_show_where_each_ran(tmp_path):
    path = tmp_path / "wk.db"
    ids = cf.build(path)
    with Ledger(path) as led:
        led.write(lambda c: c.execute(
            "INSERT INTO runners (id, hostname, pid, started_at, heartbeat_at, heartbeat_s, lease_s)"
            " VALUES ('r9', 'db1', 1, ?, ?, 5, 30)", (cf.NOW - 600, cf.NOW - 2)))
        led.write(lambda c: c.execute("UPDATE runs SET host = CASE WHEN id % 2 = 0 THEN 'db1' ELSE 'host' END"))
        on = led.one("SELECT host FROM runs WHERE id = ?", (ids["failed_run"],))[0]
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _outcomes(pilot)
        await until(pilot, lambda: "host" in _columns(screen))
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "Host" in text and "db1" in text
        await pilot.press("3")
        await until(pilot, lambda: screen.table.VIEW == "orphans" and screen.table.rows_data)
        await until(pilot, lambda: "host" in _columns(screen))
    async with make_app(path).run_test(size=(100, 40)) as pilot:
        from console.screens.detail import DetailScreen
        screen = await _outcomes(pilot)
        table = screen.table
        row = next(i for i, r in enumerate(table.rows_data) if table.run_id_of(r) == ids["failed_run"])
        table.move_cursor(table.window_start + row)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(pilot.app.screen, DetailScreen) and "pid" in screen_text(pilot.app))
        await pilot.pause(0.1)
        assert f" on {on} (runner" in screen_text(pilot.app)
