"""Job history (issue 13 §3) and the job controls' keys (§4): ``h`` on a job shows its last
runs as a chart coloured by state, the success rate, the learned duration range, the next
run in the job's timezone and in UTC; enter opens a run; ``o`` its outcomes; ``P`` / ``t``
pause, resume and run it now, each after a confirmation and attributed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from console.app import ConsoleConfig, WatchkeeperApp
from console.screens.detail import DetailScreen
from console.screens.dialogs import ConfirmScreen
from console.screens.history import JobHistoryScreen, next_run_text
from console.screens.main import MainScreen
from console.screens.operator_actions import job_controls_available
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.pilot import TEST_REFRESH_S, screen_text, until

#: Local time is UTC (``utc`` in tests/conftest.py): the console's clocks read the machine's zone.
pytestmark = pytest.mark.usefixtures("utc")


def add_berlin_job(path: Path) -> None:
    """``etl-berlin``: cron 03:00 Europe/Berlin, 14 successes of 10–14 s, one partial, two failures."""
    with Ledger(path) as db:
        def tx(c):
            cf._job(db, "etl-berlin", "0 3 * * *")
            spec = {"name": "etl-berlin", "command": ["true"], "schedule": "0 3 * * *", "timezone": "Europe/Berlin"}
            c.execute("UPDATE jobs SET spec = ? WHERE name = 'etl-berlin'", (json.dumps(spec),))
            for i in range(17):
                state, status = ("failed", "failed") if i in (4, 11) else ("succeeded", "partial" if i == 15 else "success")
                rid = cf.add_run(db, "etl-berlin", state=state, ended_at=cf.NOW - 86400 * (17 - i),
                                 exit_code=0 if state == "succeeded" else 2, lineage=f"b{i}", status=status,
                                 stderr="ERROR: source table missing\n" if state == "failed" else None)
                c.execute("UPDATE job_outcomes SET duration_s = ? WHERE run_id = ?", (10.0 + i % 5, rid))
        db.write(tx)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "wk.db"
    cf.build(path)
    add_berlin_job(path)
    return path


def make_app(path: Path, **kw) -> WatchkeeperApp:
    kw.setdefault("operator", "carol")
    return WatchkeeperApp(ConsoleConfig(ledger=path, clock=lambda: cf.NOW, refresh=TEST_REFRESH_S, **kw))


async def open_history(pilot, job: str = "etl-berlin") -> JobHistoryScreen:
    main = pilot.app.screen
    await until(pilot, lambda: isinstance(main, MainScreen) and main.polls > 0)
    await pilot.press("4")
    await until(pilot, lambda: main.table.VIEW == "jobs" and main.table.rows_data)
    while main.table.current().name != job:
        await pilot.press("j")
    await pilot.press("h")
    await until(pilot, lambda: isinstance(pilot.app.screen, JobHistoryScreen) and pilot.app.screen.history)
    await pilot.pause(0.1)
    return pilot.app.screen


def test_next_run_is_given_in_the_jobs_zone_and_in_utc():
    nxt = cf.NOW + 15 * 3600  # 2026-01-02 03:00 UTC = 04:00 CET
    assert next_run_text(nxt, "Europe/Berlin", cf.NOW) == "Fri 02 Jan 04:00 CET (03:00 UTC), in 15h"
    assert next_run_text(nxt, None, cf.NOW) == "Fri 02 Jan 03:00 UTC, in 15h"  # TZ=UTC here
    assert next_run_text(nxt, "UTC", cf.NOW) == "Fri 02 Jan 03:00 UTC, in 15h"
    assert next_run_text(None, None, cf.NOW) == "none scheduled"


def test_a_job_without_a_timezone_shows_the_machines_zone_and_utc(monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert next_run_text(cf.NOW + 15 * 3600, None, cf.NOW) == "Thu 01 Jan 22:00 EST (03:00 UTC), in 15h"
    finally:
        monkeypatch.setenv("TZ", "UTC")
        time.tzset()


async def test_history_shows_rate_learned_range_next_run_and_chart(db):
    app = make_app(db)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_history(pilot)
        text = screen_text(app)
        assert "Europe/Berlin" in text and "CET" in text and "UTC)" in text  # next run, both zones
        # 15 of 17 slots succeeded (each by its final attempt; the partial one succeeded too)
        assert "88% of the last 17 runs" in text
        assert "usual" in text and "median" in text and "from 14 successes" in text
        chart = screen.query_one("#summary").render()
        assert "▁" in str(chart) or "█" in str(chart)
        assert "◐ partial" in text  # partial is not shown as ✓ ok
        assert screen.query_one("#runs").row_count == 17


async def test_enter_opens_a_run_and_o_shows_the_jobs_outcomes(db):
    app = make_app(db)
    async with app.run_test(size=(100, 40)) as pilot:
        screen = await open_history(pilot)
        newest = screen.history.runs[0].id
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        assert app.screen.run_id == newest
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, JobHistoryScreen))
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, MainScreen) and app.screen.view == "outcomes"
                    and app.screen.table.rows_data)
        assert {r.job for r in app.screen.table.rows_data} == {"etl-berlin"}


async def test_jobs_view_has_a_sparkline_column(db):
    app = make_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.screen
        await until(pilot, lambda: isinstance(main, MainScreen) and main.polls > 0)
        await pilot.press("4")
        await until(pilot, lambda: main.table.VIEW == "jobs" and main.table.rows_data)
        row = next(r for r in main.table.rows_data if r.name == "etl-berlin")
        cells = main.table.cells(row)
        recent = [c.key for c in main.table.COLUMNS].index("recent")
        assert len(cells[recent].plain) == 10 and set(cells[recent].plain) <= set("▁▂▃▄▅▆▇█✗")
        assert {sp.style for sp in cells[recent].spans} >= {"green", "red"}  # coloured by state


@pytest.mark.skipif(not job_controls_available(), reason="core.actions has no job pause yet")
async def test_pause_resume_and_run_now_ask_first_and_are_attributed(db):
    app = make_app(db)
    async with app.run_test(size=(100, 40), notifications=True) as pilot:
        screen = await open_history(pilot)
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")  # declined: nothing changes
        await until(pilot, lambda: isinstance(app.screen, JobHistoryScreen))
        assert not screen.history.job.paused_at
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: screen.history.job.paused_at)
        assert "carol" in str(screen.history.job.paused_by)
        assert "paused by carol" in screen_text(app)
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: not screen.history.job.paused_at)
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        with Ledger(db) as led:
            await until(pilot, lambda: led.one("SELECT COUNT(*) FROM runs WHERE job = 'etl-berlin'"
                                               " AND state = 'queued'")[0] == 1)
            ev = led.one("SELECT actor FROM events WHERE kind = 'run_queued' AND job = 'etl-berlin'"
                         " ORDER BY id DESC LIMIT 1")
        assert ev[0] == "operator:carol"


@pytest.mark.skipif(not job_controls_available(), reason="core.actions has no job pause yet")
async def test_jobs_view_pause_key_asks_and_marks_the_row(db):
    app = make_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        main = app.screen
        await until(pilot, lambda: isinstance(main, MainScreen) and main.polls > 0)
        await pilot.press("4")
        await until(pilot, lambda: main.table.VIEW == "jobs" and main.table.rows_data)
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: main.table.current() and main.table.current().paused_at)
        assert main.table.cells(main.table.current())[0].plain.startswith("‖ ")


async def test_read_only_console_refuses_job_controls(db):
    app = make_app(db, read_only=True)
    async with app.run_test(size=(100, 40), notifications=True) as pilot:
        await open_history(pilot)
        await pilot.press("t")
        await pilot.pause(0.2)
        assert isinstance(app.screen, JobHistoryScreen)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_job_history_snapshot(snap_compare, tmp_path, size):
    path = tmp_path / "wk.db"
    cf.build(path)
    add_berlin_job(path)
    app = WatchkeeperApp(ConsoleConfig(ledger=path, operator="ana", clock=lambda: cf.NOW, refresh=3600))

    async def ready(pilot):
        deadline = time.monotonic() + 10
        while pilot.app.screen.polls == 0 and time.monotonic() < deadline:
            await pilot.pause(0.02)
        pilot.app.push_screen(JobHistoryScreen("etl-berlin"))
        while not (isinstance(pilot.app.screen, JobHistoryScreen) and pilot.app.screen.history) \
                and time.monotonic() < deadline:
            await pilot.pause(0.02)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=ready)
