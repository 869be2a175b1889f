"""A run's monitor (``core.monitor``) killed while its runner is alive: the job's true end is
still recorded, its helpers are never blamed on the job, and an operator's abandon ends both
the job and its monitor without paging anyone. Real runner processes, real signals.

The C monitor reads the job's pipes itself, so like conmon's, its death takes the reading end
with it: a job that writes afterwards ends by SIGPIPE, and that true end is what is recorded.
The sh monitor's drains are processes of their own and outlive a monitor killed alone."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from core import actions, monitor
from tests.kit import monitors
from tests.kit.sweep import pid_alive, wait_for

TERMINAL = ("succeeded", "failed", "blocked", "timed_out", "orphaned", "abandoned")


def job(body: str) -> str:
    return f'name = "plain"\nonce = true\ntimeout = "60s"\ncommand = ["sh", "-c", "{body}"]\n'


def running(rig) -> dict:
    assert wait_for(lambda: rig.query("SELECT 1 FROM runs WHERE job = 'plain' AND state = 'running'"), timeout=30)
    return rig.query("SELECT * FROM runs WHERE job = 'plain'")[0]


def settled(rig, run_id: int) -> dict:
    assert wait_for(lambda: rig.query("SELECT 1 FROM job_outcomes WHERE run_id = ? AND judged_by IS NOT NULL",
                                      (run_id,)), timeout=30)
    return rig.query("SELECT r.*, o.handoff_findings, o.stdout_head FROM runs r"
                     " JOIN job_outcomes o ON o.run_id = r.id WHERE r.id = ?", (run_id,))[0]


def monitor_of(run: dict) -> int:
    assert wait_for(lambda: monitor.monitor_pid(Path(run["artifacts_dir"])), timeout=10)
    pid = monitor.monitor_pid(Path(run["artifacts_dir"]))
    assert pid is not None
    return pid


@pytest.mark.slow
@pytest.mark.parametrize("kind", monitors.KINDS)
def test_a_killed_monitor_still_leaves_the_jobs_true_exit_recorded(rig, monkeypatch, kind):
    monitors.use(monkeypatch, kind)
    rig.write(job("echo start; sleep 1.5; echo end; exit 0"))
    rig.start()
    run = running(rig)
    assert wait_for(lambda: b"start" in monitor.read_output(Path(run["artifacts_dir"]), "stdout"), timeout=10)
    os.kill(monitor_of(run), signal.SIGKILL)
    end = settled(rig, run["id"])
    # The runner, as subreaper, adopted the job when its monitor died and reaped it itself.
    if kind == "sh":
        assert (end["state"], end["exit_code"], end["signal"], end["reason_code"]) == ("succeeded", 0, None, "completed")
        assert not rig.query("SELECT 1 FROM escalations WHERE latest_run_id = ?", (run["id"],))
    else:  # `echo end` found no reader left
        assert (end["state"], end["exit_code"], end["signal"], end["reason_code"]) == ("failed", None, 13, "signal")
    assert "exit_unknown" not in [f["code"] for f in json.loads(end["handoff_findings"] or "[]")]


@pytest.mark.slow
def test_the_monitors_own_drains_are_never_taken_for_the_jobs_escaped_processes(rig):
    rig.write(job("echo start; sleep 30"))
    rig.start()
    run = running(rig)
    assert wait_for(lambda: b"start" in monitor.read_output(Path(run["artifacts_dir"]), "stdout"), timeout=10)
    mon = monitor_of(run)
    os.kill(mon, signal.SIGKILL)
    # Once the job has been re-parented to the runner (killed together, the dying monitor may
    # still reap the job: its status is then lost and the run is orphaned, reason monitor_gone).
    assert wait_for(lambda: _parent(run["pid"]) not in (mon, None), timeout=10)
    os.killpg(run["pgid"], signal.SIGKILL)
    end = settled(rig, run["id"])
    assert (end["state"], end["exit_code"], end["signal"], end["reason_code"]) == ("failed", None, 9, "signal"), end
    codes = [f["code"] for f in json.loads(end["handoff_findings"] or "[]")]
    assert "escaped_processes" not in codes and "exit_unknown" not in codes
    esc = rig.query("SELECT reason FROM escalations WHERE latest_run_id = ?", (run["id"],))
    assert not any("outside its process group" in (e["reason"] or "") for e in esc)
    # ... and the drains are gone all the same.
    assert wait_for(lambda: not [p for p in _group(mon)], timeout=10)


def _parent(pid: int) -> int | None:
    import psutil
    try:
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return None


def _group(pgid: int) -> list[int]:
    import psutil
    out = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except (OSError, psutil.Error):
            continue
    return out


@pytest.mark.slow
def test_abandon_of_a_live_run_that_traps_sigterm_pages_nobody(rig):
    # The job exits with a code of its own on the abandon's SIGTERM: still the abandon's doing.
    rig.write(job("trap 'exit 3' TERM; echo start; sleep 30 & wait"))
    rig.start()
    run = running(rig)
    # Its trap is set once it printed: the pid is recorded as soon as the job is forked.
    assert wait_for(lambda: b"start" in monitor.read_output(Path(run["artifacts_dir"]), "stdout"), timeout=10)
    mon = monitor_of(run)
    result = actions.abandon(rig.led, run["id"], "ana", grace_s=2.0)
    assert result.ok and "no live process" not in result.message, result.message
    assert wait_for(lambda: not pid_alive(run["pid"]) and not pid_alive(mon), timeout=10)
    assert wait_for(lambda: rig.query("SELECT 1 FROM events WHERE kind = 'late_result_judged' AND run_id = ?",
                                      (run["id"],)), timeout=15)
    late = rig.query("SELECT detail FROM events WHERE kind = 'late_result' AND run_id = ?", (run["id"],))
    assert json.loads(late[0]["detail"])["exit_code"] == 3
    assert rig.query("SELECT state FROM runs WHERE id = ?", (run["id"],))[0]["state"] == "abandoned"
    assert not rig.query("SELECT 1 FROM escalations WHERE kind = 'late_result'")


@pytest.mark.slow
def test_abandon_without_a_runner_ends_the_monitor_a_stray_kept_alive(rig):
    # A process that left the job's group holds the output pipe: the monitor's drains never
    # see its end, and with no runner to end them the abandon must.
    rig.write(job("setsid sleep 30 & echo start; sleep 30"))
    first = rig.start()
    run = running(rig)
    mon = monitor_of(run)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    result = actions.abandon(rig.led, run["id"], "ana", grace_s=1.0)
    assert result.ok and "its monitor" in result.message, result.message
    assert wait_for(lambda: not pid_alive(mon) and not _group(mon), timeout=10)
