"""The run detail shows a running job's output growing (re-read from its monitor's files every
poll, with no ledger change), and `l` follows it: the view stays at the end as it grows, like
k9s's `l`; scrolling back up stops following. Escape sequences stay escaped at 80×24."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.app import ConsoleConfig, WatchkeeperApp
from console.screens.detail import DetailScreen
from tests.kit import console_fixtures as cf
from tests.kit.pilot import TEST_REFRESH_S, until

pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def running(tmp_path: Path) -> tuple[Path, int, Path]:
    return cf.running_run(tmp_path)


async def test_a_running_jobs_output_grows_on_screen_and_l_follows_it(running):
    path, run_id, art = running
    app = WatchkeeperApp(ConsoleConfig(ledger=path, clock=lambda: cf.NOW, refresh=TEST_REFRESH_S, operator="carol"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.push_screen(DetailScreen(run_id))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        screen = app.screen
        await pilot.press("l")
        assert screen.following
        with open(art / "stdout.log", "ab") as fh:  # the job prints on; the ledger does not change
            fh.write(b"".join(f"line {i}\n".encode() for i in range(2, 200)) + b"last \x1b[2J line\n")
        def shown() -> str:
            out = screen.detail.stdout if screen.detail else None
            return out.head + out.tail if out else ""
        await until(pilot, lambda: "line 199" in shown())
        body = screen.query_one("#body")
        await until(pilot, lambda: body.scroll_y > 0 and body.scroll_y >= body.max_scroll_y - 1)
        content = str(screen.query_one("#content").render())
        assert "\x1b" not in content
        await pilot.press("k")  # reading back stops following
        assert not screen.following
