"""A clean stop while a run is being started: the start finishes (its job's pid recorded,
``running``) before the runner leaves its runs to their monitors, so the next runner
re-attaches it. Cut off halfway, the run stayed ``spawned`` with no pid while its job ran
unrecorded, and was later orphaned (``start_timeout``) — paged critical after a routine stop."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading

from core.runner import spawn
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs


def _end(gate, pid) -> None:
    """Let the job finish, and end its process group if it is still there (started here)."""
    gate.touch()
    if pid:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_run_being_started_at_a_clean_stop_is_recorded_running_and_reattached(tmp_path, monkeypatch):
    gate = tmp_path / "gate"
    specs = tmp_path / "jobs"
    write_specs(specs, f'name = "job"\nonce = true\ntimeout = "60s"\n'
                       f'command = ["sh", "-c", "echo start; until [ -e {gate} ]; do sleep 0.05; done; echo done"]\n')
    s = fast_settings(tmp_path)
    job_started, release = threading.Event(), threading.Event()
    real_start = spawn.start_monitored

    async def slow_start(*args, **kw):  # the job is up; recording it is slow (a busy ledger)
        mon = await real_start(*args, **kw)
        job_started.set()
        await asyncio.to_thread(release.wait, 30)
        return mon
    monkeypatch.setattr(spawn, "start_monitored", slow_start)
    first = RunnerThread(specs, s)
    pid = None
    try:
        with first:
            waiting = threading.Event()
            starts_done = first.runner.executor.starts_done

            async def observed(timeout):
                waiting.set()
                return await starts_done(timeout)
            monkeypatch.setattr(first.runner.executor, "starts_done", observed)
            assert job_started.wait(30)
            first.runner.request_stop("test")
            assert waiting.wait(30), "the stop did not wait for the start"
            release.set()
        (run,) = query(s.ledger, "SELECT * FROM runs")
        pid = run["pid"]
        assert run["state"] == "running" and run["pid"], run
        stopped = query(s.ledger, "SELECT detail FROM events WHERE kind = 'runner_stopped'")
        assert run["id"] in json.loads(stopped[0]["detail"])["left_running"]
        monkeypatch.setattr(spawn, "start_monitored", real_start)
        with RunnerThread(specs, s):
            wait_for(lambda: query(s.ledger, "SELECT 1 FROM events WHERE kind = 'reattached'"), timeout=30)
            gate.touch()
            wait_for(lambda: query(s.ledger, "SELECT 1 FROM runs WHERE state = 'succeeded'"), timeout=30)
        assert not query(s.ledger, "SELECT 1 FROM escalations")
    finally:
        release.set()
        _end(gate, pid)


def test_a_run_claimed_as_the_stop_arrives_is_started_and_left_to_its_monitor(tmp_path):
    """The stop cancelled the dispatch loop while its tick's claim was committing: the claimed
    run stayed ``spawned`` with no process, named nowhere (other hosts then left it so for a
    day, and the next runner paged it as interrupted). Now a claim that lands is started."""
    gate = tmp_path / "gate"
    specs = tmp_path / "jobs"
    write_specs(specs, f'name = "job"\nonce = true\ntimeout = "60s"\n'
                       f'command = ["sh", "-c", "until [ -e {gate} ]; do sleep 0.05; done"]\n')
    s = fast_settings(tmp_path)
    first = RunnerThread(specs, s)
    claiming, stop_seen = threading.Event(), threading.Event()
    pid = None
    real_tick = first.runner._dispatch_tick

    def tick_held_until_the_stop(room):
        got = real_tick(room)
        if got[0]:  # claimed and committed: the stop comes before the loop sees it
            claiming.set()
            stop_seen.wait(30)
        return got
    first.runner._dispatch_tick = tick_held_until_the_stop  # before the runner starts: its first tick claims
    try:
        with first:
            assert claiming.wait(30)
            first.runner.request_stop("test")
            wait_for(lambda: first.runner._stop.is_set(), timeout=30)
            stop_seen.set()
        (run,) = query(s.ledger, "SELECT * FROM runs")
        pid = run["pid"]
        assert run["state"] == "running" and run["pid"], run  # started, not left claimed
        stopped = query(s.ledger, "SELECT detail FROM events WHERE kind = 'runner_stopped'")
        assert run["id"] in json.loads(stopped[0]["detail"])["left_running"]
    finally:
        stop_seen.set()
        _end(gate, pid)
