"""Run detail at 80 columns: a timeline line too long for the screen wraps with its further
lines indented under its text, never back under the clock and attempt columns."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from console.screens.detail import DetailScreen
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.pilot import loaded, make_app, until

pytestmark = pytest.mark.usefixtures("utc")

REASON = ("the database server db01 refused the connection on port 5432 three times in a row,"
          " so the backup wrote nothing and stopped")


@pytest.mark.slow
async def test_a_long_timeline_reason_wraps_under_its_text(tmp_path):
    path = tmp_path / "wk.db"
    ids = cf.build(path)
    run = ids["failed_run"]
    with Ledger(path) as led:
        led.write(lambda c: c.execute("UPDATE events SET reason = ? WHERE run_id = ? AND to_state = 'failed'",
                                      (REASON, run)))
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        app.push_screen(DetailScreen(run))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        await pilot.pause(0.1)
        lines = app.screen.query_one("#content", Static).render().plain.splitlines()
    start = next(i for i, ln in enumerate(lines) if "→ failed" in ln and "transition" in ln)
    indent = lines[start].index("transition")
    wrapped = []
    for ln in lines[start + 1:]:
        if not ln.strip() or ln[:indent].strip():  # a blank line, or the next event at the left edge
            break
        wrapped.append(ln)
    assert wrapped, lines[start:start + 4]  # the reason did need more than one line at 80 columns
    assert all(ln[indent] != " " for ln in wrapped)  # each continuation starts under the text
    assert " ".join(" ".join(ln.split()) for ln in [lines[start], *wrapped]).endswith(" ".join(REASON.split()))
    assert all(len(ln) <= 78 for ln in [lines[start], *wrapped])
