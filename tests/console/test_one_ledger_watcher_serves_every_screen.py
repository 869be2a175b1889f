"""The console reads the ledger in one place: the app's ledger watcher (``console.watcher``)
notices a commit, reads the header once and tells every screen; the screens run no timer or
poll of their own, and while nothing changes the watcher's read is the only one."""

from __future__ import annotations

from pathlib import Path

import pytest

from console import watcher
from console.app import ConsoleConfig, WatchkeeperApp
from console.screens.detail import DetailScreen
from console.screens.escalation import EscalationScreen
from console.screens.history import JobHistoryScreen
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.pilot import loaded, make_app, screen_text, until

pytestmark = [pytest.mark.usefixtures("utc"), pytest.mark.slow]


def watchers(app: WatchkeeperApp) -> list:
    return [w for w in app.workers if w.group == "ledger-watcher"]


async def test_a_commit_reaches_the_pushed_detail_and_the_covered_main_table_through_the_watcher(ledger_target):
    path = ledger_target
    ids = cf.build(path)
    # A pulse once an hour: only the watcher's wake-up feed (watchfiles on SQLite's WAL,
    # LISTEN on PostgreSQL) brings the commit.
    app = WatchkeeperApp(ConsoleConfig(ledger=path, operator="ana", clock=lambda: cf.NOW, refresh=3600))
    async with app.run_test(size=(100, 30)) as pilot:
        main = await loaded(pilot)
        app.push_screen(DetailScreen(ids["failed_run"]))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        detail = app.screen
        assert "×3" in str(detail.query_one("#content").render())
        heard, reads = main.heard, app.watcher.reads

        def bump(c):  # the shown run's escalation counts a new failure of its job
            cf.add_run(led, "backup-db", state="failed", ended_at=cf.NOW - 1, exit_code=1, lineage="again")
            c.execute("UPDATE escalations SET count = 77 WHERE id = ?", (ids["esc_crit"],))

        with Ledger(path) as led:  # another connection commits
            led.write(bump)

        await until(pilot, lambda: "×77" in str(detail.query_one("#content").render()))
        assert app.watcher.reads > reads
        assert main.heard > heard  # the covered main screen was told too, by the same message
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main and "×77" in screen_text(app))
        assert len(watchers(app)) == 1


async def test_screens_own_no_timer_and_while_nothing_changes_only_the_watcher_reads(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(watcher, "IDLE_REFRESH_S", 3600.0)  # no idle refresh inside the window below
    path = tmp_path / "wk.db"
    ids = cf.build(path)
    app = make_app(path)  # a pulse every TEST_REFRESH_S
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        app.push_screen(JobHistoryScreen("backup-db"))
        await until(pilot, lambda: isinstance(app.screen, JobHistoryScreen) and app.screen.history is not None)
        app.push_screen(EscalationScreen(ids["esc_crit"]))
        await until(pilot, lambda: isinstance(app.screen, EscalationScreen) and app.screen.detail is not None)
        app.push_screen(DetailScreen(ids["failed_run"]))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        stack = list(app.screen_stack)
        assert len(stack) == 5 and len(watchers(app)) == 1  # the default screen, main and three pushed
        # Textual's own repaint timer ("screen_update") is every screen's only one.
        assert [(s, t.name) for s in stack for t in s._timers if t.name != "screen_update"] == []

        calls = []
        real = app.reader.call

        async def counted(fn):
            calls.append(fn)
            return await real(fn)

        monkeypatch.setattr(app.reader, "call", counted)
        start = app.watcher.reads
        await until(pilot, lambda: app.watcher.reads >= start + 4)
        stop = app.watcher.reads
        monkeypatch.setattr(app.reader, "call", real)
        # One read per pulse, whatever the number of screens: none of them polls.
        assert stop - start - 1 <= len(calls) <= stop - start + 1
        assert all(screen.heard > 0 for screen in stack[1:])
