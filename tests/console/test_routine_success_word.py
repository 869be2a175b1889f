"""The Outcomes view and the manual name a routine success with the same words: the
supervisor's reason ``routine success (…)`` of verdict ``routine``, shown as the manual shows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.ledger.connection import Ledger
from core.supervisor.rules import SILENT_KINDS
from tests.kit import console_fixtures as cf
from tests.kit.pilot import loaded, make_app, screen_text, until

MANUAL = Path(__file__).resolve().parents[2] / "docs" / "console.md"
REASON = "routine success (1.2s, median 1.1s, tolerated 0.0-6.1s over 20 runs)"

pytestmark = pytest.mark.usefixtures("utc")


@pytest.mark.slow
async def test_the_outcomes_view_shows_the_words_the_manual_uses_for_a_routine_success(tmp_path):
    path = tmp_path / "wk.db"
    ids = cf.build(path)
    with Ledger(path) as led:  # one as the supervisor writes it, one with no reason recorded
        led.write(lambda c: c.execute("UPDATE job_outcomes SET verdict_kind = 'routine', verdict_reason = ?"
                                      " WHERE run_id = ?", (REASON, ids["ok_run"])))
        led.write(lambda c: c.execute("UPDATE job_outcomes SET verdict_kind = 'routine', verdict_reason = NULL"
                                      " WHERE run_id = (SELECT MAX(run_id) FROM job_outcomes WHERE silent = 1"
                                      " AND run_id != ?)", (ids["ok_run"],)))
    app = make_app(path)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await loaded(pilot)
        await pilot.press("2")
        await until(pilot, lambda: screen.table.VIEW == "outcomes" and screen.table.rows_data)
        await pilot.pause(0.1)
        text = screen_text(app)
    assert REASON in text and "routine" in SILENT_KINDS
    assert text.count("routine success") >= 2  # the row without a recorded reason says the same words
    assert f"`{REASON}`" in MANUAL.read_text()
