"""The sweep declares a run orphaned only when its lease expired and its process is gone,
and never touches runs of live (or stalled) runners."""

from __future__ import annotations

import os

import pytest

from core.ledger import outcomes
from core.ledger.connection import Ledger
from core.sweep.sweep import Sweeper, reconcile_startup
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
    spawn,
    spawn_with_grandchild,
)


@pytest.fixture
def settings(tmp_path):
    return fast_settings(tmp_path / "wk.db")


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        kill_tree(p)


def test_dead_process_of_gone_runner_is_orphaned_and_retried(ledger, settings):
    add_job(ledger, max_attempts=3)
    pid, ctime = dead_pid()
    run_id = add_run(ledger, pid=pid, create_time=ctime, runner_id=gone_runner(ledger))

    report = Sweeper(settings, actor="sweep").sweep_once(ledger)

    assert report.orphaned == [run_id] and report.killed == []
    row = run_row(ledger, run_id)
    assert row["state"] == "orphaned" and row["reason"] == "lease_expired" and row["ended_at"]
    assert outcomes.get(ledger.conn, run_id)["status"] == "orphaned"
    moves = events(ledger, run_id, "transition")
    assert moves[-1]["actor"] == "sweep" and moves[-1]["to_state"] == "orphaned"
    nxt = ledger.one("SELECT * FROM runs WHERE lineage = ? AND attempt = 2", (row["lineage"],))
    assert nxt is not None and nxt["state"] == "queued" and nxt["trigger"] == "retry"


def test_live_quiet_job_past_its_lease_with_runner_alive_is_left_alone(ledger, settings, procs):
    add_job(ledger)
    job = spawn("sleep", "30")
    procs.append(job)
    rid = add_runner(ledger, pid=os.getpid())  # this test process plays the live runner
    run_id = add_run(ledger, pid=job.pid, runner_id=rid, lease_left=-10)

    report = Sweeper(settings, actor="sweep").sweep_once(ledger)

    assert report.orphaned == [] and run_row(ledger, run_id)["state"] == "running"
    assert pid_alive(job.pid)


def test_dead_process_of_live_runner_is_left_to_its_runner(ledger, settings):
    add_job(ledger)
    pid, ctime = dead_pid()
    rid = add_runner(ledger, pid=os.getpid())
    run_id = add_run(ledger, pid=pid, create_time=ctime, runner_id=rid, lease_left=-10)
    assert Sweeper(settings, actor="sweep").sweep_once(ledger).orphaned == []
    assert run_row(ledger, run_id)["state"] == "running"


def test_live_process_of_gone_runner_is_killed_with_its_group_and_orphaned(ledger, settings, procs):
    add_job(ledger, grace=0.5)
    job, grandchild = spawn_with_grandchild()
    procs.append(job)
    run_id = add_run(ledger, pid=job.pid, runner_id=gone_runner(ledger))

    report = Sweeper(settings, actor="sweep").sweep_once(ledger)

    assert report.killed == [run_id] and report.orphaned == [run_id]
    job.wait(timeout=5)
    assert not pid_alive(grandchild)
    row = run_row(ledger, run_id)
    assert row["state"] == "orphaned" and row["reason"] == "runner_gone"
    assert events(ledger, run_id, "transition")[-1]["detail"].count('"killed": true') == 1


def test_reused_pid_with_other_create_time_is_orphaned_not_killed(ledger, settings, procs):
    add_job(ledger)
    stranger = spawn("sleep", "30")
    procs.append(stranger)
    real_ctime = __import__("psutil").Process(stranger.pid).create_time()
    run_id = add_run(ledger, pid=stranger.pid, create_time=real_ctime - 100, runner_id=gone_runner(ledger))

    report = Sweeper(settings, actor="sweep").sweep_once(ledger)

    assert report.orphaned == [run_id] and report.killed == []
    assert pid_alive(stranger.pid), "a process that merely reuses the pid must not be killed"


def test_stalled_runner_is_reported_and_its_runs_untouched(ledger, settings, procs):
    add_job(ledger)
    pid, ctime = dead_pid()
    rid = add_runner(ledger, pid=os.getpid(), heartbeat_age=30.0)  # alive process, stale heartbeat
    run_id = add_run(ledger, pid=pid, create_time=ctime, runner_id=rid, lease_left=-10)

    report = Sweeper(settings, actor="sweep").sweep_once(ledger)

    assert report.stalled_runners == [rid] and report.orphaned == []
    assert run_row(ledger, run_id)["state"] == "running"


def test_gone_runner_within_lease_waits_but_startup_reconciliation_settles_now(ledger, settings):
    add_job(ledger)
    pid, ctime = dead_pid()
    run_id = add_run(ledger, pid=pid, create_time=ctime, runner_id=gone_runner(ledger), lease_left=60)

    report = Sweeper(settings, actor="sweep").sweep_once(ledger)
    assert report.pending == [run_id] and run_row(ledger, run_id)["state"] == "running"

    me = add_runner(ledger, pid=os.getpid())
    assert reconcile_startup(ledger, settings, runner_id=me) == [run_id]
    row = run_row(ledger, run_id)
    assert row["state"] == "orphaned" and row["reason"] == "runner_gone"
    assert events(ledger, run_id, "transition")[-1]["actor"] == f"runner:{me}"


def test_runner_killed_with_fresh_heartbeat_is_gone_at_startup(ledger, settings):
    add_job(ledger)
    pid, ctime = dead_pid()
    rid = add_runner(ledger, pid=pid, create_time=ctime, heartbeat_age=0.0)
    run_id = add_run(ledger, pid=pid, create_time=ctime, runner_id=rid, lease_left=60)
    assert reconcile_startup(ledger, settings, runner_id="new") == [run_id]


def test_startup_reconciliation_leaves_live_and_own_runs(ledger, settings, procs):
    add_job(ledger)
    pid, ctime = dead_pid()
    other = add_runner(ledger, pid=os.getpid())
    mine = add_runner(ledger, pid=pid, create_time=ctime)  # own row: never judged by itself
    a = add_run(ledger, pid=pid, create_time=ctime, runner_id=other, lease_left=-5)
    b = add_run(ledger, pid=pid, create_time=ctime, runner_id=mine, lease_left=-5)
    assert reconcile_startup(ledger, settings, runner_id=mine) == []
    assert run_row(ledger, a)["state"] == run_row(ledger, b)["state"] == "running"


def test_spawned_run_past_start_deadline_without_process_is_orphaned(ledger, settings):
    add_job(ledger)
    run_id = add_run(ledger, state="spawned", pid=None, runner_id=None, lease_left=None, spawned_ago=5)
    report = Sweeper(settings, actor="sweep").sweep_once(ledger)
    assert report.orphaned == [run_id]
    assert run_row(ledger, run_id)["reason"] == "start_timeout"


def test_spawned_run_within_start_deadline_is_pending(ledger, settings):
    add_job(ledger)
    run_id = add_run(ledger, state="spawned", pid=None, runner_id=None, lease_left=None, spawned_ago=0.0)
    assert Sweeper(settings, actor="sweep").sweep_once(ledger).pending == [run_id]


def test_verifying_run_of_gone_runner_is_orphaned(ledger, settings):
    add_job(ledger)
    pid, ctime = dead_pid()
    run_id = add_run(ledger, state="verifying", pid=pid, create_time=ctime, runner_id=gone_runner(ledger))
    assert Sweeper(settings, actor="sweep").sweep_once(ledger).orphaned == [run_id]


def test_cleanly_stopped_runner_counts_as_gone(ledger, settings):
    add_job(ledger)
    pid, ctime = dead_pid()
    rid = add_runner(ledger, pid=os.getpid(), stopped=True)
    run_id = add_run(ledger, pid=pid, create_time=ctime, runner_id=rid)
    assert Sweeper(settings, actor="sweep").sweep_once(ledger).orphaned == [run_id]


def test_runner_on_another_host_with_stale_heartbeat_is_gone(ledger, settings):
    add_job(ledger)
    rid = add_runner(ledger, pid=os.getpid(), host="elsewhere.invalid", heartbeat_age=30)
    run_id = add_run(ledger, pid=os.getpid(), runner_id=rid)  # pid means nothing on another host
    report = Sweeper(settings, actor="sweep").sweep_once(ledger)
    assert report.orphaned == [run_id] and report.killed == []


def test_runner_on_another_host_with_fresh_heartbeat_is_alive(ledger, settings):
    add_job(ledger)
    pid, ctime = dead_pid()
    rid = add_runner(ledger, pid=pid, create_time=ctime, host="elsewhere.invalid")
    run_id = add_run(ledger, pid=pid, create_time=ctime, runner_id=rid)
    assert Sweeper(settings, actor="sweep").sweep_once(ledger).orphaned == []
    assert run_row(ledger, run_id)["state"] == "running"


def test_crash_loop_stops_at_max_attempts(ledger, settings):
    add_job(ledger, max_attempts=3)
    sweeper = Sweeper(settings, actor="sweep")
    lineage = "L1"
    run_id = add_run(ledger, lineage=lineage, slot="s", runner_id=gone_runner(ledger), pid=dead_pid()[0])
    for attempt in (1, 2, 3):
        assert sweeper.settle(ledger).orphaned == [run_id]
        nxt = ledger.one("SELECT id FROM runs WHERE lineage = ? AND attempt = ?", (lineage, attempt + 1))
        if attempt == 3:
            assert nxt is None
            break
        # The queued retry is picked up and dies again: simulate what a runner would record.
        ledger.write(lambda c, i=nxt["id"]: c.execute("DELETE FROM runs WHERE id = ?", (i,)))
        run_id = add_run(ledger, lineage=lineage, slot="s", attempt=attempt + 1,
                         runner_id=gone_runner(ledger), pid=dead_pid()[0])
    states = [r["state"] for r in ledger.query("SELECT state FROM runs WHERE lineage = ? ORDER BY attempt",
                                               (lineage,))]
    assert states == ["orphaned"] * 3
    last = events(ledger, run_id, "retry_decision")[-1]
    assert last["reason"] == "max_attempts_reached"


def test_stale_attempt_cannot_change_the_next_attempt(ledger, settings):
    from core.ledger import lifecycle

    add_job(ledger, max_attempts=2)
    pid, ctime = dead_pid()
    first = add_run(ledger, lineage="L", slot="s", pid=pid, create_time=ctime, runner_id=gone_runner(ledger))
    assert Sweeper(settings, actor="sweep").settle(ledger).orphaned == [first]
    second = ledger.one("SELECT id FROM runs WHERE lineage = 'L' AND attempt = 2")["id"]
    # The exit of attempt 1 arrives late, addressed at its own run and attempt: it loses.
    assert not lifecycle.transition(ledger, first, 1, "running", "verifying", actor="runner:x")
    # And even aimed at the new row, attempt 1's fencing token does not match attempt 2.
    assert not lifecycle.transition(ledger, second, 1, "queued", "spawned", actor="runner:x")
    assert run_row(ledger, second)["state"] == "queued" and run_row(ledger, first)["state"] == "orphaned"


def test_two_sweepers_racing_orphan_a_run_once(ledger, settings, tmp_path):
    import threading

    add_job(ledger, max_attempts=2)
    runs = []
    for _ in range(5):
        pid, ctime = dead_pid()
        runs.append(add_run(ledger, pid=pid, create_time=ctime, runner_id=gone_runner(ledger)))
    reports = []

    def sweep():
        with Ledger(ledger.target) as own:
            reports.append(Sweeper(settings, actor="sweep").settle(own))

    threads = [threading.Thread(target=sweep) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(i for r in reports for i in r.orphaned) == runs
    for run_id in runs:
        assert len([e for e in events(ledger, run_id, "transition") if e["to_state"] == "orphaned"]) == 1
    assert ledger.one("SELECT count(*) FROM runs WHERE attempt = 2")[0] == 5
