"""A fan-out parent waiting on its sub-tasks while the ledger is out of reach (a PostgreSQL
outage): it waits the outage out and ends as its sub-tasks did. Its reads ran on the event
loop and raised: the loop froze for the pool's 10-s wait, then the parent's task crashed and
the parent was orphaned (``runner_error``), a false critical page, with every sub-task
succeeded (found by a helper's fleet run, 1 outage in 3)."""

from __future__ import annotations

import sqlite3
import threading

from core.ledger.sql_store import SqlStore
from tests.kit.harness import RunnerThread, fast_settings, query, wait_for, write_specs

FAN = """
name = "fan"
kind = "fanout"
once = true
synthesize = "cat >/dev/null; echo synth"
[[tasks]]
name = "a"
command = "sleep 0.3"
[[tasks]]
name = "b"
command = "sleep 0.6"
"""


def test_a_fanout_parent_waits_out_an_unreachable_ledger(tmp_path, monkeypatch):
    real = SqlStore.subtask_results
    failures = {"left": 4}
    lock = threading.Lock()

    def unreachable_for_a_while(self, run_id, spec):  # the ledger answers "out of reach" 4 times
        with lock:
            if failures["left"] > 0:
                failures["left"] -= 1
                raise sqlite3.OperationalError("database is locked")
        return real(self, run_id, spec)

    monkeypatch.setattr(SqlStore, "subtask_results", unreachable_for_a_while)
    specs = tmp_path / "jobs"
    write_specs(specs, FAN)
    s = fast_settings(tmp_path)
    with RunnerThread(specs, s) as rt:
        assert wait_for(lambda: query(s.ledger, "SELECT state FROM runs WHERE job = 'fan' AND task = ''"
                                                " AND state IN ('succeeded', 'failed', 'orphaned', 'timed_out')"),
                        timeout=30)
        rt.stop()
    assert failures["left"] == 0  # the reads did fail
    parent = query(s.ledger, "SELECT state, reason_code FROM runs WHERE job = 'fan' AND task = ''")[0]
    assert (parent["state"], parent["reason_code"]) == ("succeeded", "completed"), parent
    assert query(s.ledger, "SELECT kind FROM escalations") == []
