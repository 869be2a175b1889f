"""The Line-API table on a big ledger: only the visible window is held, keys and mouse move
the cursor, the cursor stays on its row key across live updates, marks survive scrolling."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from textual import events

from bench.console_bench import generate
from console.screens.detail import DetailScreen
from console.widgets.paged_table import MARGIN
from core.ledger.connection import Ledger
from tests.kit.pilot import loaded, make_app, until
from tests.kit.runs import add_run

RUNS = 3000


#: Local time is UTC (``utc`` in tests/conftest.py): the console's clocks read the machine's zone.
pytestmark = pytest.mark.usefixtures("utc")


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("big") / "wk.db"
    generate(path, RUNS, jobs=5)
    return path


def visible_loaded(table) -> bool:
    top = int(table.scroll_y)
    return all(table.row_at(i) is not None for i in range(top, min(table.total, top + table.page_height)))


async def outcomes(pilot):
    screen = await loaded(pilot)
    await pilot.press("2")
    await until(pilot, lambda: screen.table.VIEW == "outcomes" and screen.table.rows_data)
    return screen, screen.table


async def test_keys_move_through_a_big_table_holding_only_a_window(big):
    app = make_app(big)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, table = await outcomes(pilot)
        await until(pilot, lambda: table.total == RUNS and table.total_exact)
        first = table.current().id
        assert first == RUNS  # newest first
        await pilot.press("j", "j", "k")
        assert table.cursor_row == 1
        for _ in range(10):
            await pilot.press("pagedown")
        assert table.cursor_row == 1 + 10 * table.page_height
        await until(pilot, lambda: visible_loaded(table) and table.current() is not None)
        assert table.current().id == RUNS - table.cursor_row
        assert len(table.rows_data) <= table.page_height + 2 * MARGIN
        await pilot.press("G")
        await until(pilot, lambda: table.current() is not None and table.cursor_row == RUNS - 1)
        assert table.current().id == 1
        assert len(table.rows_data) <= table.page_height + 2 * MARGIN
        await pilot.press("pageup")
        await until(pilot, lambda: visible_loaded(table))
        assert table.current().id == 1 + table.page_height
        await pilot.press("g")
        await until(pilot, lambda: table.current() is not None and table.cursor_row == 0)
        assert table.current().id == first
        assert f"1/{RUNS:,}" in str(screen.query_one("#viewbar").render())


async def test_mouse_click_moves_the_cursor_and_a_second_click_opens(big):
    app = make_app(big)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, table = await outcomes(pilot)
        await pilot.click("#outcomes", offset=(10, 4))  # header is line 0: fourth row
        assert table.cursor_row == 3
        await pilot.click("#outcomes", offset=(10, 4))
        await until(pilot, lambda: isinstance(app.screen, DetailScreen) and app.screen.detail is not None)
        assert app.screen.detail.run.id == RUNS - 3


async def test_mouse_wheel_scrolls_and_rows_load(big):
    app = make_app(big)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, table = await outcomes(pilot)
        for _ in range(40):  # Pilot has no wheel helper in 8.2.8; its private poster sends one
            await pilot._post_mouse_events([events.MouseScrollDown], "#outcomes", offset=(10, 5))
        await until(pilot, lambda: table.scroll_y > 0 and visible_loaded(table))
        top = int(table.scroll_y)
        assert table.row_at(top).id == RUNS - top


async def test_cursor_stays_on_its_row_deep_in_the_table_when_rows_arrive(big, tmp_path):
    path = tmp_path / "copy.db"
    with Ledger(big) as src, Ledger(path) as dst:
        src.conn.backup(dst.conn)
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, table = await outcomes(pilot)
        for _ in range(20):
            await pilot.press("pagedown")
        await until(pilot, lambda: visible_loaded(table) and table.current() is not None)
        before, row_before = table.current().id, table.cursor_row

        def add(c):
            for i in range(3):
                add_run(c, "job-000", "failed", lineage=f"new{i}", slot=f"new{i}", trigger="schedule",
                        ended_at=time.time() + 3600 + i)
        with Ledger(path) as led:
            led.write(add)
        await until(pilot, lambda: table.cursor_row == row_before + 3)
        assert table.current().id == before
        await until(pilot, lambda: table.total == RUNS + 3)


async def test_marks_survive_scrolling_and_escape_clears_them(big):
    app = make_app(big)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, table = await outcomes(pilot)
        await pilot.press("space")
        marked = set(table.marked)
        assert len(marked) == 1
        await pilot.press("G")
        await until(pilot, lambda: table.current() is not None and table.cursor_row == RUNS - 1)
        await pilot.press("g")
        assert set(table.marked) == marked
        assert [str(r.id) for r in table.selection()] == list(marked)
        await pilot.press("escape")
        assert not table.marked


async def test_bottom_key_before_the_count_lands_follows_the_count_to_the_last_row(big):
    app = make_app(big)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, table = await outcomes(pilot)
        await until(pilot, lambda: table.total_exact)
        table.set_total(200, exact=False)  # as just after a load, before the count thread answers
        await pilot.press("G")
        assert table.cursor_row == 199
        table.set_total(RUNS)  # the count lands
        await until(pilot, lambda: table.current() is not None and table.cursor_row == RUNS - 1)
        assert table.current().id == 1
        table.set_total(RUNS, exact=False)
        await pilot.press("G", "k")  # moving away cancels the pending jump
        table.set_total(RUNS)
        assert table.cursor_row == RUNS - 2


async def test_a_slow_count_survives_the_live_polls_that_run_meanwhile(big, monkeypatch):
    """The count thread may take longer than several polls (1M rows); its answer must still
    size the table, and G pressed meanwhile must land on the last row."""
    from core.ledger import reads
    real = reads.count_rows

    def slow_count(*a, **kw):
        time.sleep(0.5)  # ten polls at refresh=0.05
        return real(*a, **kw)
    monkeypatch.setattr(reads, "count_rows", slow_count)
    app = make_app(big, refresh=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, table = await outcomes(pilot)
        await pilot.press("G")
        await until(pilot, lambda: table.total_exact and table.total == RUNS)
        await until(pilot, lambda: table.current() is not None and table.cursor_row == RUNS - 1)
