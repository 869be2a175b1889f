"""Hot reload through the real runner, and what a stopped runner leaves behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests.kit.harness import RunnerThread, fast_settings, query, terminal_runs, wait_for, write_specs

PY = sys.executable


def _stdout_of(db, run_id):
    return query(db, "SELECT stdout_head FROM job_outcomes WHERE run_id = ?", (run_id,))[0]["stdout_head"]


@pytest.mark.slow
def test_edit_applies_from_next_run_and_bad_edit_keeps_last_good_spec(tmp_path):
    specs = tmp_path / "jobs"
    spec = write_specs(specs, f'name = "tick"\ncommand = ["{PY}", "-c", "print(\'v1\')"]\nevery = "1s"\n')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: terminal_runs(s.ledger, "tick"), timeout=15)
        spec.write_text(f'name = "tick"\ncommand = ["{PY}", "-c", "print(\'v2\')"]\nevery = "1s"\n')
        wait_for(lambda: any(_stdout_of(s.ledger, r["id"]) == "v2\n" for r in terminal_runs(s.ledger, "tick")),
                 timeout=15)
        spec.write_text(f'name = "tick"\ncommand = ["{PY}", "-c", "print(\'v3\')"]\nevery = "1s"\ntimeout = -1\n')
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM events WHERE kind = 'spec_error'"), timeout=15)
        seen = len(terminal_runs(s.ledger, "tick"))
        wait_for(lambda: len(terminal_runs(s.ledger, "tick")) >= seen + 2, timeout=15)
    outs = [_stdout_of(s.ledger, r["id"]) for r in terminal_runs(s.ledger, "tick")]
    assert "v3\n" not in outs                 # the invalid edit never ran
    assert outs[-1] == "v2\n"                 # the last good spec kept running
    err = query(s.ledger, "SELECT * FROM events WHERE kind = 'spec_error'")[0]
    assert "timeout" in err["reason"] and "jobs.toml" in err["reason"]


@pytest.mark.slow
def test_sigterm_with_drain_gives_grace_and_records_what_was_left_running(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'''
[[job]]
name = "long"
command = ["{PY}", "-c", "import time; time.sleep(60)"]
once = true
[[job]]
name = "short"
command = ["{PY}", "-c", "import time; time.sleep(1.0)"]
once = true
''')
    (specs / "watchkeeper.toml").write_text("shutdown_grace = 3\nheartbeat = 0.2\nlease = 1.0\n")
    db = tmp_path / "wk.db"
    proc = subprocess.Popen([PY, "-m", "console.cli", "run", str(specs), "--ledger", str(db), "--drain"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    long_pid = None
    try:
        wait_for(lambda: db.exists() and query(db, "SELECT 1 FROM runs WHERE state = 'running' AND job = 'short'"),
                 timeout=20)
        long_pid = wait_for(lambda: (query(db, "SELECT pid FROM runs WHERE job = 'long' AND state = 'running'")
                                     or [{}])[0].get("pid"), timeout=10)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0
    assert took < 3 + 2
    # the short job finished within the grace; the long one is recorded as left running
    assert terminal_runs(db, "short")[0]["state"] == "succeeded"
    stop = query(db, "SELECT * FROM events WHERE kind = 'runner_stopped'")[0]
    long_run = query(db, "SELECT * FROM runs WHERE job = 'long'")[0]
    assert json.loads(stop["detail"])["left_running"] == [long_run["id"]]
    assert long_run["state"] == "running"
    assert query(db, "SELECT stopped_at FROM runners")[0]["stopped_at"] is not None
    # it keeps running under its monitor; a later runner re-attaches it
    assert psutil.pid_exists(long_pid)
    s = fast_settings(tmp_path)
    try:
        with RunnerThread(specs, s) as rt:
            wait_for(lambda: query(db, "SELECT 1 FROM events WHERE kind = 'reattached'"), timeout=15)
            assert query(db, "SELECT runner_id FROM runs WHERE job = 'long'")[0]["runner_id"] == rt.runner.id
    finally:
        os.killpg(long_pid, signal.SIGKILL)


@pytest.mark.slow
def test_missing_spec_folder_keeps_last_good_specs(tmp_path):
    import shutil
    specs = tmp_path / "jobs"
    # cwd outside the folder: the jobs themselves don't need it (a job whose cwd is gone fails)
    write_specs(specs, f'name = "tick"\ncommand = ["{PY}", "-c", "pass"]\nevery = "1s"\ncwd = "/"\n')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s) as rt:
        wait_for(lambda: terminal_runs(s.ledger, "tick"), timeout=15)
        shutil.rmtree(specs)
        time.sleep(1.5)
        n = len(terminal_runs(s.ledger, "tick"))
        wait_for(lambda: len(terminal_runs(s.ledger, "tick")) >= n + 2, timeout=15)
        assert "tick" in rt.runner.jobs
    assert all(r["state"] == "succeeded" for r in terminal_runs(s.ledger, "tick"))
    assert query(s.ledger, "SELECT enabled FROM jobs WHERE name = 'tick'")[0]["enabled"] == 1


@pytest.mark.slow
def test_new_file_cannot_take_over_a_running_job(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, f'name = "tick"\ncommand = ["{PY}", "-c", "print(\'original\')"]\nevery = "1s"\n', "j.toml")
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: terminal_runs(s.ledger, "tick"), timeout=15)
        write_specs(specs, f'name = "tick"\ncommand = ["{PY}", "-c", "print(\'usurper\')"]\nevery = "1s"\n',
                    "a-dup.toml")  # sorts before j.toml
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM events WHERE kind = 'spec_error'"), timeout=15)
        n = len(terminal_runs(s.ledger, "tick"))
        wait_for(lambda: len(terminal_runs(s.ledger, "tick")) >= n + 2, timeout=15)
    outs = {_stdout_of(s.ledger, r["id"]) for r in terminal_runs(s.ledger, "tick")}
    assert outs == {"original\n"}
    err = query(s.ledger, "SELECT reason FROM events WHERE kind = 'spec_error'")[0]["reason"]
    assert "a-dup.toml" in err and "duplicate" in err
