"""``watchkeeper abandon RUN_ID``: a healthy running run of a real runner is abandoned (its
process group killed) through ``core.actions``; exit 0 done, 1 refused (already ended: by
whom and when; or answered no), 2 no such run."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from tests.kit import console_fixtures as cf
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs

PY = sys.executable


def state(db: Path, run_id: int) -> str:
    return query(db, "SELECT state FROM runs WHERE id = ?", (run_id,))[0]["state"]


def test_abandon_a_healthy_running_run_of_a_real_runner(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'''
name = "sleepy"
command = ["{PY}", "-c", "import time; time.sleep(60)"]
once = true
timeout = "5m"
''')
    s = fast_settings(tmp_path)
    runner = CliRunner()
    with RunnerThread(specs, s):
        run = wait_for(lambda: query(s.ledger, "SELECT id, pid FROM runs WHERE job = 'sleepy' AND state = 'running'"))[0]
        proc = psutil.Process(run["pid"])
        time.sleep(1.5)  # a few heartbeats: the run is healthy, its lease renewed
        assert state(s.ledger, run["id"]) == "running"
        res = runner.invoke(cli, ["abandon", str(run["id"]), "--ledger", str(s.ledger), "--as", "ana", "--yes"])
        assert res.exit_code == 0, res.output
        assert f"sleepy run {run['id']} abandoned" in res.stdout and "artifacts kept" in res.stdout
        assert state(s.ledger, run["id"]) == "abandoned"
        wait_for(lambda: not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, timeout=10)
        # The runner sees its process die after the fact: the terminal state never flips.
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM events WHERE run_id = ? AND kind = 'late_result'",
                               (run["id"],)), timeout=10)
        assert state(s.ledger, run["id"]) == "abandoned"

        again = runner.invoke(cli, ["abandon", str(run["id"]), "--ledger", str(s.ledger), "--as", "bob", "--yes"])
        assert again.exit_code == 1
        assert f"sleepy run {run['id']} is already abandoned by ana at " in again.stderr
    events = query(s.ledger, "SELECT actor, kind FROM events WHERE run_id = ? AND actor LIKE 'operator:%'"
                   " ORDER BY id", (run["id"],))
    assert [(e["actor"], e["kind"]) for e in events] == [("operator:ana", "transition"),
                                                         ("operator:ana", "abandon_kill")]


def test_abandon_asks_first_and_knows_missing_runs(tmp_path):
    path = tmp_path / "wk.db"
    ids = cf.build(path)
    runner = CliRunner()
    res = runner.invoke(cli, ["abandon", str(ids["risky_run"]), "--ledger", str(path), "--as", "ana"], input="n\n")
    assert res.exit_code == 1
    assert "Abandon backup-db run" in res.stdout and "(running, pid 434343)?" in res.stdout
    assert "not abandoned" in res.stderr
    assert state(path, ids["risky_run"]) == "running"

    res = runner.invoke(cli, ["abandon", str(ids["risky_run"]), "--ledger", str(path), "--as", "ana"], input="y\n")
    assert res.exit_code == 0, res.output
    assert state(path, ids["risky_run"]) == "abandoned"
    with Ledger(path) as led:
        assert led.one("SELECT status FROM job_outcomes WHERE run_id = ?", (ids["risky_run"],))[0] == "abandoned"

    # Already finished: refused without a question, saying how and by whom.
    res = runner.invoke(cli, ["abandon", str(ids["failed_run"]), "--ledger", str(path)])
    assert res.exit_code == 1
    assert "is already failed by runner:r1 at " in res.stderr and "Abandon" not in res.stdout

    res = runner.invoke(cli, ["abandon", "999999", "--ledger", str(path), "--yes"])
    assert res.exit_code == 2 and "error: no run 999999" in res.stderr
    res = runner.invoke(cli, ["abandon", "1", "--ledger", str(tmp_path / "nope.db"), "--yes"])
    assert res.exit_code == 2 and "no ledger at" in res.stderr
    res = runner.invoke(cli, ["abandon", "--help"])
    assert res.exit_code == 0 and "watchkeeper abandon 42 --as ana --yes" in res.output
