"""A host life is hostname + boot id: process ids are probed only within one. A run of
another host, or of this host before a reboot, is judged by its lease alone, so a live
process here that happens to hold its pid never keeps it alive."""

from __future__ import annotations

import os

from core import liveness
from core.ledger.records import Runner
from core.liveness import RunnerLiveness
from core.sweep.sweep import LEFT_ELSEWHERE_S, Sweeper
from tests.kit.sweep import add_job, add_run, add_runner, fast_settings, run_row


def _runner(**kw) -> Runner:
    base = dict(id="r", hostname=liveness.hostname(), boot_id=liveness.boot_id(), pid=os.getpid(),
                pid_create_time=None, heartbeat_at=0.0, lease_s=1.0)
    return Runner(**{**base, **kw})


def test_a_reboot_is_a_new_host_life(monkeypatch):
    monkeypatch.setenv("WATCHKEEPER_BOOT_ID", "life-2")
    assert liveness.same_life(liveness.hostname(), "life-2")
    assert not liveness.same_life(liveness.hostname(), "life-1")
    assert not liveness.same_life("db1", "life-2")
    assert liveness.same_life(liveness.hostname(), None)  # a row from before boot ids: hostname decides


def test_stale_runner_of_another_life_is_gone_though_its_pid_is_alive_here(monkeypatch):
    monkeypatch.setenv("WATCHKEEPER_BOOT_ID", "life-2")
    # our own pid is alive; the runner row claims it, but from the life before a reboot
    before_reboot = _runner(boot_id="life-1")
    other_host = _runner(hostname="db1", boot_id="life-2")
    this_life = _runner(boot_id="life-2")
    assert liveness.runner_liveness(before_reboot, now=100.0) is RunnerLiveness.GONE
    assert liveness.runner_liveness(other_host, now=100.0) is RunnerLiveness.GONE
    assert liveness.runner_liveness(this_life, now=100.0) is RunnerLiveness.STALLED


def test_colliding_pid_on_another_host_never_keeps_its_run_alive(ledger, tmp_path):
    settings = fast_settings(tmp_path / "wk.db")
    add_job(ledger)
    me = os.getpid()  # alive here: on db1 the same pid is some other process (or none)
    owner = add_runner(ledger, pid=me, heartbeat_age=30.0, host="db1", boot_id="db1-life")
    run_id = add_run(ledger, pid=me, runner_id=owner)

    report = Sweeper(settings, actor="sweep").sweep_once(ledger)

    assert report.orphaned == [run_id] and report.killed == []  # judged by lease; nothing killed here
    assert run_row(ledger, run_id)["state"] == "orphaned"
    assert os.getpid() == me


def test_run_of_a_live_runner_on_another_host_is_left_alone(ledger, tmp_path):
    settings = fast_settings(tmp_path / "wk.db")
    add_job(ledger)
    owner = add_runner(ledger, pid=1, lease_s=60.0, host="db1", boot_id="db1-life")
    run_id = add_run(ledger, pid=1, runner_id=owner, lease_left=60.0)

    report = Sweeper(settings, actor="sweep").sweep_once(ledger)

    assert report.orphaned == [] and run_row(ledger, run_id)["state"] == "running"


def test_run_a_clean_stop_left_on_another_host_waits_for_a_runner_there(ledger, tmp_path):
    settings = fast_settings(tmp_path / "wk.db")
    add_job(ledger)
    owner = add_runner(ledger, pid=1, heartbeat_age=30.0, host="db1", boot_id="db1-life", stopped=True)
    run_id = add_run(ledger, pid=1, runner_id=owner)  # its lease ran out long ago
    sweeper = Sweeper(settings, actor="sweep")

    assert sweeper.settle(ledger, settle_gone_now=True).pending == [run_id]  # not even at a runner's start
    assert sweeper.sweep_once(ledger).pending == [run_id]
    assert run_row(ledger, run_id)["state"] == "running"

    # a day later nothing of db1 came back to re-attach it: the sweep declares it
    later = sweeper.settle(ledger, now=run_row(ledger, run_id)["updated_at"] + LEFT_ELSEWHERE_S + 60)
    assert later.orphaned == [run_id] and later.killed == []
    assert run_row(ledger, run_id)["reason_code"] == "interrupted"


def test_run_a_clean_stop_left_before_a_reboot_is_orphaned_by_the_next_life(ledger, tmp_path, monkeypatch):
    monkeypatch.setenv("WATCHKEEPER_BOOT_ID", "life-2")
    settings = fast_settings(tmp_path / "wk.db")
    add_job(ledger)
    owner = add_runner(ledger, pid=os.getpid(), heartbeat_age=30.0, boot_id="life-1", stopped=True)
    run_id = add_run(ledger, pid=os.getpid(), runner_id=owner)  # its monitor died with that life

    report = Sweeper(settings, actor="sweep").sweep_once(ledger)

    assert report.orphaned == [run_id] and report.killed == []  # this host's name: no waiting


def test_run_a_clean_stop_left_on_another_host_is_orphaned_once_past_its_own_time_limit(ledger, tmp_path):
    """Trusted to its monitor on db1 no longer than its own time limit and a lease: that
    monitor ends the job at its deadline whether a runner is there or not, and a run still
    counted live holds its job's next slots on every host (found by a helper: a cleanly
    stopped host's runs blocked their jobs fleet-wide, for up to a day)."""
    settings = fast_settings(tmp_path / "wk.db")
    add_job(ledger, timeout="5s", grace="1s")
    owner = add_runner(ledger, pid=1, heartbeat_age=30.0, host="db1", boot_id="db1-life", stopped=True)
    run_id = add_run(ledger, pid=1, runner_id=owner, spawned_ago=2.0)
    sweeper = Sweeper(settings, actor="sweep")
    started = run_row(ledger, run_id)["started_at"]

    assert sweeper.settle(ledger, now=started + 5.0).pending == [run_id]  # it may still be running there
    later = sweeper.settle(ledger, now=started + 5.0 + 1.0 + settings.lease + 1.0)
    assert later.orphaned == [run_id] and later.killed == []
    assert run_row(ledger, run_id)["reason_code"] == "interrupted"
