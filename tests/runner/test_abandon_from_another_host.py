"""Abandoning a run from another host: the operator's host must not probe or kill a pid of
its own (it is some other process there), so it asks the owning runner through the ledger;
that runner kills the run's processes on its next heartbeat and confirms, and ``show`` says
it is waiting until then."""

from __future__ import annotations

import threading

import psutil
import pytest
from click.testing import CliRunner

from console.cli.main import cli
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs


@pytest.mark.slow
def test_abandon_on_another_host_is_killed_by_the_owning_runner(tmp_path, monkeypatch):
    specs = tmp_path / "jobs"
    write_specs(specs, '[[job]]\nname = "long"\ncommand = ["sleep", "300"]\nonce = true\n')
    settings = fast_settings(tmp_path)
    db, cli_runner = settings.ledger, CliRunner()
    with RunnerThread(specs, settings) as rt:
        run = wait_for(lambda: next(iter(query(db, "SELECT * FROM runs WHERE state = 'running' AND pid IS NOT NULL")),
                                    None))
        proc = psutil.Process(run["pid"])
        answer, go = rt.runner._answer_kill_requests, threading.Event()

        def held() -> None:  # the owner answers only once we have seen the request waiting
            go.wait(30)
            answer()
        rt.runner._answer_kill_requests = held
        # the same machine, another host life: what an operator on another host is to this run
        monkeypatch.setenv("WATCHKEEPER_BOOT_ID", "another-host-life")

        out = cli_runner.invoke(cli, ["abandon", str(run["id"]), "--yes", "--as", "ana", "--ledger", str(db)])

        assert out.exit_code == 0, out.output
        assert f"asked runner {run['runner_id']} there to kill them" in out.stdout and "not confirmed yet" in out.stdout
        assert proc.is_running()  # nothing on "this" host was touched
        shown = cli_runner.invoke(cli, ["show", str(run["id"]), "--ledger", str(db)]).stdout
        assert "kill requested by operator:ana" in shown and "to confirm" in shown

        go.set()  # the owner's periodic pass answers
        wait_for(lambda: query(db, "SELECT * FROM events WHERE run_id = ? AND kind = 'abandon_kill'", (run["id"],)))
        wait_for(lambda: not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE)
        (kill,) = query(db, "SELECT * FROM events WHERE run_id = ? AND kind = 'abandon_kill'", (run["id"],))
        assert kill["actor"].startswith("runner:") and "killed by runner" in kill["reason"]
        (row,) = query(db, "SELECT state, abandon_requested_at FROM runs WHERE id = ?", (run["id"],))
        assert row["state"] == "abandoned" and row["abandon_requested_at"] is None
        assert "to confirm" not in cli_runner.invoke(cli, ["show", str(run["id"]), "--ledger", str(db)]).stdout
