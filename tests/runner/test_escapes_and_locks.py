"""Timeouts hold while another process holds the ledger lock; processes that escape the
process group neither keep a run open nor survive its timeout."""

from __future__ import annotations

import json
import sys
import time

import psutil
import pytest

from core.ledger.connection import Ledger
from tests.kit.harness import RunnerThread, fast_settings, query, terminal_runs, wait_for, write_specs

PY = sys.executable


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.slow
def test_timeout_is_enforced_while_the_ledger_is_locked(tmp_path):
    specs = tmp_path / "jobs"
    stamp = tmp_path / "alive.txt"
    # The stamp is replaced whole (write, then rename): killed between a truncate and its
    # write, the job once left an empty stamp, which this test could not read.
    write_specs(specs, f'''
name = "hang"
command = ["{PY}", "-c", "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN)\\nwhile True:\\n    open(r'{stamp}.new', 'w').write(str(time.time())); os.replace(r'{stamp}.new', r'{stamp}'); time.sleep(0.1)"]
once = true
timeout = "1s"
grace = "0.5s"
''')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM runs WHERE state = 'running'"), timeout=15)
        holder = Ledger(s.ledger)
        holder.conn.execute("BEGIN IMMEDIATE")
        t0 = time.time()
        time.sleep(5)  # the runner's loop is stuck on ledger writes; the watchdog is not
        last_alive = float(stamp.read_text())
        holder.conn.execute("COMMIT")
        holder.close()
        wait_for(lambda: terminal_runs(s.ledger, "hang"), timeout=15)
    r = terminal_runs(s.ledger, "hang")[0]
    assert r["state"] == "timed_out" and r["signal"] == 9
    assert last_alive - t0 < 2.5, "the job outlived its timeout + grace while the ledger was locked"


@pytest.mark.slow
def test_setsid_daemon_does_not_hold_the_run_open(tmp_path):
    specs = tmp_path / "jobs"
    pidfile = tmp_path / "daemon.pid"
    script = tmp_path / "daemonize.py"
    script.write_text(f"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(r'{pidfile}', 'w').write(str(os.getpid()))
        time.sleep(300)
    os._exit(0)
time.sleep(0.5)
print('worker done', flush=True)
""")
    write_specs(specs, f'name = "daemonizer"\ncommand = ["{PY}", "{script}"]\nonce = true\ntimeout = "30s"\n')
    s = fast_settings(tmp_path)
    daemon = None
    try:
        with RunnerThread(specs, s):
            wait_for(lambda: terminal_runs(s.ledger, "daemonizer"), timeout=15)
        daemon = int(pidfile.read_text())
        r = terminal_runs(s.ledger, "daemonizer")[0]
        assert r["state"] == "succeeded" and r["ended_at"] - r["started_at"] < 5
        o = query(s.ledger, "SELECT handoff_findings FROM job_outcomes WHERE run_id = ?", (r["id"],))[0]
        found = [f for f in json.loads(o["handoff_findings"]) if f["code"] == "escaped_processes"]
        assert found and f"pid {daemon}" in found[0]["message"]
    finally:
        if daemon and _alive(daemon):
            psutil.Process(daemon).kill()


def test_escaped_processes_are_killed_at_timeout(tmp_path):
    specs = tmp_path / "jobs"
    pidfile = tmp_path / "escapee.pid"
    script = tmp_path / "escape.py"
    script.write_text(f"""
import os, time
if os.fork() == 0:
    os.setpgid(0, 0)
    open(r'{pidfile}', 'w').write(str(os.getpid()))
    time.sleep(300)
time.sleep(300)
""")
    write_specs(specs, f'name = "escaper"\ncommand = ["{PY}", "{script}"]\nonce = true\ntimeout = "1s"\ngrace = "0.5s"\n')
    s = fast_settings(tmp_path)
    escapee = None
    try:
        with RunnerThread(specs, s):
            wait_for(lambda: terminal_runs(s.ledger, "escaper"), timeout=15)
        escapee = int(pidfile.read_text())
        time.sleep(0.2)
        assert not _alive(escapee)
        r = terminal_runs(s.ledger, "escaper")[0]
        o = query(s.ledger, "SELECT handoff_findings FROM job_outcomes WHERE run_id = ?", (r["id"],))[0]
        assert any(f["code"] == "escaped_processes" and "killed" in f["message"]
                   for f in json.loads(o["handoff_findings"]))
    finally:
        if escapee and _alive(escapee):
            psutil.Process(escapee).kill()


def test_watchdog_unit():
    import subprocess

    from core.runner.watchdog import Watchdog
    wd = Watchdog()
    try:
        p = subprocess.Popen([PY, "-c", "import time; time.sleep(30)"], start_new_session=True)
        wd.watch(1, p.pid, 0.3, 0.3)
        assert p.wait(timeout=5) == -15 and wd.fired(1)
        q = subprocess.Popen([PY, "-c", "import time; time.sleep(0.1)"], start_new_session=True)
        wd.watch(2, q.pid, 5, 1)
        q.wait(timeout=5)
        wd.cancel(2)
        assert not wd.fired(2)
    finally:
        wd.stop()


def test_abandon_kill_is_not_escalated_as_late_result(tmp_path):
    from core import actions
    specs = tmp_path / "jobs"
    write_specs(specs, f'name = "long"\ncommand = ["{PY}", "-c", "import time; time.sleep(60)"]\nonce = true\n')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s):
        run = wait_for(lambda: query(s.ledger, "SELECT * FROM runs WHERE state = 'running'"), timeout=15)[0]
        with Ledger(s.ledger) as led:
            assert actions.abandon(led, run["id"], "ana").ok
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM events WHERE kind = 'late_result_judged'"), timeout=15)
    assert query(s.ledger, "SELECT state FROM runs WHERE id = ?", (run["id"],))[0]["state"] == "abandoned"
    late = query(s.ledger, "SELECT detail FROM events WHERE kind = 'late_result' AND run_id = ?", (run["id"],))
    # the runner in this same process reaped its own child: the real status, not a lost one
    assert json.loads(late[0]["detail"])["signal"] == 15
    assert not query(s.ledger, "SELECT 1 FROM escalations WHERE kind = 'late_result'")


def test_escape_search_matches_the_runner_too_not_just_the_run_id():
    """Run ids restart at 1 in every ledger: another Watchkeeper's run 7 is not ours to kill."""
    import os
    import subprocess

    from core.processes import find_escaped
    env = {**os.environ, "WATCHKEEPER_RUN_ID": "987654", "WATCHKEEPER_RUNNER_ID": "other-host-1-abc"}
    p = subprocess.Popen(["sleep", "30"], env=env, start_new_session=True)
    try:
        from tests.kit.harness import wait_for
        wait_for(lambda: find_escaped(987654, "other-host-1-abc"), timeout=10)
        assert find_escaped(987654, "mine-host-2-def") == []
    finally:
        p.kill()
        p.wait()
