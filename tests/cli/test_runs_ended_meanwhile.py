"""A run whose job ended while no runner was up is still ``running`` in the ledger (nothing
recorded its end yet): ``runs`` and ``show`` say so from its monitor's files instead of
leaving the operator to guess, and say who records it."""

from __future__ import annotations

import os

from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from tests.kit.sweep import add_run, add_runner, dead_pid


def _ended_run(tmp_path, status: str) -> tuple[str, int]:
    db = tmp_path / "wk.db"
    art = tmp_path / "art"
    art.mkdir()
    (art / "exit").write_text(status)
    with Ledger(db) as led:
        pid, ctime = dead_pid()
        rid = add_runner(led, pid=pid, create_time=ctime, stopped=True)
        run_id = add_run(led, "nightly", runner_id=rid, pid=pid, create_time=ctime, lease_left=60)
        led.write(lambda c: c.execute("UPDATE runs SET artifacts_dir = ? WHERE id = ?", (str(art), run_id)))
    return str(db), run_id


def test_runs_and_show_say_a_running_runs_job_ended_while_no_runner_was_up(tmp_path):
    db, run_id = _ended_run(tmp_path, "0\n")
    listing = CliRunner().invoke(cli, ["runs", "--ledger", db])
    assert listing.exit_code == 0, listing.output
    line = next(ln for ln in listing.output.splitlines() if "nightly" in ln)
    assert "running" in line and "the job ended (exit 0) while no runner was up" in line
    show = CliRunner().invoke(cli, ["show", str(run_id), "--ledger", db])
    assert "the job ended (exit 0) while no runner was up: the next runner of this host records it" in show.output


def test_a_signal_is_named_and_a_run_still_going_is_not_marked(tmp_path):
    db, run_id = _ended_run(tmp_path, "137\n")
    assert "the job ended (killed by SIGKILL)" in CliRunner().invoke(cli, ["show", str(run_id), "--ledger", db]).output
    os.unlink(tmp_path / "art" / "exit")  # no status yet: the job may still run
    listing = CliRunner().invoke(cli, ["runs", "--ledger", db]).output
    assert "ended" not in listing


def test_show_folds_its_long_lines_on_an_80_column_terminal(tmp_path, monkeypatch):
    from rich.cells import cell_len

    from console.cli import table
    db, run_id = _ended_run(tmp_path, "0\n")
    monkeypatch.setattr(table, "terminal_width", lambda: 80)
    lines = CliRunner().invoke(cli, ["show", str(run_id), "--ledger", db]).output.splitlines()
    assert all(cell_len(ln) <= 80 for ln in lines), [ln for ln in lines if cell_len(ln) > 80]
    assert any(ln.startswith("  the job ended (exit 0)") for ln in lines)
