"""Two writes that several runners of a fleet make at once, kept off each other's rows:

* a heartbeat renews only the leases that a sixth of their length has worn (``runners.renew``):
  a run that just started keeps the lease its start wrote, so the heartbeat never takes the
  row of a run the writer is moving on;
* a claim on PostgreSQL skips the due runs another runner is claiming right now (``FOR UPDATE
  SKIP LOCKED`` in its own ``READ COMMITTED`` transaction, ``SqlStore.claim_runs``) instead of
  waiting for them or failing serialization."""

from __future__ import annotations

import threading

import pytest

from core.ledger import queue, runners
from core.ledger.connection import Ledger
from core.ledger.dialect import is_url
from core.ledger.records import Run
from core.ledger.sql_store import SqlStore
from tests.kit.runs import add_run

T0 = 1_800_000_000.0
LEASE = 30.0


def _register(led: Ledger) -> None:
    led.write(lambda conn: runners.register_runner(
        conn, runner_id="r1", hostname="h", pid=1, pid_create_time=None, heartbeat_s=5, lease_s=LEASE, version="t",
        spec_dir="/nowhere", actor="runner:r1", now=T0))


def test_a_heartbeat_renews_only_the_leases_a_sixth_worn(ledger):
    _register(ledger)
    ids = {left: ledger.write(lambda conn, left=left: add_run(
        conn, "j", "running", at=T0, live={"runner_id": "r1", "lease_until": T0 + left}))
        for left in (LEASE, LEASE * 5 / 6 + 1, LEASE * 5 / 6 - 1, 1.0)}
    renewed = ledger.write(lambda conn: runners.renew(conn, "r1", list(ids.values()), lease_s=LEASE, now=T0))
    assert renewed == 2
    leases = {r["id"]: r["lease_until"] for r in ledger.query("SELECT id, lease_until FROM runs")}
    assert leases[ids[LEASE]] == T0 + LEASE  # fresh: left alone
    assert leases[ids[LEASE * 5 / 6 + 1]] == T0 + LEASE * 5 / 6 + 1  # not yet a sixth worn: left alone
    assert leases[ids[LEASE * 5 / 6 - 1]] == T0 + LEASE  # renewed
    assert leases[ids[1.0]] == T0 + LEASE  # renewed
    assert ledger.scalar("SELECT heartbeat_at FROM runners WHERE id = 'r1'") == T0


def test_a_claim_skips_the_runs_another_runner_is_claiming(ledger_target):
    if not is_url(ledger_target):
        pytest.skip("SQLite has one writer at a time: no two claims are ever in flight together")
    with Ledger(ledger_target) as led, Ledger(ledger_target) as other:
        _register(led)
        ids = [led.write(lambda conn, i=i: add_run(conn, "j", "queued", at=T0 + i)) for i in range(3)]
        due = [Run.from_row(r) for r in led.rows("SELECT * FROM runs ORDER BY id")]
        # Another runner's claim holds the first two runs' rows, not yet committed.
        held, release, done = threading.Event(), threading.Event(), threading.Event()

        def claiming(conn) -> set[int]:
            got = queue.lock_queued(conn, ids[:2])
            held.set()
            release.wait(30)
            return got

        def other_runner() -> None:
            other.write_alone(claiming)
            done.set()
        t = threading.Thread(target=other_runner)
        t.start()
        try:
            assert held.wait(30)
            won = SqlStore(led).claim_runs(due, runner_id="r1", actor="runner:r1", now=T0 + 10, lease_s=LEASE)
            assert not done.is_set()  # not waited for: the other claim still holds its rows
            assert won == [False, False, True]
        finally:
            release.set()
            t.join(30)
        states = [r["state"] for r in led.query("SELECT state FROM runs ORDER BY id")]
        assert states == ["queued", "queued", "spawned"]
        # Once the other claim is gone, the runs it did not take are claimable again.
        again = [Run.from_row(r) for r in led.rows("SELECT * FROM runs WHERE state = 'queued' ORDER BY id")]
        assert SqlStore(led).claim_runs(again, runner_id="r1", actor="runner:r1", now=T0 + 11,
                                        lease_s=LEASE) == [True, True]
