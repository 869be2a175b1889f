"""The console, driven with Pilot: views, triage actions, filter, detail, live updates,
stale data, read-only, and two consoles racing on one escalation."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import OptionList

from console.screens.detail import DetailScreen
from console.screens.dialogs import ConfirmScreen, HelpScreen
from console.screens.main import MainScreen
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.pilot import esc_row, loaded, main, make_app, notes, type_text, until  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]


#: Local time is UTC (``utc`` in tests/conftest.py): the console's clocks read the machine's zone.
pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def db(tmp_path: Path):
    path = tmp_path / "wk.db"
    ids = cf.build(path)
    return path, ids


@pytest.mark.parametrize("key,view,expect", [
    ("1", "escalations", "backup-db"), ("2", "outcomes", "sync-mail"), ("3", "orphans", "sync-mail"),
    ("4", "jobs", "cleanup"),
])
async def test_number_keys_switch_views_and_show_rows(db, key, view, expect):
    app = make_app(db[0])
    async with app.run_test() as pilot:
        screen = await loaded(pilot)
        await pilot.press(key)
        await until(pilot, lambda: screen.table.VIEW == view and screen.table.rows_data)
        names = {screen.table.job_of(r) for r in screen.table.rows_data}
        assert expect in names


async def test_acknowledge_writes_through_core_and_reports(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test(notifications=True) as pilot:
        await loaded(pilot)
        await pilot.press("a")
        await until(pilot, lambda: esc_row(path, ids["esc_crit"])["state"] == "acknowledged")
        assert esc_row(path, ids["esc_crit"])["acked_by"] == "ana"
        await until(pilot, lambda: any("acknowledged escalation" in n for n in notes(app)))


async def test_bulk_acknowledge_with_space_marks(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test(notifications=True) as pilot:
        screen = await loaded(pilot)
        await pilot.press("space", "space")
        assert len(screen.table.marked) == 2
        await pilot.press("a")
        await until(pilot, lambda: esc_row(path, ids["esc_warn"])["state"] == "acknowledged")
        assert esc_row(path, ids["esc_crit"])["state"] == "acknowledged"
        await until(pilot, lambda: any("acknowledge: 2 done" in n for n in notes(app)))
        assert not screen.table.marked


async def test_snooze_picks_a_duration(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test() as pilot:
        await loaded(pilot)
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("2", "enter")  # 1 hour
        await until(pilot, lambda: esc_row(path, ids["esc_crit"])["state"] == "snoozed")
        assert esc_row(path, ids["esc_crit"])["snoozed_until"] == pytest.approx(cf.NOW + 3600)


async def test_retry_asks_first_and_queues_a_new_attempt(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test() as pilot:
        await loaded(pilot)  # escalation view: retry applies to the escalation's latest run
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await pilot.pause()
        with Ledger(path) as led:
            assert led.one("SELECT COUNT(*) FROM runs WHERE trigger='manual_retry'")[0] == 0
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")

        def queued():
            with Ledger(path) as led:
                return led.one("SELECT attempt, state FROM runs WHERE trigger='manual_retry'")
        await until(pilot, lambda: queued() is not None)
        assert tuple(queued()) == (2, "queued")


async def test_abandon_from_orphans_view(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test(notifications=True) as pilot:
        screen = await loaded(pilot)
        await pilot.press("3")
        await until(pilot, lambda: screen.table.VIEW == "orphans" and screen.table.rows_data)
        assert screen.table.current().id == ids["risky_run"]
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")

        def state():
            with Ledger(path) as led:
                return led.one("SELECT state FROM runs WHERE id=?", (ids["risky_run"],))[0]
        await until(pilot, lambda: state() == "abandoned")
        await until(pilot, lambda: any("abandoned" in n for n in notes(app)))


async def test_read_only_refuses_every_action(db):
    path, ids = db
    app = make_app(path, read_only=True)
    async with app.run_test(notifications=True) as pilot:
        await loaded(pilot)
        for key in ("a", "s", "r", "x"):
            app.clear_notifications()  # each key says it itself (a notice expires on a loaded machine)
            await pilot.press(key)
            await until(pilot, lambda: any("read-only" in n for n in notes(app)))
            assert isinstance(app.screen, MainScreen)
        assert esc_row(path, ids["esc_crit"])["state"] == "open"


async def test_filter_narrows_and_escape_clears(db):
    app = make_app(db[0])
    async with app.run_test() as pilot:
        screen = await loaded(pilot)
        await pilot.press("2")
        await until(pilot, lambda: screen.table.VIEW == "outcomes" and screen.table.rows_data)
        everything = len(screen.table.rows_data)
        await pilot.press("slash", *"job:sync", "enter")
        await until(pilot, lambda: {r.job for r in screen.table.rows_data} == {"sync-mail"})
        await pilot.press("escape")
        await until(pilot, lambda: len(screen.table.rows_data) == everything)
        assert screen.filter_text == ""


async def test_enter_opens_detail_and_escape_goes_back(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test() as pilot:
        screen = await loaded(pilot)
        await pilot.press("2")
        await until(pilot, lambda: screen.table.VIEW == "outcomes" and screen.table.rows_data)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        detail = app.screen
        assert detail.detail.run.id == screen.table.rows_data[0].id
        await pilot.press("slash", *"hello", "enter")
        await until(pilot, lambda: detail._matches)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))


async def test_help_and_quit(db):
    app = make_app(db[0])
    async with app.run_test() as pilot:
        await loaded(pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running)


async def test_two_consoles_race_on_one_escalation(db):
    path, ids = db
    first, second = make_app(path, operator="ana"), make_app(path, operator="bob")
    async with first.run_test(notifications=True) as p1, second.run_test(notifications=True) as p2:
        await loaded(p1)
        await loaded(p2)
        await p2.press("j", "k")  # bob has selected the critical row: his cursor follows it
        await p1.press("a")
        await until(p1, lambda: esc_row(path, ids["esc_crit"])["state"] == "acknowledged")
        await p2.press("a")  # bob's view still showed it open
        await until(p2, lambda: any("already acknowledged by ana" in n for n in notes(second)))
        assert esc_row(path, ids["esc_crit"])["acked_by"] == "ana"


async def test_live_update_from_another_process_keeps_cursor(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test() as pilot:
        screen = await loaded(pilot)
        await pilot.press("2")
        await until(pilot, lambda: screen.table.VIEW == "outcomes" and screen.table.rows_data)
        await pilot.press("j", "j")
        before = screen.table.current().id
        code = ("import sys; sys.path.insert(0, sys.argv[2]); from tests.kit import console_fixtures as cf;"
                "from core.ledger.connection import Ledger; db = Ledger(sys.argv[1]);"
                "db.write(lambda c: cf.add_run(db, 'sync-mail', state='failed', ended_at=cf.NOW - 1,"
                " exit_code=3, lineage='live-x'))")
        subprocess.run([sys.executable, "-c", code, str(path), str(ROOT)], check=True, timeout=30)
        await until(pilot, lambda: screen.table.rows_data[0].exit_code == 3)
        assert screen.table.current().id == before


async def test_pause_freezes_the_view(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test() as pilot:
        screen = await loaded(pilot)
        await pilot.press("2")
        await until(pilot, lambda: screen.table.VIEW == "outcomes" and screen.table.rows_data)
        await pilot.press("p")
        n = len(screen.table.rows_data)
        with Ledger(path) as led:
            led.write(lambda c: cf.add_run(led, "report", state="failed", ended_at=cf.NOW - 1, lineage="p1"))
        polls = screen.polls
        await until(pilot, lambda: screen.polls >= polls + 3)
        assert len(screen.table.rows_data) == n
        await pilot.press("p")
        await until(pilot, lambda: len(screen.table.rows_data) == n + 1)


async def test_ledger_error_shows_stale_and_recovers(db, monkeypatch):
    app = make_app(db[0])
    async with app.run_test() as pilot:
        screen = await loaded(pilot)
        real = app.reader.call

        async def locked(fn):
            raise sqlite3.OperationalError("database is locked")
        monkeypatch.setattr(app.reader, "call", locked)
        await until(pilot, lambda: screen.stale_since is not None)
        assert "STALE since" in str(screen.query_one("#header").render())
        assert app.is_running
        monkeypatch.setattr(app.reader, "call", real)
        await until(pilot, lambda: screen.stale_since is None)


async def test_command_palette_switches_view(db):
    app = make_app(db[0])
    async with app.run_test() as pilot:
        screen = await loaded(pilot)
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette) and app.focused is not None)
        await type_text(pilot, "View: jobs")
        options = app.screen.query_one(OptionList)
        await until(pilot, lambda: options.option_count > 0 and options.highlighted is not None)
        await pilot.press("enter")
        await until(pilot, lambda: screen.view == "jobs")


async def test_action_right_after_a_live_swap_of_the_selected_row_is_refused(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test(notifications=True) as pilot:
        screen = await loaded(pilot)
        first = screen.table.current().id
        with Ledger(path) as led:  # a new critical escalation lands on top of the untouched cursor
            new_id = led.write(lambda c: cf.add_escalation(led, "new-job", "failed", "critical", last_seen=cf.NOW))
        await until(pilot, lambda: screen.table.current() and screen.table.current().id == new_id)
        await pilot.press("a")
        await until(pilot, lambda: any("just changed" in n for n in notes(app)))
        assert any(f"(now on #{new_id} new-job)" in n for n in notes(app))  # which row it is on now
        assert esc_row(path, new_id)["state"] == "open" and esc_row(path, first)["state"] == "open"
        screen.table.changed_under_cursor_at = -1e9  # a moment later the operator has seen it
        await pilot.press("a")
        await until(pilot, lambda: esc_row(path, new_id)["state"] == "acknowledged")
