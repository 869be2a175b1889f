"""Issue 13 §1 and §6: the why first, and what a new user tripped over — ages that tick,
never "-0s", parent/task, partial as partial, columns sized to content, help that wraps
under its column, job and run apart in the detail header, empty states in 80 columns,
space marks and moves down, the palette's screenshot lands in a folder that exists."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from rich.console import Console

from console.app import ConsoleConfig, WatchkeeperApp
from console.screens.detail import DetailScreen
from console.screens.dialogs import help_table
from console.screens.main import MainScreen
from console.widgets.cells import age
from console.widgets.views import VIEWS
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.pilot import TEST_REFRESH_S, screen_text, until

#: Local time is UTC (``utc`` in tests/conftest.py): the console's clocks read the machine's zone.
pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "wk.db"
    cf.build(path)
    return path


class Clock:
    """A console clock the test moves by hand."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_app(path: Path, clock=lambda: cf.NOW, **kw) -> WatchkeeperApp:
    kw.setdefault("operator", "carol")
    return WatchkeeperApp(ConsoleConfig(ledger=path, clock=clock, refresh=TEST_REFRESH_S, **kw))


async def loaded(pilot) -> MainScreen:
    main = pilot.app.screen
    await until(pilot, lambda: isinstance(main, MainScreen) and main.polls > 0 and main.table.rows_data)
    return main


def row_text(table, row) -> list[str]:
    return [t.plain for t in table.cells(row)]


# §1 why first --------------------------------------------------------------------------------
async def test_preview_opens_with_the_reason_then_the_jobs_own_error_line(db):
    app = make_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await until(pilot, lambda: "connection to db01:5432 refused" in screen_text(app))
        text = screen_text(app)
        assert text.index("backup-db exited 1") < text.index("connection to db01:5432 refused")
        assert "starting" not in text.split("backup-db exited 1", 1)[1].split("\n")[1]  # the error line, not the chatter


async def test_run_detail_opens_with_why_and_keeps_json_one_key_away(db, tmp_path):
    ids = cf.build(tmp_path / "other.db")
    path = tmp_path / "other.db"
    with Ledger(path) as led:
        led.write(lambda c: c.execute(
            "UPDATE job_outcomes SET handoff = ?, verification = ?, handoff_findings = '[]' WHERE run_id = ?",
            ('{"status": "partial", "confidence": 0.4, "files_changed": ["out/report.csv"], "notes": "2 of 3 regions"}',
             '{"ok": false, "checks": [{"name": "file_changed", "ok": false, "detail": "out/report.csv: does not exist",'
             ' "soft": false, "path": "out/report.csv", "size": null}, {"name": "exit_status_agree", "ok": true,'
             ' "detail": "exit 0, status partial", "soft": false, "path": null, "size": null}]}', ids["ok_run"])))
    app = make_app(path)
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(pilot)
        app.push_screen(DetailScreen(ids["ok_run"]))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        await pilot.pause(0.1)
        text = screen_text(app)
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        job_i = next(i for i, ln in enumerate(lines) if ln.startswith("job "))
        assert lines[job_i + 1].startswith("run ")  # job and run on their own lines
        assert lines[job_i + 2].startswith("why ")  # then the why, before any metadata
        assert text.index("why") < text.index("trigger")
        assert "◐ partial" in text  # the handoff said partial: not "✓ ok"
        assert "file_changed out/report.csv" in text and "does not exist" in text  # claimed vs found
        assert '"checks"' not in text  # readable, not JSON
        await pilot.press("J")
        await until(pilot, lambda: '"checks"' in screen_text(app))


async def test_a_plain_shell_job_without_handoff_is_not_a_problem(db):
    ids = cf.build(db.parent / "p.db")
    path = db.parent / "p.db"
    with Ledger(path) as led:
        led.write(lambda c: c.execute(
            "UPDATE job_outcomes SET handoff_findings = ? WHERE run_id = ?",
            ('[{"code": "missing", "message": "no handoff written (exit code and output are the evidence)"}]',
             ids["ok_run"])))
    app = make_app(path)
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(pilot)
        app.push_screen(DetailScreen(ids["ok_run"]))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        text = screen_text(app)
        assert "a plain shell job" in text and "problem" not in text


# §6 polish -----------------------------------------------------------------------------------
def test_ages_never_read_minus_zero():
    assert age(-0.4) == "0s" and age(0.2) == "0s" and age(-5) == "-5s"


async def test_ages_tick_every_second_without_a_ledger_change(db):
    clock = Clock(cf.NOW)
    app = make_app(db, clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        main = await loaded(pilot)
        first = row_text(main.table, main.table.rows_data[0])[4]
        assert first == "1h 5m"
        clock.t += 3600  # an hour on, nothing written
        await until(pilot, lambda: "2h 5m" in screen_text(app))


async def test_partial_and_subtasks_show_as_such_in_outcomes_and_jobs(db):
    with Ledger(db) as led:
        def tx(c):
            rid = cf.add_run(led, "report", state="succeeded", ended_at=cf.NOW - 5, exit_code=0, lineage="part",
                             status="partial")
            sub = cf.add_run(led, "report", state="failed", ended_at=cf.NOW - 6, exit_code=1, lineage="sub")
            c.execute("UPDATE runs SET task = 'eu-west', parent_run_id = ? WHERE id = ?", (rid, sub))
        led.write(tx)
    app = make_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        main = await loaded(pilot)
        await pilot.press("2")
        await until(pilot, lambda: main.table.VIEW == "outcomes" and main.table.rows_data)
        cells = [row_text(main.table, r) for r in main.table.rows_data[:2]]
        assert cells[0][1] == "report" and "partial" in cells[0][3] and "ok" not in cells[0][3]
        assert cells[1][1] == "report/eu-west"
        await pilot.press("4")
        await until(pilot, lambda: main.table.VIEW == "jobs" and main.table.rows_data)
        report = next(r for r in main.table.rows_data if r.name == "report")
        assert "partial" in row_text(main.table, report)[3]


@pytest.mark.parametrize("width", [80, 120])
async def test_columns_are_sized_to_their_content(db, width):
    with Ledger(db) as led:
        led.write(lambda c: c.execute("UPDATE escalations SET owner = 'maria.k'"))
    app = make_app(db)
    async with app.run_test(size=(width, 24)) as pilot:
        main = await loaded(pilot)
        table = main.table
        cols = ("sel",) + tuple(c.key for c in table._columns(table.scrollable_content_region.width))
        widths = dict(zip(cols, table._column_widths(table.scrollable_content_region.width), strict=True))
        assert widths["owner"] >= len("maria.k")  # the owner is not cut
        if width == 80:
            assert widths["job"] <= len("backup-db") + 6  # Job no longer takes the spare room
        else:
            assert widths["why"] > widths["job"]  # the spare room goes to the why


def test_help_wraps_under_its_own_column():
    console = Console(width=70, record=True)
    console.print(help_table())
    lines = console.export_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if "command palette" in ln)
    indent = lines[start].index("command palette")
    assert lines[start + 1][:indent].strip() == ""  # the continuation starts under the text
    assert lines[start + 1][indent:].strip()


def test_empty_state_messages_fit_80_columns():
    for view in VIEWS:
        assert len(view.EMPTY) + 2 <= 78, view.EMPTY


async def test_space_marks_the_row_and_moves_down(db):
    app = make_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        main = await loaded(pilot)
        first = main.table.current().id
        await pilot.press("space")
        assert main.table.cursor_row == 1 and list(main.table.marked) == [str(first)]


async def test_palette_screenshot_saves_to_the_folder_given_and_says_where(db, tmp_path):
    shots = tmp_path / "shots"
    app = make_app(db, screenshot_dir=shots)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await loaded(pilot)
        app.action_screenshot()
        await pilot.pause(0.1)
        saved = list(shots.glob("*.svg"))
        assert len(saved) == 1
        assert any(str(saved[0]) in str(n.message) for n in app._notifications)


def test_help_screen_snapshot_at_80x24(snap_compare, db):
    """The help screen at 80 columns: sections, keys, and descriptions wrapping under their
    own column (looked at: no line starts under the keys)."""
    app = WatchkeeperApp(ConsoleConfig(ledger=db, operator="ana", clock=lambda: cf.NOW, refresh=3600))

    async def ready(pilot):
        deadline = time.monotonic() + 10
        while pilot.app.screen.polls == 0 and time.monotonic() < deadline:
            await pilot.pause(0.02)
        await pilot.press("question_mark")
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(80, 24), run_before=ready)
