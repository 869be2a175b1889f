"""``watchkeeper retry RUN_ID``: the console's retry from the shell — a real runner runs the
queued attempt; a second retry while it is queued or running is refused naming the run, who
queued it and when; exit 0 queued, 1 refused (or answered no), 2 no such run."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.vocabulary import EndReason
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs

PY = sys.executable


@pytest.mark.slow
def test_retry_of_a_failed_run_is_run_by_a_real_runner(tmp_path):
    flag = tmp_path / "second-time"
    specs = tmp_path / "jobs"
    # Fails the first time, succeeds once the flag exists: a job worth retrying by hand.
    write_specs(specs, f'''
name = "flaky"
command = ["{PY}", "-c", "import os, sys; p = {str(flag)!r}; ok = os.path.exists(p); open(p, 'w').close(); sys.exit(0 if ok else 3)"]
once = true
''')
    s = fast_settings(tmp_path)
    runner = CliRunner()
    with RunnerThread(specs, s):
        failed = wait_for(lambda: query(s.ledger, "SELECT id FROM runs WHERE job = 'flaky' AND state = 'failed'"))[0]
        res = runner.invoke(cli, ["retry", str(failed["id"]), "--ledger", str(s.ledger), "--as", "ana", "--yes"])
        assert res.exit_code == 0, res.output
        assert res.stdout.startswith("flaky: queued attempt 2 (run ")
        again = runner.invoke(cli, ["retry", str(failed["id"]), "--ledger", str(s.ledger), "--as", "bob", "--yes"])
        if again.exit_code == 1:  # refused while attempt 2 is queued/running, naming who queued it
            assert "flaky: attempt 2 is already" in again.stderr
        ok = wait_for(lambda: query(s.ledger, "SELECT * FROM runs WHERE job = 'flaky' AND attempt = 2"
                                              " AND state = 'succeeded'"))[0]
    assert ok["trigger"] == "manual_retry"
    (ev,) = query(s.ledger, "SELECT actor FROM events WHERE kind = 'manual_retry'")
    assert ev["actor"] == "operator:ana"


def test_retry_refused_while_the_next_attempt_is_queued(tmp_path):
    from core.ledger import lifecycle
    from core.ledger.connection import Ledger
    from tests.kit.sweep import add_job, add_run

    db = tmp_path / "wk.db"
    with Ledger(db) as led:
        add_job(led)
        run_id = add_run(led, state="verifying")
        assert lifecycle.transition(led, run_id, 1, "verifying", "failed", reason_code=EndReason.EXIT_CODE, actor="test")
    runner = CliRunner()
    first = runner.invoke(cli, ["retry", str(run_id), "--ledger", str(db), "--as", "ana", "--yes"])
    assert first.exit_code == 0, first.output
    second = runner.invoke(cli, ["retry", str(run_id), "--ledger", str(db), "--as", "bob", "--yes"])
    assert second.exit_code == 1
    assert "attempt 2 is already queued" in second.stderr and "by ana at " in second.stderr


def test_retry_asks_first_and_knows_missing_runs(tmp_path):
    from core.ledger import lifecycle
    from core.ledger.connection import Ledger
    from tests.kit.sweep import add_job, add_run

    db = tmp_path / "wk.db"
    with Ledger(db) as led:
        add_job(led)
        run_id = add_run(led, state="verifying")
        assert lifecycle.transition(led, run_id, 1, "verifying", "failed", reason_code=EndReason.EXIT_CODE, actor="test")
    runner = CliRunner()
    no = runner.invoke(cli, ["retry", str(run_id), "--ledger", str(db)], input="n\n")
    assert no.exit_code == 1 and "Retry job (run" in no.output and "not retried" in no.stderr
    missing = runner.invoke(cli, ["retry", "999", "--ledger", str(db), "--yes"])
    assert missing.exit_code == 2 and "no run 999" in missing.stderr
    assert "Example:" in runner.invoke(cli, ["retry", "--help"]).output
