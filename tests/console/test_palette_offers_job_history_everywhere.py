"""The palette's "History of job X" works from every screen (read from the ledger when the
palette opens), not only once the Jobs view has been loaded: from the Escalations view and
from an escalation's detail, ``:`` then a job's name opens that job's history."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import OptionList

from console.screens.escalation import EscalationScreen
from console.screens.history import JobHistoryScreen
from tests.kit import console_fixtures as cf
from tests.kit.pilot import loaded, make_app, type_text, until

pytestmark = pytest.mark.usefixtures("utc")


async def _history_from_palette(pilot, app) -> JobHistoryScreen:
    await pilot.press("colon")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette) and app.focused is not None)
    await type_text(pilot, "History of job backup-db")
    options = app.screen.query_one(OptionList)
    await until(pilot, lambda: options.option_count > 0)
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, JobHistoryScreen))
    return app.screen


async def test_history_of_a_job_from_the_escalations_view_and_an_escalation(tmp_path: Path):
    path = tmp_path / "wk.db"
    cf.build(path)
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await loaded(pilot)
        assert screen.view == "escalations" and not screen.query_one("#jobs").rows_data  # jobs view never loaded
        history = await _history_from_palette(pilot, app)
        assert history.job == "backup-db"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, EscalationScreen))
        history = await _history_from_palette(pilot, app)
        assert history.job == "backup-db"
