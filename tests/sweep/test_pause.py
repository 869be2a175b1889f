"""A sweep that was paused (stopped process, sleeping machine, clock jump) declares nothing
dead on its first pass back, and waits one heartbeat before it does."""

from __future__ import annotations

import time

import pytest

from core.sweep.sweep import Sweeper
from tests.kit.sweep import add_job, add_run, add_runner, dead_pid, events, fast_settings, run_row


@pytest.fixture
def settings(tmp_path):
    return fast_settings(tmp_path / "wk.db")


def orphan_candidate(ledger):
    add_job(ledger)
    pid, ctime = dead_pid()
    runner_pid, runner_ctime = dead_pid()
    rid = add_runner(ledger, pid=runner_pid, create_time=runner_ctime, heartbeat_age=5)
    return add_run(ledger, pid=pid, create_time=ctime, runner_id=rid)


@pytest.mark.parametrize("gap", [
    pytest.param((10.0, 10.0), id="stopped-process"),      # both clocks moved a lot
    pytest.param((600.0, 0.1), id="machine-asleep"),       # monotonic stood still
    pytest.param((-3600.0, 0.1), id="clock-jumped-back"),  # wall clock went backwards
])
def test_first_pass_after_a_pause_declares_nothing(ledger, settings, gap):
    sweeper = Sweeper(settings, actor="sweep")
    sweeper.sweep_once(ledger)  # the pass before the pause
    run_id = orphan_candidate(ledger)
    wall, mono = time.time(), time.monotonic()
    sweeper._last = (wall - gap[0], mono - gap[1])

    report = sweeper.sweep_once(ledger)

    assert report.skipped_paused and report.orphaned == []
    assert run_row(ledger, run_id)["state"] == "running"
    paused = events(ledger, kind="sweep_paused")
    assert len(paused) == 1 and paused[0]["actor"] == "sweep"


def test_after_a_pause_the_sweep_resumes_once_a_heartbeat_has_passed(ledger, settings):
    sweeper = Sweeper(settings, actor="sweep")
    sweeper.sweep_once(ledger)
    run_id = orphan_candidate(ledger)
    sweeper._last = (time.time() - 10, time.monotonic() - 10)
    assert sweeper.sweep_once(ledger).skipped_paused
    held = sweeper.sweep_once(ledger)  # still inside the heartbeat grace
    assert held.skipped_paused and held.orphaned == []
    time.sleep(settings.heartbeat + 0.05)
    assert sweeper.sweep_once(ledger).orphaned == [run_id]
    assert len(events(ledger, kind="sweep_paused")) == 1


def test_regular_passes_are_not_mistaken_for_a_pause(ledger, settings):
    sweeper = Sweeper(settings, actor="sweep")
    sweeper.sweep_once(ledger)
    run_id = orphan_candidate(ledger)
    time.sleep(settings.sweep_interval)
    report = sweeper.sweep_once(ledger)
    assert not report.skipped_paused and report.orphaned == [run_id]


def test_back_after_the_ledger_was_out_of_reach_it_waits_a_lease_before_judging(ledger, settings, monkeypatch):
    """Every runner's heartbeat went stale while the ledger was out of reach: the first pass
    that reads it again declares nothing dead, nor does any pass for one lease after, so the
    other runners can heartbeat first (a PostgreSQL restart made runners orphan each other's
    live runs)."""
    import core.sweep.sweep as sweep_mod
    from core.ledger.sql_store import SqlStore

    clock = [1000.0]
    monkeypatch.setattr(sweep_mod.time, "monotonic", lambda: clock[0])
    sweeper = Sweeper(settings, actor="sweep")
    run_id = orphan_candidate(ledger)
    real = SqlStore.live_runs_and_owners

    def down(self):
        raise sweep_mod.StorageError("connection to PostgreSQL lost")

    monkeypatch.setattr(SqlStore, "live_runs_and_owners", down)
    assert sweeper.settle(ledger, periodic=True).errors  # out of reach: said, nothing declared
    monkeypatch.setattr(SqlStore, "live_runs_and_owners", real)
    clock[0] += 3.0  # back three seconds later
    back = sweeper.settle(ledger, periodic=True)
    assert back.skipped_paused and back.orphaned == [] and run_row(ledger, run_id)["state"] == "running"
    clock[0] += settings.lease + 3.0 - 0.1  # a lease plus as long as it was out of reach
    assert sweeper.settle(ledger, periodic=True).orphaned == []
    clock[0] += 0.2
    assert sweeper.settle(ledger, periodic=True).orphaned == [run_id]


def test_a_read_answered_late_holds_the_judgement_too(ledger, settings, monkeypatch):
    import core.sweep.sweep as sweep_mod
    from core.ledger.sql_store import SqlStore

    clock = [1000.0]
    monkeypatch.setattr(sweep_mod.time, "monotonic", lambda: clock[0])
    sweeper = Sweeper(settings, actor="sweep")
    run_id = orphan_candidate(ledger)
    real = SqlStore.live_runs_and_owners

    def slow(self):
        clock[0] += 8.0  # the pool waited for the server to come back
        return real(self)

    monkeypatch.setattr(SqlStore, "live_runs_and_owners", slow)
    assert sweeper.settle(ledger, periodic=True).skipped_paused
    monkeypatch.setattr(SqlStore, "live_runs_and_owners", real)
    assert sweeper.settle(ledger, periodic=True).orphaned == []
    # A startup reconciliation (not periodic) is never held by it.
    assert Sweeper(settings, actor="sweep").settle(ledger).orphaned == [run_id]
