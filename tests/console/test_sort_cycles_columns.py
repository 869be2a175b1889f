"""``S`` sorts a table by its next column (k9s-like) through the ledger query, the heading
shows the direction, and after the last column the view's own order comes back; the key
comes from the one registry, so help, footer and palette agree."""

from __future__ import annotations

import pytest

from console import keys
from core.ledger import reads
from tests.kit import console_fixtures as cf
from tests.kit.pilot import line_of, loaded, make_app, until

pytestmark = pytest.mark.usefixtures("utc")


@pytest.mark.slow
async def test_S_cycles_the_sort_column_and_back_to_the_views_own_order(tmp_path):
    path = tmp_path / "wk.db"
    cf.build(path)
    app = make_app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await loaded(pilot)
        table = screen.table
        await until(pilot, lambda: table.rows_data)
        own = [r.id for r in table.rows_data]
        await pilot.press("S")  # severity: the view's own order starts with it too
        await until(pilot, lambda: table.flt is not None and table.flt.sort == "severity")
        await pilot.press("S")
        await until(pilot, lambda: table.flt.sort == "job" and table.rows_data
                    and [r.job for r in table.rows_data] == sorted(r.job for r in table.rows_data))
        assert "Job▲" in line_of(table, 0)
        for _ in reads.SORTS["escalations"]:  # on through every column, then back
            if table.flt.sort == "":
                break
            await pilot.press("S")
            await pilot.pause(0.05)
        await until(pilot, lambda: table.flt.sort == "" and [r.id for r in table.rows_data] == own)
        assert "▲" not in line_of(table, 0) and "▼" not in line_of(table, 0)
        await pilot.press("2")
        await until(pilot, lambda: table.VIEW == "outcomes" or screen.table.VIEW == "outcomes")
        table = screen.table
        await pilot.press("S")  # the first sortable outcomes column: job
        await until(pilot, lambda: table.flt is not None and table.flt.sort == "job" and table.rows_data
                    and [r.job for r in table.rows_data] == sorted(r.job for r in table.rows_data))


def test_sort_is_one_registry_key_for_help_and_palette():
    assert [k.key for k in keys.KEYS if k.action == "sort"] == ["S"]
    assert any(display == "S" and "sort" in does for _s, display, does, _w in keys.help_rows())
    assert any(action == "sort" for _t, action, _k in keys.palette("main"))
    assert "`S`" in keys.key_table()
