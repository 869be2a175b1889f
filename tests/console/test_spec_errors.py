"""The Jobs view shows a job whose last spec edit is invalid (the last good spec still runs)."""

from __future__ import annotations

from core.ledger.connection import Ledger
from core.ledger.page_records import InvalidSpec
from tests.kit.pilot import loaded, make_app, until


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
        assert table.current().name == "bad"
        assert str(table.cells(table.current())[0]).startswith("! ")
        preview = str(table.preview(table.current()))
        assert "spec error" in preview and "max_attempts" in preview and "\x1b" not in preview
        assert not str(table.cells(table.rows_data[1])[0]).startswith("!")


async def test_a_job_whose_spec_never_parsed_is_listed_in_jobs_with_its_error(tmp_path):
    """Issue 13 §5, console side: a spec file that never loaded is not invisible."""
    from core.ledger.jobs import sync_jobs
    from core.spec.loader import load_dir

    specs = tmp_path / "jobs"
    specs.mkdir()
    (specs / "good.toml").write_text('name = "good"\ncommand = "true"\nevery = "1m"\n')
    (specs / "broken.toml").write_text('name = "broken"\ncommand = "true"\nevery = "1m"\ntimeout = "-5s"\n')
    path = tmp_path / "wk.db"
    with Ledger(path) as led:
        sync_jobs(led, load_dir(specs), actor="runner:r1")
    app = make_app(path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await loaded(pilot)
        await pilot.press("4")
        await until(pilot, lambda: screen.table.VIEW == "jobs" and len(screen.table.rows_data) == 2)
        table = screen.table
        bad = table.rows_data[0]
        assert isinstance(bad, InvalidSpec) and bad.name == "broken"  # listed first
        cells = [c.plain for c in table.cells(bad)]
        assert cells[0] == "! broken" and cells[1] == "spec invalid" and cells[3] == "broken.toml:4"
        assert "timeout" in str(table.preview(bad))
        assert table.rows_data[1].name == "good"
        await pilot.press("h")  # no history for a job that never loaded: nothing opens
        await pilot.pause(0.1)
        assert app.screen is screen
        await pilot.press("slash", *"job:good", "enter")
        await until(pilot, lambda: [r.name for r in table.rows_data] == ["good"])
