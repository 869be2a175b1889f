"""A run's timeout holds while no runner is up: the per-run monitor keeps the deadline itself
(the C monitor in its own loop, the sh one through ``core.monitor.TIMER``), and a runner that re-attaches a run counts the deadline from the
run's start. A run is recorded timed out only when it was ended at its deadline, never because
the runner came back late. Monitors alone (no runner), then real runner processes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from core import monitor
from tests.kit import monitors
from tests.kit.sweep import pid_alive, wait_for

TERMINAL = ("succeeded", "failed", "blocked", "timed_out", "orphaned", "abandoned")


def _start(art: Path, cmd: str, *, timeout: float, grace: float) -> subprocess.Popen:
    monitor.prepare(art)
    return subprocess.Popen(monitor.argv(art, 8192, ["sh", "-c", cmd], timeout=timeout, grace=grace),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)


def _holding(art: Path) -> list[psutil.Process]:
    """Live processes whose command line names folder ``art`` (the monitor, its timer)."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["status"] != psutil.STATUS_ZOMBIE and str(art) in (p.info["cmdline"] or []):
            out.append(p)
    return out


def _timers(art: Path) -> list[psutil.Process]:
    """The deadline keepers of folder ``art``: leaders of a session of their own (the monitor's
    drains share the monitor's group)."""
    out = []
    for p in _holding(art):
        try:
            if os.getpgid(p.pid) == p.pid and p.pid != monitor.monitor_pid(art):
                out.append(p)
        except ProcessLookupError:
            continue
    return out


def test_the_monitor_ends_a_job_at_its_deadline_with_no_runner(tmp_path):
    proc = _start(tmp_path, "echo start; sleep 60", timeout=0.5, grace=5)
    job = int(proc.stdout.readline())
    assert proc.wait(timeout=20) == 128 + signal.SIGTERM
    assert monitor.timed_out(tmp_path)
    assert monitor.exit_status(tmp_path) == 128 + signal.SIGTERM
    assert not pid_alive(job)


def test_a_job_that_traps_sigterm_is_killed_after_the_grace(tmp_path):
    proc = _start(tmp_path, "trap '' TERM; echo start; sleep 60", timeout=0.3, grace=0.3)
    job = int(proc.stdout.readline())
    assert proc.wait(timeout=20) == 128 + signal.SIGKILL
    assert monitor.timed_out(tmp_path) and not pid_alive(job)


def test_a_job_that_ends_first_is_not_timed_out_and_leaves_no_timer_behind(tmp_path):
    proc = _start(tmp_path, "echo done; exit 4", timeout=3600, grace=5)
    assert proc.wait(timeout=20) == 4
    assert monitor.exit_status(tmp_path) == 4 and not monitor.timed_out(tmp_path)
    # The deadline keeper went with the job's end, not an hour later.
    assert wait_for(lambda: not _holding(tmp_path), timeout=10), _holding(tmp_path)


def test_a_killed_monitor_takes_its_deadline_keeper_with_it(tmp_path, monkeypatch):
    # The sh monitor's keeper is a process of its own (the C monitor keeps the deadline itself).
    monitors.use(monkeypatch, "sh")
    proc = _start(tmp_path, "echo start; sleep 60", timeout=3600, grace=5)
    job = int(proc.stdout.readline())
    assert wait_for(lambda: _timers(tmp_path), timeout=10)
    os.killpg(proc.pid, signal.SIGKILL)  # the monitor and its drains, not the job
    proc.wait(timeout=10)
    try:
        assert wait_for(lambda: not _holding(tmp_path), timeout=10), _holding(tmp_path)
    finally:
        os.killpg(job, signal.SIGKILL)


# -- with real runners ---------------------------------------------------------------------

def job(body: str, *, timeout: str = "3s", grace: str = "0.5s") -> str:
    return (f'name = "slow"\nonce = true\ntimeout = "{timeout}"\ngrace = "{grace}"\n'
            f'command = ["sh", "-c", "{body}"]\n')


def running(rig) -> dict:
    assert wait_for(lambda: rig.query("SELECT 1 FROM runs WHERE job = 'slow' AND state = 'running'"), timeout=30)
    return rig.query("SELECT * FROM runs WHERE job = 'slow'")[0]


def settled(rig, run_id: int) -> dict:
    assert wait_for(lambda: rig.query("SELECT 1 FROM job_outcomes WHERE run_id = ? AND judged_by IS NOT NULL",
                                      (run_id,)), timeout=30)
    return rig.query("SELECT * FROM runs WHERE id = ?", (run_id,))[0]


def killed_runner(rig, proc) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.mark.slow
def test_a_job_past_its_timeout_during_a_runner_outage_is_ended_and_recorded_timed_out(rig):
    rig.write(job("echo start; sleep 60"))
    first = rig.start()
    run = running(rig)
    killed_runner(rig, first)
    art = Path(run["artifacts_dir"])
    # No runner is up: the monitor ends the job at its deadline all the same.
    assert wait_for(lambda: monitor.exit_status(art) is not None, timeout=20)
    assert monitor.timed_out(art) and not pid_alive(run["pid"])
    assert not rig.query("SELECT 1 FROM runs WHERE id = ? AND state IN ('timed_out', 'failed')", (run["id"],))
    rig.start()
    end = settled(rig, run["id"])
    assert (end["state"], end["reason_code"], end["signal"]) == ("timed_out", "timeout", signal.SIGTERM), end
    assert end["ended_at"] == pytest.approx(monitor.exit_time(art), abs=0.5)


@pytest.mark.slow
def test_a_reattached_run_already_past_its_deadline_is_ended_at_once_as_timed_out(rig, monkeypatch):
    # A run whose monitor keeps no deadline (started by an older version before an upgrade:
    # here the sh monitor's deadline keeper is killed) is still ended by the runner that
    # re-attaches it, the deadline counted from the run's start.
    monitors.use(monkeypatch, "sh")
    rig.write(job("echo start; sleep 60"))
    first = rig.start()
    run = running(rig)
    art = Path(run["artifacts_dir"])
    killed_runner(rig, first)
    assert wait_for(lambda: _timers(art), timeout=10)
    for timer in _timers(art):
        os.killpg(timer.pid, signal.SIGKILL)  # its own session: the timer and its sleep
    deadline = run["started_at"] + 3.0
    assert wait_for(lambda: time.time() > deadline + 0.5, timeout=10)
    assert pid_alive(run["pid"]), "nothing ended it while no runner was up"
    rig.start()
    end = settled(rig, run["id"])
    assert (end["state"], end["reason_code"]) == ("timed_out", "timeout"), end
    assert "timed out after 3s" in end["reason"]


@pytest.mark.slow
def test_a_job_that_ended_in_time_is_not_timed_out_when_the_runner_returns_after_its_deadline(rig, tmp_path):
    gate = tmp_path / "go"
    rig.write(job(f"echo start; until [ -e {gate} ]; do sleep 0.05; done; echo done"))
    first = rig.start()
    run = running(rig)
    killed_runner(rig, first)
    art = Path(run["artifacts_dir"])
    gate.touch()
    assert wait_for(lambda: monitor.exit_status(art) == 0, timeout=20)
    assert wait_for(lambda: time.time() > run["started_at"] + 3.5, timeout=10)  # past the deadline
    rig.start()
    end = settled(rig, run["id"])
    assert (end["state"], end["exit_code"]) == ("succeeded", 0), end
    assert not monitor.timed_out(art)
