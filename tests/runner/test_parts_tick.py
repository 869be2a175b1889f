"""The runner's parts driven by a fake clock: the scheduler queues each slot once and touches
no job that is not due; the dispatcher claims due runs within the limits. No processes."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from core.ledger import queue, runners
from core.ledger.connection import Ledger
from core.ledger.sql_store import SqlStore
from core.runner.dispatcher import Dispatcher
from core.runner.scheduler import MAX_SLEEP_S, Scheduler
from core.spec.loader import LoadedJob, load_dir

T0 = 1_800_000_000.0  # a fixed "now" (Unix seconds), a multiple of 10


def _jobs(tmp: Path, text: str) -> dict[str, LoadedJob]:
    folder = tmp / "jobs"
    folder.mkdir(exist_ok=True)
    (folder / "jobs.toml").write_text(text)
    result = load_dir(folder)
    assert not result.errors, result.errors
    return dict(result.jobs)


@pytest.fixture
def led(tmp_path):
    with Ledger(tmp_path / "wk.db") as ledger:
        yield ledger


class Spy:
    """Counts the store operations a part calls (``calls``: their names, in order)."""

    def __init__(self, led: Ledger) -> None:
        self.store = SqlStore(led)
        self.calls: list[str] = []

    def __call__(self) -> Spy:
        return self  # the part's store factory

    def __getattr__(self, name):
        self.calls.append(name)
        return getattr(self.store, name)


def _scheduler(led: Ledger, jobs: dict[str, LoadedJob]) -> tuple[Scheduler, Spy, list[int]]:
    spy = Spy(led)
    queued: list[int] = []
    s = Scheduler(store=spy, actor="runner:test", on_queued=queued.append)
    s.set_jobs(jobs)
    return s, spy, queued


def test_scheduler_queues_each_slot_once_and_sleeps_until_the_next(led, tmp_path):
    s, _spy, queued = _scheduler(led, _jobs(tmp_path, 'name = "tick"\ncommand = "true"\nevery = "10s"\n'))
    wake = s.tick(T0 + 5)
    assert queued == []
    assert wake == T0 + 10  # the next slot, not a poll interval
    assert s.tick(T0 + 10.01) == T0 + 20
    assert len(queued) == 1
    assert s.tick(T0 + 10.02) == T0 + 20  # the same slot again: nothing new
    assert len(queued) == 1
    run = SqlStore(led).run(queued[0])
    assert run is not None
    assert run.state == "queued" and run.not_before == T0 + 10 and run.trigger == "schedule"


def test_scheduler_idle_tick_touches_no_job_and_the_ledger_not_at_all(led, tmp_path):
    text = "".join(f'[[job]]\nname = "daily{i}"\ncommand = "true"\nschedule = "0 3 * * *"\ntimezone = "UTC"\n\n'
                   for i in range(300))
    s, spy, queued = _scheduler(led, _jobs(tmp_path, text))
    s.tick(T0)  # first tick: one read of the slots already queued, every job's due time computed
    assert spy.calls == ["last_scheduled_slots"]
    for k in range(1, 50):
        wake = s.tick(T0 + k * 0.5)
        assert wake <= T0 + k * 0.5 + MAX_SLEEP_S
    assert spy.calls == ["last_scheduled_slots"]
    assert queued == []


def test_scheduler_records_slots_missed_while_no_runner_ran(led, tmp_path):
    jobs = _jobs(tmp_path, 'name = "tick"\ncommand = "true"\nevery = "10s"\n')
    s, _spy, queued = _scheduler(led, jobs)
    s.tick(T0 + 5)
    s.tick(T0 + 10)
    assert len(queued) == 1
    # A new runner (fresh scheduler) starts 100 s later: the slots in between were missed.
    s2, _spy2, queued2 = _scheduler(led, jobs)
    s2.tick(T0 + 110.5)
    assert len(queued2) == 1  # only the slot that is due now
    kinds = [r[0] for r in led.query("SELECT kind FROM events WHERE job = 'tick' ORDER BY id")]
    assert "misfire_skipped" in kinds


def test_scheduler_wakes_for_a_one_shot_at_its_time(led, tmp_path):
    s, _spy, queued = _scheduler(led, _jobs(tmp_path, 'name = "later"\ncommand = "true"\nonce = true\n'
                                                       'at = 2027-01-15T08:00:00Z\n'))
    at = dt.datetime(2027, 1, 15, 8, tzinfo=dt.UTC).timestamp()
    wake = s.tick(at - 100)
    assert queued == [] and wake == at - 100 + MAX_SLEEP_S
    s.tick(at - 0.4)
    assert len(queued) == 1
    s.tick(at + 5)
    assert len(queued) == 1


def _register(led: Ledger) -> None:
    led.write(lambda conn: runners.register_runner(
        conn, runner_id="r1", hostname="h", pid=1, pid_create_time=None, heartbeat_s=5, lease_s=30, version="t",
        spec_dir="/nowhere", actor="runner:r1", now=T0))


def test_dispatcher_claims_due_runs_within_the_limits(led, tmp_path):
    jobs = _jobs(tmp_path, 'name = "a"\ncommand = "true"\nevery = "10s"\n\n'
                           '[[job]]\nname = "b"\ncommand = "true"\nevery = "10s"\nconcurrency = 2\n'.replace(
                               'name = "a"', '[[job]]\nname = "a"', 1))
    for job, slot, nb in (("a", "s1", T0), ("a", "s2", T0 + 1), ("b", "s1", T0), ("b", "s2", T0), ("b", "s3", T0 + 99)):
        led.write(lambda conn, j=job, sl=slot, n=nb: queue.queue_slot(conn, jobs[j].spec, sl, n, "misfire",
                                                                       actor="test", now=T0))
    _register(led)
    spy = Spy(led)
    d = Dispatcher(store=spy, runner_id="r1", actor="runner:r1", lease_s=30)
    d.jobs = jobs
    claimed = d.tick(T0 + 5, room=8)
    # a: concurrency 1 → one of its two due runs; b: concurrency 2 → both due ones; b/s3 is not due.
    assert sorted((c.run.job, c.run.slot) for c in claimed) == [("a", "s1"), ("b", "s1"), ("b", "s2")]
    rows = {r["slot"] + r["job"]: dict(r) for r in led.query("SELECT * FROM runs")}
    assert rows["s1a"]["state"] == "spawned" and rows["s1a"]["runner_id"] == "r1"
    assert rows["s1a"]["lease_until"] == T0 + 5 + 30
    assert rows["s2a"]["state"] == "queued"
    assert d.tick(T0 + 6, room=8) == []  # limits still full
    assert d.next_due() == T0 + 1  # a/s2 is the oldest queued run
    assert d.tick(T0 + 6, room=0) == []


def test_dispatcher_leaves_runs_of_unknown_jobs_queued(led, tmp_path):
    jobs = _jobs(tmp_path, 'name = "a"\ncommand = "true"\nevery = "10s"\n')
    led.write(lambda conn: queue.queue_slot(conn, jobs["a"].spec, "s1", T0, "misfire", actor="test", now=T0))
    d = Dispatcher(store=lambda: SqlStore(led), runner_id="r1", actor="runner:r1", lease_s=30)
    d.jobs = {}
    assert d.tick(T0 + 1, room=4) == []
    assert SqlStore(led).run_state(1) == "queued"


def test_scheduler_takes_new_specs_at_the_next_tick(led, tmp_path):
    s, _spy, queued = _scheduler(led, _jobs(tmp_path, 'name = "a"\ncommand = "true"\nevery = "1h"\n'))
    assert s.tick(T0 + 5) == T0 + 5 + MAX_SLEEP_S  # nothing due within the bound
    jobs = _jobs(tmp_path, '[[job]]\nname = "a"\ncommand = "true"\nevery = "1h"\n\n'
                           '[[job]]\nname = "b"\ncommand = "true"\nevery = "10s"\n')
    s.set_jobs(jobs)  # a reload, as the runner's loop does while ticks run in a pool thread
    assert s.tick(T0 + 6) == T0 + 10
    s.tick(T0 + 10)
    assert [r.job for i in queued if (r := SqlStore(led).run(i))] == ["b"]
