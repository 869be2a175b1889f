"""The snooze dialog does what its hint says: a digit picks a duration (the highlight moves,
nothing is applied), enter snoozes; so the enter that applies it is consumed by the dialog
and never opens the detail of the escalation underneath."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import OptionList, Static

from console.screens.dialogs import SNOOZE_HINT, SnoozeScreen
from console.screens.main import MainScreen
from tests.kit import console_fixtures as cf
from tests.kit.pilot import esc_row, loaded, make_app, until

pytestmark = pytest.mark.usefixtures("utc")


async def test_a_digit_picks_and_enter_snoozes_without_reaching_the_view(tmp_path: Path):
    path = tmp_path / "wk.db"
    ids = cf.build(path)
    app = make_app(path)
    async with app.run_test() as pilot:
        await loaded(pilot)
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, SnoozeScreen))
        dialog = app.screen
        assert SNOOZE_HINT in " ".join(str(s.render()) for s in dialog.query(Static))
        await pilot.press("3")
        await until(pilot, lambda: dialog.query_one(OptionList).highlighted == 2)
        assert app.screen is dialog and esc_row(path, ids["esc_crit"])["state"] == "open"  # picked, not applied
        await pilot.press("enter")
        await until(pilot, lambda: esc_row(path, ids["esc_crit"])["state"] == "snoozed")
        assert esc_row(path, ids["esc_crit"])["snoozed_until"] == pytest.approx(cf.NOW + 4 * 3600)
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)  # the enter did not open a detail underneath
