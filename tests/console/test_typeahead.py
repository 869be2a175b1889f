"""Keys typed in one burst — fast typing, a paste without bracketed paste, one SSH read — reach
the console in one go. Everything typed after ``/`` goes into the filter (or the detail's
search) box, never to the table's or the screen's single-letter bindings; a digit right
behind ``s`` never acts on the table; a ``y`` typed behind ``x`` before the confirm dialog
was up does not answer it.

``Pilot.press`` lets the app go idle between keys, which hides the problem; ``burst`` posts
every key to the driver at once, as the terminal driver does with one read."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import events
from textual.command import CommandPalette
from textual.widgets import Input

from console.screens.detail import DetailScreen
from console.screens.dialogs import ConfirmScreen, SnoozeScreen
from console.screens.main import MainScreen
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.pilot import esc_row, loaded, make_app, until

KEY_NAMES = {"/": "slash", ":": "colon", " ": "space", "?": "question_mark"}


#: Local time is UTC (``utc`` in tests/conftest.py): the console's clocks read the machine's zone.
pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture
def db(tmp_path: Path):
    path = tmp_path / "wk.db"
    return path, cf.build(path)


async def burst(pilot, text: str, done=None, settle: float = 0.3) -> None:
    """Send ``text`` as one chunk of key events (no idling between keys), then let the app
    handle them: until ``done()`` holds (what the burst's keys lead to; a fixed pause alone
    was too short on a loaded machine), then ``settle`` seconds more for any key that
    should have done nothing."""
    app = pilot.app
    for ch in text:
        event = events.Key(KEY_NAMES.get(ch, ch), ch)
        event.set_sender(app)
        app._driver.send_message(event)
    if done is not None:
        await until(pilot, done)
    await pilot.pause(settle)


def run_state(path: Path, run_id: int) -> str:
    with Ledger(path) as led:
        return led.one("SELECT state FROM runs WHERE id=?", (run_id,))[0]


def untouched(path: Path, ids: dict[str, int]) -> bool:
    return (esc_row(path, ids["esc_crit"])["state"] == "open" and esc_row(path, ids["esc_warn"])["state"] == "open"
            and esc_row(path, ids["esc_info"])["state"] == "acknowledged")


async def test_a_burst_after_slash_goes_into_the_filter_box(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test(notifications=True) as pilot:
        screen = await loaded(pilot)
        await burst(pilot, "/backup", lambda: screen.query_one("#filter", Input).value == "backup")
        box = screen.query_one("#filter", Input)
        assert box.value == "backup"
        assert app.focused is box
        assert untouched(path, ids)  # `a` did not acknowledge the cursor's escalation
        assert not screen.paused  # `p` did not pause
        await pilot.press("enter")
        await until(pilot, lambda: screen.filter_text == "backup" and screen.table.rows_data
                    and {r.job for r in screen.table.rows_data} == {"backup-db"})
        assert untouched(path, ids)


async def test_pilot_keys_after_slash_go_into_the_filter_box(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test() as pilot:
        screen = await loaded(pilot)
        await pilot.press("/", "b", "a", "c", "k")
        assert screen.query_one("#filter", Input).value == "back"
        assert untouched(path, ids) and not screen.paused


async def test_a_colon_after_slash_is_filter_text_not_the_palette(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test() as pilot:
        screen = await loaded(pilot)
        await burst(pilot, "/kind:failed", lambda: screen.query_one("#filter", Input).value == "kind:failed")
        assert not CommandPalette.is_open(app)
        assert isinstance(app.screen, MainScreen)
        assert screen.query_one("#filter", Input).value == "kind:failed"
        assert untouched(path, ids)
        await pilot.press("enter")
        await until(pilot, lambda: screen.filter_text == "kind:failed" and screen.table.rows_data
                    and {r.kind for r in screen.table.rows_data} == {"failed"})


async def test_slash_inside_the_box_is_text_and_keys_before_it_never_act_later(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test() as pilot:
        screen = await loaded(pilot)
        # "a" was typed before "/": it is still on its way through the table when the box
        # opens, and is dropped rather than acknowledging anything behind the box.
        await burst(pilot, "a/x/y", lambda: screen.query_one("#filter", Input).value == "x/y")
        assert screen.query_one("#filter", Input).value == "x/y"
        assert untouched(path, ids)
        await pilot.press("escape")
        await until(pilot, lambda: not screen.filter_open() and app.focused is screen.table)
        await pilot.press("a")  # once the box is closed, keys act on the table again
        await until(pilot, lambda: esc_row(path, ids["esc_crit"])["state"] == "acknowledged")


async def test_a_digit_right_behind_s_never_acts_on_the_table(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test() as pilot:
        screen = await loaded(pilot)
        await burst(pilot, "s2", lambda: isinstance(app.screen, SnoozeScreen))
        # The digit was routed before the dialog existed: dropped, not "2 = Outcomes view"
        # (which would have moved the snooze onto an outcomes row).
        assert isinstance(app.screen, SnoozeScreen)
        assert screen.view == "escalations"
        assert untouched(path, ids)
        await pilot.press("2", "enter")  # typed into the dialog: 1 hour, for the escalation it names
        await until(pilot, lambda: esc_row(path, ids["esc_crit"])["state"] == "snoozed")
        assert esc_row(path, ids["esc_crit"])["snoozed_until"] == pytest.approx(cf.NOW + 3600)
        assert screen.view == "escalations"


async def test_a_y_typed_behind_x_does_not_answer_the_unseen_dialog(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test() as pilot:
        screen = await loaded(pilot)
        await pilot.press("3")
        await until(pilot, lambda: screen.table.VIEW == "orphans" and screen.table.rows_data)
        assert screen.table.current().id == ids["risky_run"]
        await burst(pilot, "xy", lambda: isinstance(app.screen, ConfirmScreen), settle=0.5)
        assert isinstance(app.screen, ConfirmScreen)  # still asking
        assert run_state(path, ids["risky_run"]) == "running"
        await pilot.press("y")  # answered once it was shown
        await until(pilot, lambda: run_state(path, ids["risky_run"]) == "abandoned")


async def test_a_burst_after_slash_in_run_detail_goes_into_the_search_box(db):
    path, ids = db
    app = make_app(path)
    async with app.run_test() as pilot:
        await loaded(pilot)
        app.push_screen(DetailScreen(ids["failed_run"]))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        detail = app.screen
        await burst(pilot, "/error x", lambda: detail.query_one("#search", Input).value == "error x")  # r = retry, x = abandon, q = back on this screen
        assert app.screen is detail  # no retry/abandon dialog, not left
        box = detail.query_one("#search", Input)
        assert box.value == "error x" and app.focused is box
        with Ledger(path) as led:
            assert led.one("SELECT COUNT(*) FROM runs WHERE trigger='manual_retry'")[0] == 0
        await pilot.press("escape")
        await until(pilot, lambda: not detail.search_open())
        assert app.screen is detail
