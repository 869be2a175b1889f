"""``watchkeeper show`` agrees with itself about output bytes: a run abandoned (or orphaned)
before its capture counted anything has an outcome saying 0 bytes, but its output file says
more; the outcome line and the output sections give the same figure."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from console.cli.main import cli
from core.ledger.connection import Ledger
from core.ledger.reads import run_detail
from tests.kit import console_fixtures as cf
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs

PY = sys.executable


def test_outcome_line_counts_the_bytes_in_the_file(tmp_path):
    db = tmp_path / "wk.db"
    art = tmp_path / "art" / "1"
    art.mkdir(parents=True)
    (art / "stdout.log").write_bytes(b"x" * 5000)
    with Ledger(db) as ledger:
        ledger.conn.execute("BEGIN")
        run_id = cf.add_run(ledger, "backup-db", state="abandoned", ended_at=cf.NOW, artifacts_dir=str(art))
        ledger.conn.execute("COMMIT")
        d = run_detail(ledger, run_id)
        assert (d.stdout.total, d.stdout.size, d.stderr.total) == (5000, 5000, 0)
    out = CliRunner().invoke(cli, ["show", str(run_id), "--ledger", str(db)])
    assert "stdout 5000 bytes, stderr 0 bytes" in out.stdout
    assert "--- stdout (5000 bytes kept) head ---" in out.stdout


@pytest.mark.slow
def test_show_of_a_run_abandoned_by_an_operator(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'''
name = "talky"
command = ["{PY}", "-c", "import time; print('x' * 4999, flush=True); time.sleep(60)"]
once = true
''')
    s = fast_settings(tmp_path)
    runner = CliRunner()
    with RunnerThread(specs, s):
        run = wait_for(lambda: query(s.ledger, "SELECT id, artifacts_dir FROM runs WHERE state = 'running'"))[0]
        # Wait for the output to reach the file (its monitor creates it empty at the spawn;
        # abandoned before the job printed, there would be nothing to count).
        wait_for(lambda: (Path(run["artifacts_dir"]) / "stdout.log").stat().st_size >= 5000
                 if (Path(run["artifacts_dir"]) / "stdout.log").exists() else False)
        assert runner.invoke(cli, ["abandon", str(run["id"]), "--ledger", str(s.ledger), "--yes"]).exit_code == 0
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM events WHERE kind = 'late_result'"))
    # The runner's capture filled in what the abandon could not count.
    row = query(s.ledger, "SELECT status, stdout_bytes, stdout_head FROM job_outcomes WHERE run_id = ?", (run["id"],))[0]
    assert (row["status"], row["stdout_bytes"], row["stdout_head"][:3]) == ("abandoned", 5000, "xxx")
    out = runner.invoke(cli, ["show", str(run["id"]), "--ledger", str(s.ledger)]).stdout
    assert "status abandoned  stdout 5000 bytes" in out and "--- stdout (5000 bytes kept) head ---" in out, out
