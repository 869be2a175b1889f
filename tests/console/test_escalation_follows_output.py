"""The escalation detail shows its latest run's output growing while that run is still
running (re-read from its files every poll, with no ledger change), and `l` follows it, as on
the run detail: the view stays at the end as it grows. Escape sequences stay escaped; 80×24."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.app import ConsoleConfig, WatchkeeperApp
from console.screens.escalation import EscalationScreen
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.pilot import TEST_REFRESH_S, until

pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def running(tmp_path: Path) -> tuple[Path, int, Path]:
    path, run_id, art = cf.running_run(tmp_path)
    with Ledger(path) as led:
        esc_id = cf.add_escalation(led, "nightly-backup", "stalled", "warning", run_id=run_id,
                                   reason="no output for 20 minutes")
    return path, esc_id, art


async def test_the_latest_runs_output_grows_on_the_escalation_and_l_follows_it(running):
    path, esc_id, art = running
    app = WatchkeeperApp(ConsoleConfig(ledger=path, clock=lambda: cf.NOW, refresh=TEST_REFRESH_S, operator="carol"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.push_screen(EscalationScreen(esc_id))
        await until(pilot, lambda: isinstance(app.screen, EscalationScreen) and app.screen.live_run is not None)
        screen = app.screen
        assert "line 1" in str(screen.query_one("#output").render())
        await pilot.press("l")
        assert screen.following
        with open(art / "stdout.log", "ab") as fh:  # the job prints on; the ledger does not change
            fh.write(b"".join(f"line {i}\n".encode() for i in range(2, 200)) + b"last \x1b[2J line\n")

        def shown() -> str:
            out = screen.live_run.stdout if screen.live_run else None
            return out.head + out.tail if out else ""
        await until(pilot, lambda: "line 199" in shown())
        body = screen.query_one("#body")
        await until(pilot, lambda: body.scroll_y > 0 and body.scroll_y >= body.max_scroll_y - 1)
        rendered = str(screen.query_one("#output").render())
        assert "line 199" in rendered and "\x1b" not in rendered
        await pilot.press("l")  # l again stops following
        assert not screen.following


async def test_l_on_an_escalation_whose_run_ended_says_so(tmp_path: Path):
    path = tmp_path / "wk.db"
    cf.build(path)
    with Ledger(path) as led:
        run_id = cf.add_run(led, "nightly-backup", state="failed", ended_at=cf.NOW - 60)
        esc_id = cf.add_escalation(led, "nightly-backup", "exhausted", "critical", run_id=run_id)
    app = WatchkeeperApp(ConsoleConfig(ledger=path, clock=lambda: cf.NOW, refresh=TEST_REFRESH_S, operator="carol"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.push_screen(EscalationScreen(esc_id))
        await until(pilot, lambda: isinstance(app.screen, EscalationScreen) and app.screen.detail is not None)
        screen = app.screen
        await pilot.press("l")
        assert not screen.following and screen.live_run is None
        assert str(screen.query_one("#output").render()).strip() == ""
