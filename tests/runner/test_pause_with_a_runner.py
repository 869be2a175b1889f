"""Job controls and invalid specs through a real runner: a paused job's slots are skipped
and recorded, the pause survives a runner restart, resume lets the schedule run again; a
spec file that never loads opens a spec_invalid escalation (to the runner's owner) that a
fix resolves on hot reload."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs

PY = sys.executable


def runs_of(db, job: str) -> int:
    return query(db, "SELECT COUNT(*) AS n FROM runs WHERE job = ?", (job,))[0]["n"]


def skips(db) -> int:
    return query(db, "SELECT COUNT(*) AS n FROM events WHERE kind = 'slot_skipped_paused'")[0]["n"]


@pytest.mark.slow
def test_pause_survives_a_restart_and_resume_runs_again(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'name = "tick"\ncommand = ["{PY}", "-c", "pass"]\nevery = "1s"\n')
    s = fast_settings(tmp_path)
    cli_ = CliRunner()
    led = ["--ledger", str(s.ledger)]
    with RunnerThread(specs, s):
        wait_for(lambda: runs_of(s.ledger, "tick") >= 1)
        assert cli_.invoke(cli, ["pause", "tick", *led, "--as", "ana", "--yes"]).exit_code == 0
        wait_for(lambda: skips(s.ledger) >= 2)
        before = runs_of(s.ledger, "tick")
    with RunnerThread(specs, s):  # a new runner reads the pause from the ledger
        wait_for(lambda: skips(s.ledger) >= 4)
        assert runs_of(s.ledger, "tick") == before
        assert cli_.invoke(cli, ["resume", "tick", *led, "--as", "ana", "--yes"]).exit_code == 0
        wait_for(lambda: runs_of(s.ledger, "tick") > before)


@pytest.mark.slow
def test_a_spec_file_that_never_loads_is_escalated_and_resolves_when_fixed(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, 'name = "ok"\ncommand = "true"\nevery = "1h"\n', name="ok.toml")
    bad = write_specs(specs, 'name = "bad"\ncommand = "true"\nevery = "soon"\n', name="bad.toml")
    s = fast_settings(tmp_path, owner="night-shift")
    with RunnerThread(specs, s):
        esc = wait_for(lambda: query(s.ledger, "SELECT * FROM escalations WHERE kind = 'spec_invalid'"))[0]
        assert (esc["job"], esc["owner"], esc["state"]) == ("bad", "night-shift", "open")
        assert f"{bad}:3: job 'bad': field 'every'" in esc["reason"]
        listed = CliRunner().invoke(cli, ["jobs", "--ledger", str(s.ledger)]).stdout
        assert "never loaded" in listed and f"{bad}:3" in listed
        bad.write_text('name = "bad"\ncommand = "true"\nevery = "1h"\n')
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM escalations WHERE kind = 'spec_invalid'"
                                         " AND state = 'resolved'"), timeout=20)
    assert query(s.ledger, "SELECT COUNT(*) AS n FROM invalid_specs")[0]["n"] == 0
