"""Orphaning a run whose leader is dead kills what the run left in its process group — and
only that: a process must be in the recorded group AND carry the run's WATCHKEEPER_RUN_ID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from core import monitor
from core.sweep.sweep import Sweeper
from tests.kit.runners import Runners
from tests.kit.sweep import (
    add_job,
    add_run,
    add_runner,
    dead_pid,
    events,
    fast_settings,
    gone_runner,
    kill_tree,
    pid_alive,
    run_row,
    wait_for,
)


def members(pgid: int, run_id: int | None = None) -> list[int]:
    """Live (non-zombie) pids of group ``pgid``, optionally only those of run ``run_id``."""
    out = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) != pgid or p.status() == psutil.STATUS_ZOMBIE:
                continue
            if run_id is not None and p.environ().get("WATCHKEEPER_RUN_ID") != str(run_id):
                continue
            out.append(p.pid)
        except (OSError, psutil.Error):
            continue
    return out


# -- end to end: runner killed -9, leader exits, restart ------------------------------------


@pytest.fixture
def rig(tmp_path):
    r = Runners(tmp_path)
    yield r
    r.close()


@pytest.mark.slow
def test_leftover_in_the_group_of_a_dead_leader_is_killed_at_restart(rig):
    rig.write('name = "leaky"\ncommand = "sleep 200 & sleep 2; echo leader done"\nonce = true\n')
    runner = rig.start()
    assert wait_for(lambda: [r for r in rig.runs("leaky") if r["state"] == "running"])
    run = rig.runs("leaky")[0]
    assert wait_for(lambda: len(members(run["pgid"], run["id"])) == 3)  # sh, sleep 200, sleep 2
    os.killpg(runner.pid, signal.SIGKILL)
    runner.wait()
    # Its monitor too: nothing can tell how the run ended, so the sweep's leftover kill applies.
    mon = monitor.monitor_pid(Path(run["artifacts_dir"]))
    assert mon is not None
    os.killpg(mon, signal.SIGKILL)
    assert wait_for(lambda: not pid_alive(run["pid"]), timeout=10), "the leader ends on its own"
    leftover = members(run["pgid"], run["id"])
    assert len(leftover) == 1 and psutil.Process(leftover[0]).cmdline() == ["sleep", "200"]

    rig.start()

    assert wait_for(lambda: rig.runs("leaky")[0]["state"] == "orphaned")
    row = rig.runs("leaky")[0]
    assert row["reason"] == "lease_expired"  # the leader was dead: an orphan, not a kill of a live run
    assert wait_for(lambda: not pid_alive(leftover[0]), timeout=5), "sleep 200 survived crash recovery"
    assert members(run["pgid"]) == []
    detail = json.loads(events(rig.led, row["id"], "transition")[-1]["detail"])
    assert [x["pid"] for x in detail["leftovers"]] == leftover and detail["pgid"] == run["pgid"]
    assert detail["leftover_signal"] == signal.SIGTERM
    findings = json.loads(rig.query("SELECT handoff_findings FROM job_outcomes WHERE run_id = ?",
                                    (row["id"],))[0]["handoff_findings"])
    assert [f["code"] for f in findings] == ["leftover_processes"] and str(leftover[0]) in findings[0]["message"]


# -- the sweep alone: what counts as the run's leftover --------------------------------------


@pytest.fixture
def settings(tmp_path):
    return fast_settings(tmp_path / "wk.db")


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        kill_tree(p)


def dead_leader_group(run_id: int) -> tuple[subprocess.Popen, float, dict[str, int]]:
    """A group whose leader (a shell run as run ``run_id``) has exited, leaving three sleeps:
    ``mine`` (inherits WATCHKEEPER_RUN_ID), ``no_env`` (without it) and ``other_run``
    (another run's id). Returns (leader, leader create time, pids)."""
    script = ("sleep 200 & echo $!; env -u WATCHKEEPER_RUN_ID sleep 200 & echo $!;"
              " WATCHKEEPER_RUN_ID=999999 sleep 200 & echo $!; read _")
    leader = subprocess.Popen(["sh", "-c", script], start_new_session=True, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env={**os.environ, "WATCHKEEPER_RUN_ID": str(run_id)})
    ctime = psutil.Process(leader.pid).create_time()
    pids = dict(zip(("mine", "no_env", "other_run"), (int(leader.stdout.readline()) for _ in range(3)), strict=True))
    leader.stdin.close()
    leader.wait(timeout=5)
    return leader, ctime, pids


def test_only_processes_of_the_run_in_its_group_are_killed(ledger, settings, procs):
    add_job(ledger, grace=0.5)
    next_id = ledger.one("SELECT coalesce(max(id), 0) + 1 FROM runs")[0]
    leader, ctime, pids = dead_leader_group(next_id)
    procs.append(leader)
    run_id = add_run(ledger, pid=leader.pid, create_time=ctime, runner_id=gone_runner(ledger))
    assert run_id == next_id and run_row(ledger, run_id)["pgid"] == leader.pid

    report = Sweeper(settings, actor="sweep").sweep_once(ledger)

    assert report.orphaned == [run_id] and report.killed == [] and report.leftovers_killed == [run_id]
    assert wait_for(lambda: not pid_alive(pids["mine"]))
    assert pid_alive(pids["no_env"]), "a group member without the run's id is not proven to be the run's"
    assert pid_alive(pids["other_run"]), "another run's process is never killed"
    row = run_row(ledger, run_id)
    assert (row["state"], row["reason"], row["signal"]) == ("orphaned", "lease_expired", None)
    detail = json.loads(events(ledger, run_id, "transition")[-1]["detail"])
    assert [x["pid"] for x in detail["leftovers"]] == [pids["mine"]]


def test_reused_pgid_of_a_stranger_group_is_not_touched(ledger, settings, procs):
    """The recorded leader is dead and its pid now leads an unrelated group."""
    add_job(ledger, grace=0.5)
    stranger = subprocess.Popen(["sh", "-c", "sleep 200 & wait"], start_new_session=True)
    procs.append(stranger)
    assert wait_for(lambda: len(members(stranger.pid)) == 2)
    real = psutil.Process(stranger.pid).create_time()
    run_id = add_run(ledger, pid=stranger.pid, create_time=real - 100, runner_id=gone_runner(ledger))

    report = Sweeper(settings, actor="sweep").sweep_once(ledger)

    assert report.orphaned == [run_id] and report.leftovers_killed == [] and report.killed == []
    time.sleep(0.2)
    assert len(members(stranger.pid)) == 2
    assert "leftovers" not in json.loads(events(ledger, run_id, "transition")[-1]["detail"])


def test_run_on_another_host_is_orphaned_without_probing(ledger, settings, procs):
    add_job(ledger, grace=0.5)
    next_id = ledger.one("SELECT coalesce(max(id), 0) + 1 FROM runs")[0]
    leader, ctime, pids = dead_leader_group(next_id)
    procs.append(leader)
    pid, rctime = dead_pid()
    far = add_runner(ledger, pid=pid, create_time=rctime, heartbeat_age=5.0, host="elsewhere.example")
    run_id = add_run(ledger, pid=leader.pid, create_time=ctime, runner_id=far)

    report = Sweeper(settings, actor="sweep").sweep_once(ledger)

    assert report.orphaned == [run_id] and report.leftovers_killed == []
    assert pid_alive(pids["mine"]), "the pgid names a group on the other host, not this one"
