"""``watchkeeper sweep`` runs one pass against a ledger and reports what it settled."""

from __future__ import annotations

import json

from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from tests.kit.sweep import add_job, add_run, add_runner, dead_pid, run_row


def test_one_pass_orphans_and_reports(tmp_path):
    db = tmp_path / "wk.db"
    with Ledger(db) as led:
        add_job(led)
        pid, ctime = dead_pid()
        rpid, rctime = dead_pid()
        run_id = add_run(led, pid=pid, create_time=ctime,
                         runner_id=add_runner(led, pid=rpid, create_time=rctime, heartbeat_age=5))
    res = CliRunner().invoke(cli, ["sweep", "--ledger", str(db), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["orphaned"] == [run_id]
    with Ledger(db) as led:
        assert run_row(led, run_id)["state"] == "orphaned"


def test_missing_ledger_is_a_clear_error(tmp_path):
    res = CliRunner().invoke(cli, ["sweep", "--ledger", str(tmp_path / "nope.db")])
    assert res.exit_code != 0 and "no ledger" in res.output


def test_help_has_an_example():
    for cmd in ("sweep", "status", "doctor"):
        res = CliRunner().invoke(cli, [cmd, "--help"])
        assert res.exit_code == 0 and "Example:" in res.output and "--ledger" in res.output
