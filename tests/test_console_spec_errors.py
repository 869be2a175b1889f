"""The Jobs view shows a job whose last spec edit is invalid (the last good spec still runs)."""

from __future__ import annotations

from core.ledger.connection import Ledger
from tests.test_console_app import loaded, make_app, until


async def test_a_job_with_a_spec_error_is_marked_and_its_preview_says_why(tmp_path):
    path = tmp_path / "wk.db"
    with Ledger(path) as led:
        def add(c):
            for name, err in (("good", None), ("bad", "jobs.toml:3: job 'bad': field 'max_attempts': \x1b[31mnot int")):
                c.execute("INSERT INTO jobs (name, spec, spec_hash, schedule_text, last_error, updated_at)"
                          " VALUES (?, '{}', 'h', 'every 1m', ?, 0)", (name, err))
        led.write(add)
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        await pilot.press("4")
        await until(pilot, lambda: screen.table.VIEW == "jobs" and len(screen.table.rows_data) == 2)
        table = screen.table
        assert table.current()["name"] == "bad"
        assert str(table.cells(table.current())[0]).startswith("! ")
        preview = str(table.preview(table.current()))
        assert "spec error" in preview and "max_attempts" in preview and "\x1b" not in preview
        assert not str(table.cells(table.rows_data[1])[0]).startswith("!")
