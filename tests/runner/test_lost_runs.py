"""A run whose task dies of an error inside the runner (a ledger write failing with disk
full, say) must not stay ``running`` under a live runner: its lease is no longer renewed and
the runner's sweep loop settles it ``orphaned`` (``runner_error``), killing its group if needed."""

from __future__ import annotations

import json
import os

import psutil

from core.runner import executor as runner_mod
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs


def test_a_run_whose_task_crashes_is_settled_and_retried(tmp_path, monkeypatch):
    real = runner_mod.read_handoff
    calls = {"n": 0}

    def broken_once(*a, **kw):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(28, "No space left on device")  # as a full disk would, mid-run
        return real(*a, **kw)
    monkeypatch.setattr(runner_mod, "read_handoff", broken_once)
    specs = tmp_path / "jobs"
    write_specs(specs, '''
name = "crashy"
command = ["sh", "-c", "echo hi"]
once = true
max_attempts = 2
backoff = { initial = "1s", max = "1s", jitter = false }
''')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s) as rt:
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM runs WHERE id = 1 AND state = 'orphaned'"), timeout=30)
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM runs WHERE attempt = 2 AND state = 'succeeded'"), timeout=30)
        assert rt.runner.lost == set()
    first = query(s.ledger, "SELECT * FROM runs WHERE id = 1")[0]
    assert first["reason"] == "runner_error"
    moves = [(e["from_state"], e["to_state"], e["reason"]) for e in query(
        s.ledger, "SELECT * FROM events WHERE run_id = 1 AND kind = 'transition' ORDER BY id")]
    assert moves[-1] == ("running", "orphaned", "runner_error")


def test_a_lost_run_whose_process_still_runs_has_its_group_killed(tmp_path, monkeypatch):
    pidfile = tmp_path / "pid"

    async def crash_wait(self):  # the run's task dies while its process is still running
        raise RuntimeError("runner bug")
    monkeypatch.setattr(runner_mod.spawn.Monitored, "job_exit", crash_wait)
    specs = tmp_path / "jobs"
    write_specs(specs, f'''
name = "sleeper"
command = ["sh", "-c", "echo $$ > {pidfile}; exec sleep 60"]
once = true
''')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), timeout=20)
        pid = int(pidfile.read_text())
        try:
            wait_for(lambda: query(s.ledger, "SELECT 1 FROM runs WHERE id = 1 AND state = 'orphaned'"), timeout=30)
            wait_for(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
                     timeout=10)
        finally:
            try:
                os.killpg(pid, 9)
            except ProcessLookupError:
                pass
    ev = query(s.ledger, "SELECT detail FROM events WHERE run_id = 1 AND to_state = 'orphaned'")[0]
    assert json.loads(ev["detail"])["killed"] is True
