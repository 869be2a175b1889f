"""A new user's findings about live runs and the runner, one Pilot test each:

* the "Live & orphans" view (key 3) lists every live run — a healthy ``running`` one too —
  after the runs at risk and before orphaned runs, and ``x`` there abandons a healthy live
  run through ``core.actions`` (after the confirmation dialog), killing its process group;
* the header says the runner is down as soon as its process is dead on this host (SIGKILL),
  the judgement ``watchkeeper status`` makes, not when its lease runs out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from console.screens.detail import DetailScreen
from console.screens.dialogs import ConfirmScreen
from console.widgets.header_bar import HeaderBar
from core import liveness
from core.ledger import reads
from core.ledger import runners as status
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.pilot import line_of, loaded, make_app, notes, until

#: Local time is UTC (``utc`` in tests/conftest.py): the console's clocks read the machine's zone.
pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def sleepers():
    """Start real processes (each in its own process group, as the runner starts jobs);
    whatever is left is killed afterwards."""
    procs: list[subprocess.Popen] = []

    def start() -> tuple[subprocess.Popen, float]:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
        procs.append(proc)
        return proc, psutil.Process(proc.pid).create_time()

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def write(path: Path, fn):
    with Ledger(path) as led:
        return led.write(lambda c: fn(led, c))


def add_live(path: Path, job: str, proc: subprocess.Popen, create_time: float, *, started_at: float) -> int:
    """A healthy running run: its process alive, its lease valid, owned by the fresh runner r1."""
    def go(led, conn):
        run_id = cf.add_run(led, job, state="running", ended_at=None, pid=proc.pid, pid_create_time=create_time,
                            pgid=proc.pid, lease_until=cf.NOW + 20, runner_id="r1", lineage=f"live-{job}-{proc.pid}")
        conn.execute("UPDATE runs SET started_at = ? WHERE id = ?", (started_at, run_id))
        return run_id
    return write(path, go)


def header_text(screen) -> str:
    return line_of(screen.query_one(HeaderBar))


# -- the view ---------------------------------------------------------------------------------

def test_live_view_lists_at_risk_then_healthy_live_newest_first_then_orphaned(tmp_path, sleepers):
    path = tmp_path / "wk.db"
    ids = cf.build(path)
    older = add_live(path, "report", *sleepers(), started_at=cf.NOW - 300)
    newer = add_live(path, "sync-mail", *sleepers(), started_at=cf.NOW - 30)
    with Ledger(path) as led:
        rows = reads.orphans_page(led, now=cf.NOW).rows
        assert [(r.id, r.at_risk, r.live) for r in rows] == [
            (ids["risky_run"], True, True), (newer, False, True), (older, False, True),
            (ids["orphan_run"], False, False)]
        assert rows[0].risk == "lease expired" and rows[1].risk == ""
        assert rows[1].lease_age_s == pytest.approx(-20)
        assert reads.count_rows(led, "orphans", now=cf.NOW) == 4
        flt = reads.parse_filter("state:running")
        assert [r.id for r in reads.orphans_page(led, now=cf.NOW, flt=flt).rows] == [ids["risky_run"], newer, older]
        assert reads.count_rows(led, "orphans", now=cf.NOW, flt=flt) == 3
        # offsets walk the combined list, live rows first
        assert [r.id for r in reads.orphans_page(led, now=cf.NOW, offset=2, limit=2).rows] == [
            older, ids["orphan_run"]]


def test_a_live_run_whose_runner_process_died_here_is_at_risk_at_once(tmp_path, sleepers):
    path = tmp_path / "wk.db"
    cf.build(path)
    proc, ct = sleepers()
    run_id = add_live(path, "report", *sleepers(), started_at=cf.NOW - 30)
    write(path, lambda led, c: c.execute("UPDATE runners SET hostname = ?, pid = ?, pid_create_time = ? WHERE id = 'r1'",
                                         (liveness.hostname(), proc.pid, ct)))
    with Ledger(path) as led:
        assert not next(r for r in reads.orphans_page(led, now=cf.NOW).rows if r.id == run_id).at_risk
    proc.kill()
    proc.wait(10)
    with Ledger(path) as led:  # heartbeat and lease still fresh: only the dead process tells
        row = next(r for r in reads.orphans_page(led, now=cf.NOW).rows if r.id == run_id)
    assert row.at_risk and row.risk == "runner gone"


@pytest.mark.slow
async def test_a_healthy_running_run_is_listed_and_x_abandons_it(tmp_path, sleepers):
    path = tmp_path / "wk.db"
    cf.build(path)
    proc, ct = sleepers()
    run_id = add_live(path, "report", proc, ct, started_at=cf.NOW - 30)
    app = make_app(path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = await loaded(pilot)
        await pilot.press("3")
        await until(pilot, lambda: screen.table.VIEW == "orphans" and len(screen.table.rows_data) == 3)
        assert "[3 Live & orphans]" in line_of(screen.query_one("#viewbar"))
        await pilot.press("j")  # past the at-risk run, onto the healthy one
        row = screen.table.current()
        assert (row.id, row.state, row.at_risk) == (run_id, "running", False)
        table_line = line_of(screen.table, 2)
        assert "▸ running" in table_line and "ok 20s" in table_line and str(proc.pid) in table_line
        assert "running since" in line_of(screen.query_one("#preview"))
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert proc.poll() is None  # nothing happens before the answer
        await pilot.press("y")
        await until(pilot, lambda: write(path, lambda led, c: led.one(
            "SELECT state FROM runs WHERE id=?", (run_id,))[0]) == "abandoned")
        await until(pilot, lambda: any("abandoned" in n for n in notes(app)))
        proc.wait(10)  # its process group was killed (the test reaps its child)
        assert proc.returncode == -signal.SIGTERM
        with Ledger(path) as led:
            assert led.one("SELECT actor FROM events WHERE run_id=? AND kind='abandon_kill'", (run_id,))[0] == \
                "operator:ana"
        # It leaves the live part of the view: now an abandoned run, shown under Outcomes.
        await until(pilot, lambda: run_id not in [r.id for r in screen.table.rows_data])


@pytest.mark.slow
async def test_view_bar_names_live_and_orphans_at_80_columns(tmp_path):
    path = tmp_path / "wk.db"
    cf.build(path)
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        bar = line_of(screen.query_one("#viewbar"))
        assert "3 Live & orphans" in bar and "4 Jobs" in bar and "1/3" in bar
        await pilot.press("3")
        await until(pilot, lambda: screen.table.VIEW == "orphans" and screen.table.rows_data)
        await pilot.press("/", *"job:sync", "enter")
        await until(pilot, lambda: screen.filter_text == "job:sync")
        assert "filter: job:sync" in line_of(screen.query_one("#viewbar"))


# -- the runner in the header -------------------------------------------------------------------

async def test_header_says_runner_down_as_soon_as_its_process_is_killed(tmp_path, sleepers):
    path = tmp_path / "wk.db"
    ids = cf.build(path)
    runner, ct = sleepers()  # stands in for the runner process, on this host
    write(path, lambda led, c: c.execute("UPDATE runners SET hostname = ?, pid = ?, pid_create_time = ? WHERE id = 'r1'",
                                         (liveness.hostname(), runner.pid, ct)))
    # its predecessor ran here too, and stopped (on another host, unstopped, that host would be a down one)
    write(path, lambda led, c: c.execute("UPDATE runners SET hostname = ?, stopped_at = heartbeat_at WHERE id = 'r0'",
                                         (liveness.hostname(),)))
    app = make_app(path)  # the clock is frozen: the heartbeat (2 s old) never goes stale
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        assert "● runner up" in header_text(screen)
        pilot.app.push_screen(DetailScreen(ids["failed_run"]))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.polls > 0)
        detail = app.screen
        assert "● runner up" in header_text(detail)
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(10)
        with Ledger(path) as led:  # what `watchkeeper status` says
            assert status.runner_gap(led, now=cf.NOW) is not None
        # The console's clock is fixed (cf.NOW), so "for 2s" is what it computes from the ledger
        # on its next polls; it says so without waiting for an idle refresh or the lease.
        await until(pilot, lambda: "✗ no runner for 2s" in header_text(detail))
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        await until(pilot, lambda: "✗ no runner for 2s" in header_text(screen))


def test_runner_status_matches_watchkeeper_status(tmp_path):
    path = tmp_path / "wk.db"
    cf.build(path)
    with Ledger(path) as led:
        assert reads.runner_status(led, cf.NOW) == (True, "runner up")  # r1 on another host, fresh
        assert reads.runner_status(led, cf.NOW + 7 * 60) == (False, "no runner for 7m 2s")
        assert status.runner_gap(led, now=cf.NOW + 7 * 60) is not None
        # Heartbeat stale but the process (ours) alive on this host: stalled, not "gone".
        led.write(lambda c: c.execute(
            "UPDATE runners SET hostname = ?, pid = ?, pid_create_time = ?, heartbeat_at = ? WHERE id = 'r1'",
            (liveness.hostname(), os.getpid(), psutil.Process().create_time(), cf.NOW - 100)))
        assert reads.runner_status(led, cf.NOW) == (False, "runner stalled for 1m 40s")
        assert status.status(led, now=cf.NOW)["stalled"] == ["r1"]
        led.write(lambda c: c.execute("UPDATE runners SET stopped_at = ? WHERE id = 'r1'", (cf.NOW - 180,)))
        assert reads.runner_status(led, cf.NOW) == (False, "runner stopped 3m ago")
        s = reads.summary(led, cf.NOW)
        assert (s.runner_up, s.runner_text) == (False, "runner stopped 3m ago")


def test_runner_status_says_a_dead_host_of_the_fleet_is_down(tmp_path):
    path = tmp_path / "wk.db"
    cf.build(path)
    with Ledger(path) as led:
        assert reads.runner_status(led, cf.NOW) == (True, "runner up")  # r1 on another host, fresh
        led.write(lambda c: c.execute(
            "INSERT INTO runners (id, hostname, pid, started_at, heartbeat_at, heartbeat_s, lease_s)"
            " VALUES ('db1-r', 'db1', 4242, ?, ?, 2, 10)", (cf.NOW - 900, cf.NOW - 300)))
        assert reads.runner_status(led, cf.NOW) == (False, "host db1 down")
        led.write(lambda c: c.execute("UPDATE runners SET stopped_at = ? WHERE id = 'db1-r'", (cf.NOW - 300,)))
        assert reads.runner_status(led, cf.NOW) == (True, "runner up")  # stopped on purpose: not down
