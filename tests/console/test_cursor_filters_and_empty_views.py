"""A new user's report from tmux at 80×24, one Pilot test per finding: the run detail and
its header update live; the filter label fits the view bar; the cursor stays put after an
action and on the top row until moved; escalations say why; empty views say so; the snooze
dialog names its escalation; esc from a job's outcomes returns to Jobs; attempt rows fit one
line, skipped verification reads as skipped, fan-out sub-tasks show; ``kind:``/``state:``
filters are exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.geometry import Region

from console.screens.detail import DetailScreen
from console.screens.dialogs import SnoozeScreen
from console.screens.main import MainScreen
from console.widgets.header_bar import HeaderBar
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.pilot import esc_row, line_of, loaded, make_app, type_text, until

#: Local time is UTC (``utc`` in tests/conftest.py): the console's clocks read the machine's zone.
pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def db(tmp_path: Path):
    path = tmp_path / "wk.db"
    return path, cf.build(path)


def write(path: Path, fn) -> int:
    with Ledger(path) as led:
        return led.write(lambda c: fn(led, c))


async def open_detail(pilot, run_id: int) -> DetailScreen:
    await loaded(pilot)
    pilot.app.push_screen(DetailScreen(run_id))
    await until(pilot, lambda: isinstance(pilot.app.screen, DetailScreen) and pilot.app.screen.detail is not None)
    return pilot.app.screen


# 1 -------------------------------------------------------------------------------------------
async def test_run_detail_and_its_header_update_live_keeping_the_scroll(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        detail = await open_detail(pilot, ids["failed_run"])
        header = detail.query_one(HeaderBar)
        assert "▲1" in str(header.render())
        for _ in range(6):
            await pilot.press("j")
        body = detail.query_one("#body")
        y = body.scroll_y
        assert y > 0
        lineage = detail.detail.run.lineage
        retry = write(path, lambda led, c: cf.add_run(led, "backup-db", state="queued", ended_at=None, attempt=2,
                                                      lineage=lineage))
        await until(pilot, lambda: len(detail.detail.attempts) == 2)
        assert "… queued" in str(detail.query_one("#content").render())
        write(path, lambda led, c: c.execute("UPDATE runs SET state='failed', ended_at=?, exit_code=1 WHERE id=?",
                                             (cf.NOW - 1, retry)))
        await until(pilot, lambda: detail.detail.attempts[1].state == "failed")
        await pilot.pause(0.1)
        assert body.scroll_y == y  # the reader stays where they were
        write(path, lambda led, c: cf.add_escalation(led, "report", "failed", "critical", run_id=retry))
        await until(pilot, lambda: "▲2" in str(header.render()))
        # The runner dies while the operator reads: the header says so.
        write(path, lambda led, c: c.execute("UPDATE runners SET stopped_at = ?", (cf.NOW - 60,)))
        await until(pilot, lambda: "runner stopped" in str(header.render()))
        assert isinstance(app.screen, DetailScreen)


# 2 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flt", ["kind:timed_out", "state:failed job:flaky-sync"])
async def test_filter_label_fits_the_view_bar_at_80_columns(db, flt):
    app = make_app(db[0])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        await pilot.press("slash", *flt, "enter")
        await until(pilot, lambda: screen.filter_text == flt)
        bar = screen.query_one("#viewbar")
        await until(pilot, lambda: f"filter: {flt}" in line_of(bar))
        assert bar.render_lines(Region(0, 1, bar.region.width, 1))[0].text.strip() == ""  # one line only
        assert f"filter: {flt}" in line_of(bar)


async def test_a_filter_too_long_for_the_bar_is_cut_with_an_ellipsis(db):
    app = make_app(db[0])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        flt = "job:a-very-long-job-name-that-never-fits state:failed kind:verification_failed"
        await pilot.press("slash")
        await type_text(pilot, flt)  # one paste: this test is about the bar, not typing
        await pilot.press("enter")
        await until(pilot, lambda: screen.filter_text == flt)
        bar = screen.query_one("#viewbar")
        await until(pilot, lambda: "filter: job:a-very" in line_of(bar))
        assert line_of(bar).rstrip().endswith("…")


async def test_job_enter_filter_is_shown(db):
    app = make_app(db[0])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        await pilot.press("4")
        await until(pilot, lambda: screen.table.VIEW == "jobs" and screen.table.rows_data)
        await pilot.press("enter")  # backup-db
        await until(pilot, lambda: screen.view == "outcomes" and screen.table.rows_data)
        await until(pilot, lambda: "filter: job:backup-db" in line_of(screen.query_one("#viewbar")))


# 3 -------------------------------------------------------------------------------------------
async def test_acknowledge_keeps_the_cursor_in_place_so_a_walks_the_list(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        table = screen.table
        assert table.current().id == ids["esc_crit"]
        await pilot.press("a")
        await until(pilot, lambda: esc_row(path, ids["esc_crit"])["state"] == "acknowledged")
        await until(pilot, lambda: table.current().id == ids["esc_warn"])
        assert table.cursor_row == 0  # the next open escalation took the acked one's place
        # A new escalation arriving after the action does not slide under the cursor: it now
        # follows the row that took the place.
        write(path, lambda led, c: cf.add_escalation(led, "new-job", "failed", "critical", last_seen=cf.NOW))
        await until(pilot, lambda: table.total == 4)
        assert table.current().id == ids["esc_warn"] and table.cursor_row == 1
        await pilot.press("a")
        await until(pilot, lambda: esc_row(path, ids["esc_warn"])["state"] == "acknowledged")
        await pilot.pause(0.2)
        assert table.cursor_row == 1


async def test_live_rows_follow_the_selected_item_once_moved(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        table = screen.table
        await pilot.press("j")
        assert table.current().id == ids["esc_warn"]
        write(path, lambda led, c: cf.add_escalation(led, "new-job", "failed", "critical", last_seen=cf.NOW))
        await until(pilot, lambda: table.total == 4)
        assert table.current().id == ids["esc_warn"] and table.cursor_row == 2


async def test_on_first_open_the_cursor_stays_on_the_top_row_while_rows_arrive(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        table = screen.table
        for i in range(3):
            write(path, lambda led, c, i=i: cf.add_escalation(led, f"new-{i}", "failed", "critical",
                                                              last_seen=cf.NOW - i))
            await until(pilot, lambda i=i: table.total == 4 + i)
        assert table.cursor_row == 0
        assert "1/6" in line_of(screen.query_one("#viewbar"))


# 4 -------------------------------------------------------------------------------------------
async def test_escalations_say_why_with_short_kinds_and_age_since_first_seen(db):
    path, ids = db
    write(path, lambda led, c: cf.add_escalation(led, "self-destruct", "retries_exhausted", "critical",
                                                 last_seen=cf.NOW - 76, reason="gave up after 3 attempts\n[/x]"))
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        await pilot.pause(0.1)
        table = screen.table
        first = line_of(table, 1)
        assert "exhausted" in first and "retries_exha…" not in first
        assert "1h 1m" in first  # first seen an hour and 76 s ago, not "76s"
        preview = line_of(screen.query_one("#preview"))
        assert "retries_exhausted: gave up after 3 attempts [/x]" in preview
        assert "last 1m 16s ago" in line_of(screen.query_one("#preview"), 1)  # the second line
        await pilot.press("j")
        assert "failed: backup-db exited 1" in line_of(screen.query_one("#preview"))


# 5 -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key,words", [("1", "No escalations"), ("2", "No finished runs"),
                                       ("3", "No orphaned or at-risk runs"), ("4", "No jobs")])
async def test_every_view_says_when_it_is_empty(tmp_path, key, words):
    path = tmp_path / "empty.db"
    Ledger(path).close()
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        await pilot.press(key)
        await until(pilot, lambda: screen.table.loaded_once)
        await pilot.pause(0.1)
        assert words in line_of(screen.table, 1)


async def test_empty_filter_result_quotes_the_filter_sanitised(db):
    app = make_app(db[0])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        screen.filter_text = "job:[/nope]\x1b[2J"
        await screen._refilter()
        await until(pilot, lambda: "No rows match the filter" in line_of(screen.table, 1))
        shown = line_of(screen.table, 1)
        assert "[/nope]" in shown and "\x1b" not in shown


# 6 -------------------------------------------------------------------------------------------
async def test_snooze_dialog_names_the_escalation(db):
    app = make_app(db[0])
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, SnoozeScreen))
        text = " ".join(str(s.render()) for s in app.screen.query("Static"))
        assert "backup-db" in text and "failed" in text and "CRIT" in text
        await pilot.press("escape")


# 7 -------------------------------------------------------------------------------------------
async def test_escape_from_a_jobs_outcomes_returns_to_jobs_with_its_cursor(db):
    app = make_app(db[0])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        await pilot.press("4")
        await until(pilot, lambda: screen.table.VIEW == "jobs" and screen.table.rows_data)
        await pilot.press("j", "j")
        job = screen.table.current().name
        await pilot.press("enter")
        await until(pilot, lambda: screen.view == "outcomes" and screen.table.rows_data)
        assert {r.job for r in screen.table.rows_data} == {job}
        await pilot.press("escape")
        await until(pilot, lambda: screen.view == "jobs" and screen.table.current() is not None)
        assert screen.filter_text == ""
        assert screen.table.cursor_row == 2 and screen.table.current().name == job
        await pilot.press("escape")  # nothing left to go back to: stays on jobs
        assert screen.view == "jobs"


# 8 -------------------------------------------------------------------------------------------
async def test_detail_attempt_rows_fit_one_line_and_skipped_verification_says_so(db):
    path, ids = db

    def add(led, c):
        a1 = cf.add_run(led, "flaky-sync", state="failed", ended_at=cf.NOW - 50, lineage="sig", exit_code=None,
                        reason="signal: killed by the kernel after using too much memory")
        c.execute("UPDATE runs SET signal = 9 WHERE id = ?", (a1,))
        c.execute("UPDATE job_outcomes SET verification = ? WHERE run_id = ?",
                  (json.dumps({"ok": True, "checks": []}), a1))
        cf.add_run(led, "flaky-sync", state="failed", ended_at=cf.NOW - 40, lineage="sig", attempt=2,
                   exit_code=1, reason="exit_code " + "x" * 80)
        return a1
    run_id = write(path, add)
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        detail = await open_detail(pilot, run_id)
        await pilot.pause(0.1)
        plain = detail.query_one("#content").render().plain
        rows = [ln for ln in plain.splitlines() if ln.lstrip("▶ ").startswith("#")]
        assert len(rows) == 2
        width = detail.query_one("#content").content_region.width
        assert all(len(r) <= width for r in rows), (width, [len(r) for r in rows], rows)
        assert "SIGKILL" in rows[0] and rows[0].endswith("…")
        assert "verification: skipped (the run failed before verification)" in plain
        assert '"ok": true' not in plain


async def test_detail_of_a_fanout_parent_shows_its_sub_tasks(db):
    path, ids = db

    def add(led, c):
        parent = cf.add_run(led, "orchestrate", state="failed", ended_at=cf.NOW - 100, lineage="fan-p")
        for i, (task, st, code) in enumerate((("fetch-eu", "succeeded", 0), ("fetch-us", "failed", 3))):
            sub = cf.add_run(led, "orchestrate", state=st, ended_at=cf.NOW - 90 + i, lineage=f"fan-{task}",
                             exit_code=code, reason=None if code == 0 else "exit_code")
            c.execute("UPDATE runs SET task = ?, parent_run_id = ? WHERE id = ?", (task, parent, sub))
        return parent
    parent = write(path, add)
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        detail = await open_detail(pilot, parent)
        plain = detail.query_one("#content").render().plain
        assert "Sub-tasks (2)" in plain
        eu = next(ln for ln in plain.splitlines() if "fetch-eu" in ln)
        us = next(ln for ln in plain.splitlines() if "fetch-us" in ln)
        assert "✓ ok" in eu and "exit 0" in eu
        assert "✗ failed" in us and "exit 3" in us and "exit_code" in us


# 9 -------------------------------------------------------------------------------------------
async def test_kind_filter_is_exact_in_the_console(db):
    path, ids = db
    write(path, lambda led, c: cf.add_escalation(led, "report", "verification_failed", "critical"))
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        await until(pilot, lambda: screen.table.total == 4)
        await pilot.press("slash", *"kind:failed", "enter")
        await until(pilot, lambda: screen.filter_text == "kind:failed" and screen.table.rows_data)
        await pilot.pause(0.1)
        assert {r.kind for r in screen.table.rows_data} == {"failed"}
        await pilot.press("slash", "ctrl+u", *"KIND:verify_fail", "enter")
        await until(pilot, lambda: {r.kind for r in screen.table.rows_data} == {"verification_failed"})
        assert isinstance(app.screen, MainScreen)


async def test_a_filter_matching_nothing_replaces_the_loading_blank_with_the_empty_text(db):
    """The blank drawn while a new filter's first page loads is not kept when that page is
    empty too (it used to be, whenever the screen drew between the reset and the read)."""
    app = make_app(db[0])
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        screen.filter_text = "job:nothing-has-this-name"
        screen.table.reset()
        assert line_of(screen.table, 1).strip() == ""  # drawn (and cached) while loading
        await screen.refresh_data(force=True)
        assert "No rows match the filter" in line_of(screen.table, 1)
