"""Nothing blocks the runner's event loop: while another process holds the ledger's write
lock, the loop still answers (its writes wait in the writer thread, awaited), a run's
deadline is still enforced, and once the lock is free every held write lands."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs


@pytest.mark.slow
def test_the_loop_answers_while_the_ledger_is_locked_and_nothing_is_lost(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, '''
[[job]]
name = "tick"
command = "true"
every = "1s"

[[job]]
name = "hang"
command = ["sleep", "30"]
once = true
timeout = "2s"
grace = "0.5s"
''')
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s) as rt:
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM runs WHERE job = 'hang' AND state = 'running'"))
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM runs WHERE job = 'tick' AND state = 'succeeded'"))
        pid = query(s.ledger, "SELECT pid FROM runs WHERE job = 'hang'")[0]["pid"]
        holder = sqlite3.connect(s.ledger, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # every write of the runner now waits
        try:
            answered = threading.Event()
            rt.runner._loop.call_soon_threadsafe(answered.set)
            assert answered.wait(5), "the event loop did not answer while the ledger was locked"
            # The deadline is kept whatever the ledger does: the hung job is killed meanwhile.
            deadline = time.monotonic() + 10
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _alive(pid)
            probe = threading.Event()
            rt.runner._loop.call_soon_threadsafe(probe.set)
            assert probe.wait(5), "the event loop stalled behind the locked ledger"
        finally:
            holder.execute("COMMIT")
            holder.close()
        # The writes held back land: the timeout is recorded, ticks go on succeeding.
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM runs WHERE job = 'hang' AND state = 'timed_out'"))
        before = query(s.ledger, "SELECT COUNT(*) AS n FROM runs WHERE job = 'tick' AND state = 'succeeded'")[0]["n"]
        wait_for(lambda: query(s.ledger, "SELECT COUNT(*) AS n FROM runs WHERE job = 'tick'"
                                         " AND state = 'succeeded'")[0]["n"] > before)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_a_stopped_runner_leaves_no_thread_behind(tmp_path):
    specs = tmp_path / "jobs"
    write_specs(specs, 'name = "tick"\ncommand = "true"\nevery = "1s"\n')
    s = fast_settings(tmp_path)
    before = set(threading.enumerate())
    with RunnerThread(specs, s):
        wait_for(lambda: query(s.ledger, "SELECT 1 FROM runs WHERE state = 'succeeded'"))
    # AnyIO's worker thread (watchfiles waits for inotify in it) is the library's own idle
    # cache: it ends by itself after 10 s without work.
    left = [t.name for t in set(threading.enumerate()) - before if t.is_alive() and t.name != "AnyIO worker thread"]
    assert left == []


@pytest.mark.slow
def test_the_exec_wrappers_loop_answers_while_the_ledger_is_locked(tmp_path):
    """`watchkeeper exec` renews its run's lease through its writer thread: while another
    process holds the write lock, its loop still answers (several renewals fall due meanwhile)."""
    import asyncio
    import os
    import signal

    from core.runner.execwrap import ExecWrapper
    from core.spec.loader import LoadedJob
    from core.spec.model import JobSpec
    from core.spec.settings import Settings

    db = tmp_path / "wk.db"
    s = Settings(ledger=db, heartbeat=0.2, lease=1.0)
    spec = JobSpec(name="long", command=["sleep", "30"])
    wrapper = ExecWrapper(LoadedJob(spec, str(tmp_path / "(exec)"), None), s, record=(spec, None))
    loop = asyncio.new_event_loop()
    done = threading.Event()

    def run() -> None:
        try:
            loop.run_until_complete(wrapper.run(install_signal_handlers=False))
        finally:
            done.set()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    wait_for(lambda: db.exists() and query(db, "SELECT 1 FROM runs WHERE state = 'running'"))
    pid = query(db, "SELECT pid FROM runs")[0]["pid"]
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # every write of the wrapper now waits
    try:
        time.sleep(1.0)  # five heartbeats: lease renewals fall due while the lock is held
        answered = threading.Event()
        loop.call_soon_threadsafe(answered.set)
        assert answered.wait(5), "the exec wrapper's loop stalled behind the locked ledger"
    finally:
        holder.execute("COMMIT")
        holder.close()
        os.killpg(pid, signal.SIGKILL)
    assert done.wait(60)
    t.join(5)
    loop.close()
    assert query(db, "SELECT state FROM runs")[0]["state"] == "failed"
